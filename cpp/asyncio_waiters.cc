#include "asyncio_waiters.h"

#include <utility>

#include "errors.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// Interned method names, made once (with the GIL) on first use.
struct Names {
  nb::object create_future = nb::steal(PyUnicode_InternFromString("create_future"));
  nb::object done = nb::steal(PyUnicode_InternFromString("done"));
  nb::object set_result = nb::steal(PyUnicode_InternFromString("set_result"));
  nb::object loop_kwname = nb::make_tuple(nb::steal(PyUnicode_InternFromString("loop")));
};

const Names& names() {
  static Names* n = new Names();  // never freed: no Python after teardown
  return *n;
}

nb::object call_method(nb::handle self, const nb::object& name,
                       PyObject* arg = nullptr) {
  PyObject* r = PyObject_CallMethodObjArgs(self.ptr(), name.ptr(), arg, nullptr);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

}  // namespace

AsyncioWaiters::AsyncioWaiters(nb::object future_type)
    : notifier_(std::make_shared<LoopNotifier>()) {
  if (!future_type.is_none()) future_type_ = std::move(future_type);
  names();
}

void AsyncioWaiters::submit(Request& request) {
  const std::shared_ptr<RequestState>& state = request.state();
  state->queue.set_notifier(notifier_, token(state.get()));
  request.submit_from_python();
}

nb::object AsyncioWaiters::next(Request& request, nb::handle loop) {
  const std::shared_ptr<RequestState>& state = request.state();
  if (!state->submitted) {
    raise(TRITONSERVER_ERROR_INVALID_ARG, "the request was not submitted");
  }
  if (state->queue.has_response()) {
    return nb::cast(QueuedResponse{state});
  }
  auto waiting = waiting_.find(token(state.get()));
  if (waiting != waiting_.end() &&
      call_method(waiting->second.future, names().done).ptr() != Py_True) {
    // Replacing that future would leave its awaiting task waiting forever.
    throw nb::value_error(
        "another task is already awaiting this response iterator; "
        "iterate it from one task at a time");
  }
  nb::object future;
  if (future_type_.is_valid()) {
    PyObject* args[] = {loop.ptr()};  // Future(loop=loop)
    PyObject* f = PyObject_Vectorcall(future_type_.ptr(), args, 0,
                                      names().loop_kwname.ptr());
    if (f == nullptr) throw nb::python_error();
    future = nb::steal(f);
  } else {
    future = call_method(loop, names().create_future);
  }
  // A response arriving from here on is reported through the notifier, and
  // on_ready runs on this thread only after this returns.
  waiting_.insert_or_assign(token(state.get()), Waiter{state, future});
  return future;
}

QueuedResponse::Step QueuedResponse::step(PyObject** result) {
  if (!yielded) {
    yielded = true;
    *result = Py_NewRef(Py_None);
    return Step::kYield;
  }
  ResponsePtr r = state ? state->queue.try_pop() : nullptr;
  if (!r) {
    // Only another task iterating the same iterator can have taken it.
    PyErr_SetString(PyExc_ValueError,
                    "another task is already awaiting this response "
                    "iterator; iterate it from one task at a time");
    *result = nullptr;
    return Step::kError;
  }
  state.reset();
  try {
    *result = nb::cast(ResponseHandle{std::move(r)}).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
    *result = nullptr;
    return Step::kError;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    *result = nullptr;
    return Step::kError;
  }
  return Step::kDone;
}

void AsyncioWaiters::forget(Request& request) noexcept {
  auto it = waiting_.find(token(request.state().get()));
  if (it == waiting_.end()) return;
  Waiter gone = std::move(it->second);  // released after the erase
  waiting_.erase(it);
}

void AsyncioWaiters::on_ready() {
  // A local buffer: set_result runs no callbacks itself, but a re-entrant
  // call must not see this one's tokens.
  std::vector<uint64_t> tokens;
  tokens.swap(spare_);
  notifier_->drain_into(tokens);
  const Names& n = names();
  for (uint64_t t : tokens) {
    auto it = waiting_.find(t);
    if (it == waiting_.end()) continue;  // nobody waits: next() takes it
    try {
      if (call_method(it->second.future, n.done).ptr() == Py_True) {
        waiting_.erase(it);  // the awaiting task was cancelled
        continue;
      }
      ResponsePtr r = it->second.state->queue.try_pop();
      if (!r) continue;
      nb::object future = std::move(it->second.future);
      waiting_.erase(it);
      nb::object response = nb::cast(ResponseHandle{std::move(r)});
      call_method(future, n.set_result, response.ptr());
    } catch (nb::python_error& e) {
      // One waiter's failure must not strand the others.
      e.discard_as_unraisable("tritonserver: resolving an asyncio response future");
    }
  }
  tokens.clear();
  spare_.swap(tokens);
}

int AsyncioWaiters::traverse(visitproc visit, void* arg) {
  Py_VISIT(future_type_.ptr());
  for (auto& [t, w] : waiting_) Py_VISIT(w.future.ptr());
  return 0;
}

void AsyncioWaiters::clear() noexcept {
  std::unordered_map<uint64_t, Waiter> gone;
  gone.swap(waiting_);  // released after the swap: a finalizer may re-enter
}

}  // namespace tsb

#include "asyncio_waiters.h"

#include <utility>

#include "errors.h"
#include "response_view.h"
#include "type_slots.h"

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

nb::object AsyncioWaiters::next(std::shared_ptr<ResponseQueue> queue,
                                nb::handle loop) {
  if (queue->has_response()) {
    return nb::cast(QueuedResponse{std::move(queue)});
  }
  auto waiting = waiting_.find(queue->token());
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
  const uint64_t token = queue->token();
  waiting_.insert_or_assign(token, Waiter{std::move(queue), future});
  return future;
}

QueuedResponse::Step QueuedResponse::step(PyObject** result) {
  if (!yielded) {
    yielded = true;
    *result = Py_NewRef(Py_None);
    return Step::kYield;
  }
  ResponsePtr r = queue ? queue->try_pop() : nullptr;
  if (!r) {
    // Only another task iterating the same iterator can have taken it.
    PyErr_SetString(PyExc_ValueError,
                    "another task is already awaiting this response "
                    "iterator; iterate it from one task at a time");
    *result = nullptr;
    return Step::kError;
  }
  queue.reset();
  try {
    *result = response_to_python(std::move(r)).release().ptr();
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

void AsyncioWaiters::forget(const ResponseQueue* queue) noexcept {
  auto it = waiting_.find(queue->token());
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
      ResponsePtr r = it->second.queue->try_pop();
      if (!r) continue;
      nb::object future = std::move(it->second.future);
      waiting_.erase(it);
      nb::object response = response_to_python(std::move(r));
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

namespace {

// __await__ and __iter__ return the object itself (self_slot); each
// resumption (send(None), or next() where CPython calls tp_iternext
// directly) runs one step: first the yield, then the response.

PySendResult queued_send(PyObject* self, PyObject*, PyObject** result) {
  switch (nb::inst_ptr<QueuedResponse>(self)->step(result)) {
    case QueuedResponse::Step::kYield: return PYGEN_NEXT;
    case QueuedResponse::Step::kDone: return PYGEN_RETURN;
    default: return PYGEN_ERROR;
  }
}

PyObject* queued_next(PyObject* self) {
  PyObject* result = nullptr;
  switch (nb::inst_ptr<QueuedResponse>(self)->step(&result)) {
    case QueuedResponse::Step::kYield:
      return result;
    case QueuedResponse::Step::kDone: {
      // The await's value travels as StopIteration(value).
      PyObject* stop =
          PyObject_CallFunctionObjArgs(PyExc_StopIteration, result, nullptr);
      Py_DECREF(result);
      if (stop != nullptr) {
        PyErr_SetObject(PyExc_StopIteration, stop);
        Py_DECREF(stop);
      }
      return nullptr;
    }
    default:
      return nullptr;
  }
}

}  // namespace

PyType_Slot asyncio_waiters_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse_slot<AsyncioWaiters>)},
    {Py_tp_clear, reinterpret_cast<void*>(clear_slot<AsyncioWaiters>)},
    {0, nullptr}};

PyType_Slot queued_response_slots[] = {
    {Py_am_await, reinterpret_cast<void*>(self_slot)},
    {Py_am_send, reinterpret_cast<void*>(queued_send)},
    {Py_tp_iter, reinterpret_cast<void*>(self_slot)},
    {Py_tp_iternext, reinterpret_cast<void*>(queued_next)},
    {0, nullptr}};

}  // namespace tsb

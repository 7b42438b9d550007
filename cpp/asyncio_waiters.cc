#include "asyncio_waiters.h"

#include <sys/epoll.h>

#include <utility>

#include "errors.h"
#include "spin_wait.h"
#include "type_slots.h"

namespace nb = nanobind;

namespace tsb {

namespace {

// poll_news checks the loop's epoll instance once every this many checks
// of its own news (each check is about a microsecond apart).
constexpr unsigned kPollsPerEpollCheck = 8;

// Interned method names, made once (with the GIL) on first use.
struct Names {
  nb::object create_future = nb::steal(PyUnicode_InternFromString("create_future"));
  nb::object done = nb::steal(PyUnicode_InternFromString("done"));
  nb::object set_result = nb::steal(PyUnicode_InternFromString("set_result"));
  nb::object loop_kwname = nb::make_tuple(nb::steal(PyUnicode_InternFromString("loop")));
  // asyncio._get_running_loop (C in CPython): the loop running in this
  // thread, or None. asyncio is imported: the waiters are made by it.
  nb::object get_running_loop = nb::module_::import_("asyncio").attr("_get_running_loop");
};

// Not a function-local static: making the names runs Python (an import),
// which can let the GIL go while a static's guard is held (python_backend/numpy_views.cc).
Names* g_names = nullptr;

const Names& names() {
  if (g_names == nullptr) {
    auto* made = new Names();  // never freed: no Python after teardown
    if (g_names == nullptr) g_names = made; else delete made;
  }
  return *g_names;
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

nb::object AsyncioWaiters::future_for(std::shared_ptr<ResponseQueue> queue,
                                      nb::handle loop) {
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

namespace {

// The InferenceResponse of `stream` for the Response `native`; null with
// the error set on failure (or when the stream raises the response's
// error).
PyObject* deliver_python(AsyncResponseStream& stream, const ResponseData& data) {
  try {
    return stream.deliver(data).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

// Takes the queued response (or, once the stream is cancelled, its
// cancelled end) and returns it as the awaitable's result.
PySendResult take_queued(AsyncResponseStream& s, PyObject** result) {
  ResponsePtr r = s.native_request->queue()->try_pop();
  if (!r && s.cancelled) r = cancelled_end();
  if (!r) {
    // Only another task iterating the same iterator can have taken it.
    PyErr_SetString(PyExc_ValueError,
                    "another task is already awaiting this response "
                    "iterator; iterate it from one task at a time");
    return PYGEN_ERROR;
  }
  *result = deliver_python(s, *r);
  return *result != nullptr ? PYGEN_RETURN : PYGEN_ERROR;
}

}  // namespace

PySendResult NextResponse::send(PyObject* value, PyObject** result) {
  *result = nullptr;
  AsyncResponseStream& s = *nb::inst_ptr<AsyncResponseStream>(stream);
  switch (state) {
    case State::kTaking: {  // after the turn of the loop
      state = State::kDone;
      return take_queued(s, result);
    }
    case State::kStart: {
      if (s.complete) {  // another task took the final response meanwhile
        state = State::kDone;
        PyErr_SetNone(PyExc_StopAsyncIteration);
        return PYGEN_ERROR;
      }
      if (s.waiters == nullptr) {
        state = State::kDone;
        PyErr_SetString(PyExc_RuntimeError, "the response iterator was cleared");
        return PYGEN_ERROR;
      }
      if (s.cancelled) {  // ends at once: nothing more is awaited
        state = State::kDone;
        *result = deliver_python(s, *cancelled_end());
        return *result != nullptr ? PYGEN_RETURN : PYGEN_ERROR;
      }
      {
        // Its wake-ups reach the loop async_infer() ran in: awaited from
        // another loop it would wait on a future of the first (asyncio:
        // "attached to a different loop"), or take a queued response in
        // passing. Refused the same way in both cases, before anything is
        // taken: the iterator stays usable in its own loop. (Resumed with
        // no loop running, e.g. by hand, it is not refused.)
        PyObject* running = PyObject_CallNoArgs(names().get_running_loop.ptr());
        if (running == nullptr) {
          state = State::kDone;
          return PYGEN_ERROR;
        }
        const bool other = running != Py_None && running != s.loop.ptr();
        Py_DECREF(running);
        if (other) {
          state = State::kDone;
          PyErr_SetString(PyExc_RuntimeError,
                          "this AsyncResponseIterator is awaited in another event loop than "
                          "the one async_infer() ran in: an asyncio response iterator "
                          "delivers its responses only to that loop; iterate it there, or "
                          "call async_infer() in this loop");
          return PYGEN_ERROR;
        }
      }
      try {
        std::shared_ptr<ResponseQueue> queue = s.native_request->submitted_queue();
        if (queue->has_response()) {  // the turn of the loop: a bare yield
          // Behind the tasks whose responses came before this one and
          // whose wake-up the loop has not read yet: responses reach their
          // tasks in the order they came (a gRPC stream's answers, as
          // NVIDIA's binary writes them).
          s.waiters->resolve_before(queue->token());
          state = State::kTaking;
          *result = Py_NewRef(Py_None);
          return PYGEN_NEXT;
        }
        future = s.waiters->future_for(std::move(queue), s.loop);
      } catch (...) {
        state = State::kDone;
        set_error_from_current_exception();
        return PYGEN_ERROR;
      }
      state = State::kAwaiting;
      // From here on the future's own await protocol.
      auto await_slot = reinterpret_cast<unaryfunc>(
          PyType_GetSlot(Py_TYPE(future.ptr()), Py_am_await));
      PyObject* it = await_slot != nullptr ? await_slot(future.ptr()) : nullptr;
      if (it == nullptr) {
        if (!PyErr_Occurred()) {
          PyErr_SetString(PyExc_TypeError, "the loop's future is not awaitable");
        }
        abandon();
        return PYGEN_ERROR;
      }
      steps = nb::steal(it);
      [[fallthrough]];
    }
    case State::kAwaiting: {
      PyObject* out = nullptr;
      const PySendResult step = PyIter_Send(steps.ptr(), value, &out);
      if (step == PYGEN_NEXT) {  // the future itself, for the task to wait on
        *result = out;
        return PYGEN_NEXT;
      }
      if (step == PYGEN_ERROR) {  // cancelled, or the loop is closing
        abandon();
        return PYGEN_ERROR;
      }
      // The future only says a response is queued (on_ready resolved it
      // with None): take it off the queue here, as after the bare yield.
      state = State::kDone;
      Py_XDECREF(out);
      future = nb::object();
      steps = nb::object();
      return take_queued(s, result);
    }
    case State::kDone:
      break;
  }
  PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited __anext__()");
  return PYGEN_ERROR;
}

void NextResponse::abandon() noexcept {
  if (state == State::kAwaiting && stream.is_valid()) {
    AsyncResponseStream& s = *nb::inst_ptr<AsyncResponseStream>(stream);
    if (s.waiters != nullptr) s.waiters->forget(s.native_request->queue().get());
  }
  state = State::kDone;
  nb::object gone[] = {std::move(future), std::move(steps)};
}

PyObject* NextResponse::step(PyObject* value) {
  PyObject* result = nullptr;
  switch (send(value, &result)) {
    case PYGEN_NEXT:
      return result;
    case PYGEN_RETURN: {
      // The await's value travels as StopIteration(value).
      PyObject* stop = PyObject_CallFunctionObjArgs(PyExc_StopIteration, result, nullptr);
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

void NextResponse::throw_in(PyObject* type, PyObject* value, PyObject* traceback) {
  abandon();
  // As a generator's throw(): an exception instance, or an exception class
  // with an optional argument.
  nb::object error;
  if (PyExceptionInstance_Check(type)) {
    if (value != Py_None) {
      PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
      return;
    }
    error = nb::borrow(type);
  } else if (PyExceptionClass_Check(type)) {
    if (value != Py_None && PyObject_IsInstance(value, type) == 1) {
      error = nb::borrow(value);
    } else {
      PyObject* made = value == Py_None
                           ? PyObject_CallNoArgs(type)
                           : PyObject_CallFunctionObjArgs(type, value, nullptr);
      if (made == nullptr) return;
      error = nb::steal(made);
    }
  } else {
    PyErr_SetString(PyExc_TypeError,
                    "exceptions must be classes or instances deriving from BaseException");
    return;
  }
  if (traceback != Py_None && PyException_SetTraceback(error.ptr(), traceback) != 0) return;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

int NextResponse::traverse(visitproc visit, void* arg) {
  Py_VISIT(stream.ptr());
  Py_VISIT(future.ptr());
  Py_VISIT(steps.ptr());
  return 0;
}

void NextResponse::clear() noexcept {
  abandon();  // the waiters let go of the future first
  nb::object gone = std::move(stream);
}

AsyncResponseStream::AsyncResponseStream(nb::object model_, nb::object request_,
                                         nb::object inference_request_, bool raise,
                                         nb::object loop_, nb::object waiters_)
    : ResponseStream(std::move(model_), std::move(request_),
                     std::move(inference_request_), raise),
      loop(std::move(loop_)),
      waiters_object(std::move(waiters_)),
      waiters(&nb::cast<AsyncioWaiters&>(waiters_object)) {}

int AsyncResponseStream::traverse(visitproc visit, void* arg) {
  Py_VISIT(loop.ptr());
  Py_VISIT(waiters_object.ptr());
  return ResponseStream::traverse(visit, arg);
}

void AsyncResponseStream::clear() noexcept {
  waiters = nullptr;
  nb::object gone[] = {std::move(loop), std::move(waiters_object)};
  ResponseStream::clear();
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
  resolve(tokens);
  tokens.clear();
  spare_.swap(tokens);
}

bool AsyncioWaiters::poll_news(int epoll_fd, double timeout_s) {
  if (waiting_.empty()) return false;
  const LoopNotifier* notifier = notifier_.get();
  if (notifier->has_news()) return true;
  nb::gil_scoped_release release;
  const SpinWait wait;
  unsigned polls = 0;
  return wait.poll(
      [notifier, epoll_fd, &polls] {
        if (notifier->has_news()) return true;
        // The loop's other descriptors, on the first poll (the only one
        // when the wait does not poll: spin_wait.h) and every few after (a
        // syscall each); level-triggered: its select() reports them again.
        epoll_event event;
        return polls++ % kPollsPerEpollCheck == 0 &&
               epoll_wait(epoll_fd, &event, 1, 0) > 0;
      },
      timeout_s);
}

void AsyncioWaiters::resolve_before(uint64_t token) {
  std::vector<uint64_t> tokens;
  notifier_->take_before(token, tokens);
  resolve(tokens);
}

void AsyncioWaiters::resolve(const std::vector<uint64_t>& tokens) {
  const Names& n = names();
  for (uint64_t t : tokens) {
    auto it = waiting_.find(t);
    if (it == waiting_.end()) continue;  // nobody waits: next() takes it
    try {
      if (call_method(it->second.future, n.done).ptr() == Py_True) {
        waiting_.erase(it);  // the awaiting task was cancelled
        continue;
      }
      if (!it->second.queue->has_response_now()) continue;
      nb::object future = std::move(it->second.future);
      waiting_.erase(it);
      // The awaiting NextResponse takes the response off the queue itself.
      call_method(future, n.set_result, Py_None);
    } catch (nb::python_error& e) {
      // One waiter's failure must not strand the others.
      e.discard_as_unraisable("tritonserver: resolving an asyncio response future");
    }
  }
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

// NextResponse: __await__ and __iter__ return the object itself; each
// resumption (am_send, or tp_iternext where CPython calls that) runs one
// step.

PySendResult next_response_send(PyObject* self, PyObject* value, PyObject** result) {
  return nb::inst_ptr<NextResponse>(self)->send(value, result);
}

PyObject* next_response_next(PyObject* self) {
  return nb::inst_ptr<NextResponse>(self)->step(Py_None);
}

// AsyncResponseStream.__anext__: the NextResponse, or StopAsyncIteration
// raised here once the final response was delivered.
PyObject* async_stream_anext(PyObject* self) {
  if (!nb::inst_ready(self)) {
    PyErr_SetString(PyExc_TypeError, "AsyncResponseStream.__init__() was not called");
    return nullptr;
  }
  if (nb::inst_ptr<AsyncResponseStream>(self)->complete) {
    PyErr_SetNone(PyExc_StopAsyncIteration);
    return nullptr;
  }
  try {
    return nb::cast(NextResponse(nb::borrow(self))).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
    return nullptr;
  }
}

PyObject* not_sync_iterable(PyObject*) {
  PyErr_SetString(PyExc_TypeError,
                  "AsyncResponseIterator is iterated with 'async for'");
  return nullptr;
}

}  // namespace

PyType_Slot next_response_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse_slot<NextResponse>)},
    {Py_tp_clear, reinterpret_cast<void*>(clear_slot<NextResponse>)},
    {Py_am_await, reinterpret_cast<void*>(self_slot)},
    {Py_am_send, reinterpret_cast<void*>(next_response_send)},
    {Py_tp_iter, reinterpret_cast<void*>(self_slot)},
    {Py_tp_iternext, reinterpret_cast<void*>(next_response_next)},
    {0, nullptr}};

PyType_Slot async_response_stream_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse_slot<AsyncResponseStream>)},
    {Py_tp_clear, reinterpret_cast<void*>(clear_slot<AsyncResponseStream>)},
    {Py_am_aiter, reinterpret_cast<void*>(self_slot)},
    {Py_am_anext, reinterpret_cast<void*>(async_stream_anext)},
    {Py_tp_iter, reinterpret_cast<void*>(not_sync_iterable)},
    {Py_tp_iternext, reinterpret_cast<void*>(not_sync_iterable)},
    {0, nullptr}};

PyType_Slot asyncio_waiters_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse_slot<AsyncioWaiters>)},
    {Py_tp_clear, reinterpret_cast<void*>(clear_slot<AsyncioWaiters>)},
    {0, nullptr}};

}  // namespace tsb

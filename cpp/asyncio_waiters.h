// How a response reaches asyncio: one AsyncioWaiters per event loop, owned
// by Python and used only on the loop's thread.
//
// A request's queue is attached to the loop's LoopNotifier when the request
// is submitted (one native call). On each response a Triton thread tells the notifier which
// request has news and, if the loop was not already due to look, writes its
// eventfd; nothing on that thread touches Python. The loop's reader callback
// (on_ready) then resolves the futures awaiting those requests, in one
// native call per wake-up; a future's result is None, and the awaiting task
// takes the response off its queue itself when it resumes (so a task
// cancelled meanwhile leaves the response queued).
//
// Fairness: every response handed out costs its task one turn of the loop.
// A response already queued when the task asks is not returned at once (a
// task could then chain requests of a fast model without ever letting the
// loop run its other tasks): the awaitable yields once and only then takes
// the response.
//
// AsyncResponseStream is the native base of tritonserver's
// AsyncResponseIterator: its __anext__ (a type slot, no Python frame)
// returns a NextResponse, or raises StopAsyncIteration itself after the
// final response.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "response_queue.h"
#include "response_view.h"

namespace tsb {

class AsyncioWaiters;

// The native state of an asyncio response iterator: a ResponseStream with
// the loop it was submitted on and that loop's waiters.
struct AsyncResponseStream : ResponseStream {
  nanobind::object loop, waiters_object;
  AsyncioWaiters* waiters;  // of waiters_object, which keeps it alive

  AsyncResponseStream(nanobind::object model_, nanobind::object request_,
                      nanobind::object inference_request_, bool raise,
                      nanobind::object loop_, nanobind::object waiters_);
  int traverse(visitproc visit, void* arg);
  void clear() noexcept;
};
extern PyType_Slot async_response_stream_slots[];

// The awaitable of one response of an AsyncResponseStream, with the
// coroutine protocol (send, throw, close, __await__), so that asyncio also
// accepts it as a coroutine (asyncio.create_task(iterator.__anext__())).
// Like a coroutine it does nothing until first resumed. Then either the
// response is already queued (one bare yield: asyncio's task reschedules
// itself behind the loop's other ready callbacks; kTaking takes the
// response when resumed, so a task cancelled during that turn leaves it
// queued) or a future of the loop waits for it (kAwaiting: the future's own
// await steps; AsyncioWaiters::on_ready resolves it). The result is the
// stream's InferenceResponse (ResponseStream::deliver: raising its error
// when the stream raises on errors).
struct NextResponse {
  enum class State { kStart, kTaking, kAwaiting, kDone };
  nanobind::object stream;  // the AsyncResponseStream
  State state = State::kStart;
  nanobind::object future, steps;  // kAwaiting: the future, its __await__()

  explicit NextResponse(nanobind::object stream_) : stream(std::move(stream_)) {}
  NextResponse(NextResponse&&) = default;
  // Dropped while awaiting (never resumed again): the waiters let go.
  ~NextResponse() { abandon(); }

  // One resumption: PYGEN_NEXT with `*result` the value to yield,
  // PYGEN_RETURN with the InferenceResponse, or PYGEN_ERROR (error set).
  PySendResult send(PyObject* value, PyObject** result);
  // send() as an iterator step: the yielded value, or null with the error
  // set (StopIteration(response) at the end).
  PyObject* step(PyObject* value);
  // close(), and before throw_in(): the waiters stop holding the future;
  // the response, if queued, stays queued.
  void abandon() noexcept;
  // throw(type[, value[, traceback]]) as a generator's: sets the error
  // to raise.
  void throw_in(PyObject* type, PyObject* value, PyObject* traceback);
  int traverse(visitproc visit, void* arg);
  void clear() noexcept;
};
extern PyType_Slot next_response_slots[];
// AsyncioWaiters' garbage-collector slots (it holds futures, which hold
// their loop, whose reader callback holds the waiters).
extern PyType_Slot asyncio_waiters_slots[];

class AsyncioWaiters {
 public:
  // `future_type`: asyncio.Future when the loop's create_future() is
  // asyncio's own (the future is then made as Future(loop=loop), without
  // the Python frame of create_future), else None.
  explicit AsyncioWaiters(nanobind::object future_type);
  AsyncioWaiters(const AsyncioWaiters&) = delete;
  AsyncioWaiters& operator=(const AsyncioWaiters&) = delete;

  int fd() const noexcept { return notifier_->fd(); }
  // The notifier a request is submitted with (Request::submit_from_python)
  // so that its queue's wake-ups reach this loop.
  const std::shared_ptr<LoopNotifier>& notifier() const noexcept {
    return notifier_;
  }
  // A new future of `loop` (Future(loop=loop), or loop.create_future())
  // that on_ready resolves (with None) once `queue` has a response; raises
  // ValueError while another task awaits one of that queue.
  nanobind::object future_for(std::shared_ptr<ResponseQueue> queue,
                              nanobind::handle loop);
  // Forgets the queue's waiting future (its awaiting task was cancelled).
  void forget(const ResponseQueue* queue) noexcept;
  // The loop's reader callback.
  void on_ready();
  // Resolves, as on_ready does, the futures of the responses whose news
  // came before `token`'s first pending news (none when it has none
  // pending: its news was read already, so every pending one came after
  // it); the rest stay for on_ready.
  void resolve_before(uint64_t token);
  size_t waiting() const noexcept { return waiting_.size(); }
  // The loop's poll before it sleeps in its selector's epoll_wait()
  // (_asyncio_waiters.py's _PollingSelector): while a task awaits a
  // response, polls, the GIL released, as a sync waiter does (spin_wait.h:
  // bounded, backing off), for news or any other event of `epoll_fd` (the
  // selector's own epoll instance: the loop's other I/O is not held up);
  // true when something came (the selector then need not sleep).
  bool poll_news(int epoll_fd, double timeout_s);

  // Garbage-collector support: the futures held, visited and dropped.
  int traverse(visitproc visit, void* arg);
  void clear() noexcept;

 private:
  // Keyed by the queue's token; the entry keeps the queue alive.
  struct Waiter {
    std::shared_ptr<ResponseQueue> queue;
    nanobind::object future;
  };

  void resolve(const std::vector<uint64_t>& tokens);

  nanobind::object future_type_;  // null: call loop.create_future()
  std::shared_ptr<LoopNotifier> notifier_;
  std::unordered_map<uint64_t, Waiter> waiting_;
  std::vector<uint64_t> spare_;  // reused drain buffer
};

}  // namespace tsb

// How a response reaches asyncio: one AsyncioWaiters per event loop, owned
// by Python and used only on the loop's thread.
//
// A request's queue is attached to the loop's LoopNotifier when the request
// is submitted (one native call). On each response a Triton thread tells the notifier which
// request has news and, if the loop was not already due to look, writes its
// eventfd; nothing on that thread touches Python. The loop's reader callback
// (on_ready) then takes those requests' responses off their queues and
// resolves the futures awaiting them, in one native call per wake-up.
//
// Fairness: every response handed out costs its task one turn of the loop.
// A response already queued when the task asks is not returned at once (a
// task could then chain requests of a fast model without ever letting the
// loop run its other tasks): next() returns a QueuedResponse, awaited like
// the future, which yields once and only then takes the response.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "response_queue.h"

namespace tsb {

// The awaitable next() returns when a response is already queued. Awaiting
// it suspends the task once (a bare yield: asyncio's task reschedules itself
// behind the loop's other ready callbacks), then takes the response off the
// queue. A task cancelled during that turn leaves the response queued.
struct QueuedResponse {
  std::shared_ptr<ResponseQueue> queue;
  bool yielded = false;
  // The await protocol (the type slots below). `step` runs once per
  // resumption: first kYield with `*result` None, then kDone with
  // `*result` the response, or kError with a Python error set.
  enum class Step { kYield, kDone, kError };
  Step step(PyObject** result);
};
// QueuedResponse's await and iterator slots, for its nanobind class.
extern PyType_Slot queued_response_slots[];
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
  // An awaitable of the next response of a submitted request's `queue`: a
  // QueuedResponse if one is queued; otherwise a new future of `loop`
  // (loop.create_future()) that on_ready resolves with it. Either way the
  // awaiting task yields once.
  nanobind::object next(std::shared_ptr<ResponseQueue> queue,
                        nanobind::handle loop);
  // Forgets the queue's waiting future (its awaiting task was cancelled).
  void forget(const ResponseQueue* queue) noexcept;
  // The loop's reader callback.
  void on_ready();
  size_t waiting() const noexcept { return waiting_.size(); }

  // Garbage-collector support: the futures held, visited and dropped.
  int traverse(visitproc visit, void* arg);
  void clear() noexcept;

 private:
  // Keyed by the queue's token; the entry keeps the queue alive.
  struct Waiter {
    std::shared_ptr<ResponseQueue> queue;
    nanobind::object future;
  };

  nanobind::object future_type_;  // null: call loop.create_future()
  std::shared_ptr<LoopNotifier> notifier_;
  std::unordered_map<uint64_t, Waiter> waiting_;
  std::vector<uint64_t> spare_;  // reused drain buffer
};

}  // namespace tsb

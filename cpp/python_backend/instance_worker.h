// The Python thread of one in-process python model instance, for the times
// when requests arrive faster than they run. The core calls a backend's
// execute once per batch it forms (one request, for a model without a
// batcher) on the instance's own thread, and each call would take the GIL
// once: with a client loop that needs the GIL too, every request then moves
// the GIL between two threads twice (a futex wake and a sleep on each
// side). Handed to this worker instead, the core's execute returns at once
// and the worker runs every batch queued meanwhile under one hold of the
// GIL, then sends their final responses together.
//
// Used only where the core's scheduling does not depend on execute taking
// its time: one instance (with several, the core spreads requests over the
// instances by which one is free) and no batcher (the dynamic and sequence
// batchers form batches while the instance is busy). Then a batch goes to
// the worker when the worker is busy or other requests of this package are
// in flight; a lone request runs on the core's thread as before (a hand-off
// would only add a thread wake-up to its latency). Batches run in the
// order the core gave them, one at a time, as the core would.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "../triton_api.h"

namespace tsb {

class InstanceWorker {
 public:
  using Batch = std::vector<TRITONBACKEND_Request*>;
  // `execute` runs one batch (the GIL held); `done` sends what the batches
  // run since the last `done` left to send (the GIL not held);
  // `live_requests` counts this package's requests in flight (no lock, no
  // GIL; python_backend.h).
  InstanceWorker(std::function<void(Batch&)> execute,
                 std::function<void()> done, uint32_t (*live_requests)() noexcept);
  InstanceWorker(const InstanceWorker&) = delete;
  InstanceWorker& operator=(const InstanceWorker&) = delete;

  // On the core's thread, no GIL: true when the batch was queued for the
  // worker (then the requests are the worker's), false when the caller
  // should run it itself, now. Never throws (false when it cannot queue).
  bool offer(TRITONBACKEND_Request** requests, uint32_t count) noexcept;

  // The worker thread's body, called from Python (a threading.Thread the
  // runtime starts) with the GIL held: returns after stop().
  void run();
  // Runs what is queued, ends run() and waits for it to return. Call
  // without the GIL; never throws. Before run() started: returns at once
  // (nothing can have been queued).
  void stop() noexcept;

 private:
  std::function<void(Batch&)> execute_;
  std::function<void()> done_;
  uint32_t (*live_requests_)() noexcept;
  std::mutex mutex_;
  std::condition_variable wake_;     // work queued, or stop
  std::condition_variable stopped_;  // run() returned
  std::deque<Batch> queue_;
  bool started_ = false;
  bool busy_ = false;  // running batches (their responses not yet sent)
  bool stopping_ = false;
  bool exited_ = false;
};

}  // namespace tsb

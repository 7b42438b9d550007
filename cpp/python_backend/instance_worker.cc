#include "instance_worker.h"

#include <nanobind/nanobind.h>

#include <utility>

#include "../thread_state.h"

namespace tsb {
namespace {

// The most batches run under one hold of the GIL: their final responses
// wait for the last of them, so this bounds the latency the grouping adds.
constexpr int kMaxBatchesPerHold = 32;

}  // namespace

InstanceWorker::InstanceWorker(std::function<void(Batch&)> execute,
                               std::function<void()> done,
                               uint32_t (*live_requests)() noexcept)
    : execute_(std::move(execute)), done_(std::move(done)),
      live_requests_(live_requests) {}

bool InstanceWorker::offer(TRITONBACKEND_Request** requests,
                           uint32_t count) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_) return false;
    const bool idle = queue_.empty() && !busy_;
    if (idle && live_requests_() <= count) return false;
    queue_.emplace_back(requests, requests + count);
    if (idle) wake_.notify_one();
    return true;
  } catch (...) {  // no memory for the queue: run it on the caller's thread
    return false;
  }
}

void InstanceWorker::run() {
  {
    GilRelease release;
    std::unique_lock<std::mutex> lock(mutex_);
    started_ = true;
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and nothing left to run
      busy_ = true;
      {
        // The GIL is taken before the queue is let go: meanwhile the core's
        // thread waits here, in offer(), rather than on the core's own
        // queue, where each request the event loop submits would wake it
        // (a thread wake-up per request, paid by the loop under the GIL).
        GilAcquire gil;
        lock.unlock();
        std::unique_lock<std::mutex> take(mutex_);
        for (int n = 0; n < kMaxBatchesPerHold && !queue_.empty(); ++n) {
          Batch batch = std::move(queue_.front());
          queue_.pop_front();
          take.unlock();
          execute_(batch);  // answers its requests, whatever happens
          take.lock();
        }
      }
      done_();
      lock.lock();
      busy_ = !queue_.empty();
    }
    exited_ = true;
    stopped_.notify_all();  // under the lock: stop()'s caller may then delete this
  }
}

void InstanceWorker::stop() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  stopping_ = true;
  if (!started_) return;
  wake_.notify_one();
  stopped_.wait(lock, [&] { return exited_; });
}

}  // namespace tsb

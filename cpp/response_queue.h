// Handoff of responses from Triton's threads to Python waiters.
//
// Triton's response callback (on_response()) runs on a Triton thread
// and never touches Python: it reads the response into plain data
// (response.h), appends it to the request's queue under a mutex, wakes a
// blocked sync waiter (condition variable) and, for asyncio, tells the
// waiter's LoopNotifier which queue has news.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "dispatch_queue.h"
#include "response.h"
#include "triton_api.h"

namespace tsb {

// One per asyncio event loop: an eventfd the loop watches, plus the tokens
// of the queues that received responses since the loop last looked. The
// fd is written only when the list goes from empty to non-empty, and it is
// closed only when no request refers to the notifier any more.
class LoopNotifier {
 public:
  LoopNotifier();
  ~LoopNotifier();
  LoopNotifier(const LoopNotifier&) = delete;
  LoopNotifier& operator=(const LoopNotifier&) = delete;
  int fd() const noexcept { return fd_; }
  void notify(uint64_t token) noexcept;
  // Tokens with news since the last call, into `out` (empty on entry), by
  // swapping buffers: no allocation once both have grown. Also clears the
  // eventfd.
  void drain_into(std::vector<uint64_t>& out);
  // The tokens with news before `token`'s first, into `out` (empty on
  // entry), leaving `token`'s and the later ones (and the eventfd) as they
  // are; nothing when `token` has none.
  void take_before(uint64_t token, std::vector<uint64_t>& out);
  // Whether news came since the last drain_into (read without the mutex:
  // the loop's brief poll before it sleeps, AsyncioWaiters::poll_news).
  bool has_news() const noexcept {
    return has_news_.load(std::memory_order_acquire);
  }

 private:
  int fd_;
  std::mutex mutex_;
  std::vector<uint64_t> ready_;
  std::atomic<bool> has_news_{false};  // ready_ is not empty
};

// Takes a request's responses instead of its queue, on Triton's thread,
// without the GIL (the native HTTP transport's infer replies,
// kserve_infer.h): whatever it does must not block nor touch Python.
class ResponseSink {
 public:
  virtual ~ResponseSink() = default;
  virtual void take(ResponsePtr response) noexcept = 0;
};

// Which response of a request that gets one answer is the answer: the
// first with outputs or an error, or the first final one; not the
// cancelled end (the client left: nobody to answer).
class AnswerOnce {
 public:
  bool is_answer(const ResponseData& data) noexcept {
    if (done_.load(std::memory_order_acquire)) return false;
    if (!data.has_error && data.outputs.empty() && !data.final) return false;  // await the next
    if (done_.exchange(true)) return false;
    return !data.cancelled;
  }

 private:
  std::atomic<bool> done_{false};
};

// A sink whose request gets one answer (a native transport's infer reply,
// AnswerOnce): answer() gets it; every other response is dropped.
class AnswerOnceSink : public ResponseSink {
 public:
  void take(ResponsePtr response) noexcept final {
    if (once_.is_answer(*response)) answer(*response);
  }

 protected:
  // On Triton's thread (or the submitting one), as take().
  virtual void answer(const ResponseData& data) noexcept = 0;

 private:
  AnswerOnce once_;
};

// A request's responses. The common single response is kept inline (no
// allocation per request); only a second queued response (a stream whose
// consumer lags) allocates the overflow deque.
class ResponseQueue {
 public:
  void push(ResponsePtr response) noexcept;
  // Blocks (the caller releases the GIL) until a response is there or
  // `timeout_s` passes (negative: no limit). Returns null on timeout. With
  // `poll`, polls briefly before it sleeps (spin_wait.h): once per wait,
  // not again in each later slice of a wait cut into slices.
  ResponsePtr pop(double timeout_s, bool poll = true);
  ResponsePtr try_pop();
  // A response just popped goes back, first in line (its taker could not
  // hand it on); no waiter is woken: the taker is the one that waits.
  void put_back(ResponsePtr response) noexcept;
  // Whether a response is queued (takes nothing, never waits). Once true,
  // the loop's notifier has had its news (push() tells it first).
  bool has_response() const noexcept {
    return queued_.load(std::memory_order_acquire);
  }
  // The same, after any push() under way: a push's news may reach the
  // loop's notifier before has_response() turns true.
  bool has_response_now();
  // asyncio wake-up: `notifier` is told token() on every push (null: none).
  void set_notifier(std::shared_ptr<LoopNotifier> notifier);
  // Responses go to `sink` instead of the queue (set before submission).
  void set_sink(std::shared_ptr<ResponseSink> sink) { sink_ = std::move(sink); }
  // This queue's notifier token, new with each set_notifier (a submission):
  // never that of another request, so the order of a loop's news
  // (AsyncioWaiters::resolve_before) is the order responses came.
  uint64_t token() const noexcept { return token_; }

 private:
  // rest_ holds responses only while first_ does (pop_locked refills it).
  bool empty_locked() const noexcept { return !first_; }
  ResponsePtr pop_locked() noexcept;

  std::mutex mutex_;
  std::condition_variable ready_;
  ResponsePtr first_;  // the oldest queued response, if any
  std::atomic<bool> queued_{false};  // first_ is set; read without the mutex
  std::unique_ptr<std::deque<ResponsePtr>> rest_;  // those after it
  std::shared_ptr<LoopNotifier> notifier_;
  uint64_t token_ = 0;  // set with notifier_
  std::shared_ptr<ResponseSink> sink_;  // set before submission, read-only after
};

// A request's end of the handoff, given to Triton as the response
// callback's user pointer: the queue, the user-queue token, and what the
// request does once its final response is queued (request.cc implements
// it: Triton's hold on the request ends).
class ResponseTarget {
 public:
  ResponseQueue queue;
  uint64_t dispatch_token = 0;  // nonzero: also feed the user's queue
  std::atomic<bool> finished{false};  // the final response was delivered

  // Queues a response for the waiters; after the final one nothing more is
  // delivered (a late callback after stop() ended the request is dropped).
  void deliver(ResponsePtr data) noexcept;

 protected:
  ResponseTarget() = default;
  ~ResponseTarget() = default;

 private:
  friend void on_response(TRITONSERVER_InferenceResponse*, uint32_t,
                          void*) noexcept;
  // On the Triton thread, after the final response was delivered.
  virtual void final_delivered() noexcept = 0;
};

// Triton's response callback; its user pointer is a ResponseTarget*.
void on_response(TRITONSERVER_InferenceResponse* response, uint32_t flags,
                 void* userp) noexcept;

}  // namespace tsb

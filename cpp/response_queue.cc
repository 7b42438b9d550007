#include "response_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "spin_wait.h"

namespace tsb {
LoopNotifier::LoopNotifier() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) {
    throw std::runtime_error(std::string("eventfd failed: ") +
                             std::strerror(errno));
  }
}

LoopNotifier::~LoopNotifier() { close(fd_); }

void LoopNotifier::notify(uint64_t token) noexcept {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_empty = ready_.empty();
    ready_.push_back(token);
    has_news_.store(true, std::memory_order_release);
  }
  if (was_empty) {
    uint64_t one = 1;
    // A failed write (counter saturated) still leaves the fd readable.
    ssize_t ignored = write(fd_, &one, sizeof(one));
    (void)ignored;
  }
}

void LoopNotifier::drain_into(std::vector<uint64_t>& out) {
  uint64_t count;
  ssize_t ignored = read(fd_, &count, sizeof(count));  // EAGAIN is fine
  (void)ignored;
  std::lock_guard<std::mutex> lock(mutex_);
  out.swap(ready_);
  has_news_.store(false, std::memory_order_relaxed);
}

void LoopNotifier::take_before(uint64_t token, std::vector<uint64_t>& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto first = std::find(ready_.begin(), ready_.end(), token);
  if (first == ready_.end() || first == ready_.begin()) return;
  out.assign(ready_.begin(), first);
  ready_.erase(ready_.begin(), first);
}

void ResponseQueue::push(ResponsePtr response) noexcept {
  if (sink_) {
    sink_->take(std::move(response));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool was_empty = empty_locked();
    if (was_empty) {
      first_ = std::move(response);
    } else {
      // Allocation failure here would end the process (noexcept), as any
      // allocation on this path would.
      if (!rest_) rest_ = std::make_unique<std::deque<ResponsePtr>>();
      rest_->push_back(std::move(response));
    }
    // The loop's news before the response shows as queued (has_response):
    // a task that sees it queued finds its news among the loop's, behind
    // the news of responses that came before (AsyncioWaiters::resolve_before).
    if (notifier_) notifier_->notify(token_);
    if (was_empty) queued_.store(true, std::memory_order_release);
  }
  ready_.notify_one();
}

bool ResponseQueue::has_response_now() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !empty_locked();
}

ResponsePtr ResponseQueue::pop_locked() noexcept {
  ResponsePtr r = std::move(first_);
  if (rest_ && !rest_->empty()) {
    first_ = std::move(rest_->front());
    rest_->pop_front();
  } else {
    queued_.store(false, std::memory_order_relaxed);
  }
  return r;
}

ResponsePtr ResponseQueue::pop(double timeout_s, bool poll) {
  const SpinWait wait;  // this thread waits, until it returns
  if (poll) wait.poll([this] { return has_response(); }, timeout_s);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!wait_until_ready(lock, ready_, timeout_s,
                        [this] { return !empty_locked(); })) {
    return nullptr;
  }
  return pop_locked();
}

void ResponseQueue::put_back(ResponsePtr response) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_) {
    if (!rest_) rest_ = std::make_unique<std::deque<ResponsePtr>>();
    rest_->push_front(std::move(first_));
  }
  first_ = std::move(response);
  queued_.store(true, std::memory_order_release);
}

ResponsePtr ResponseQueue::try_pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pop_locked();  // null when empty
}

void ResponseQueue::set_notifier(std::shared_ptr<LoopNotifier> notifier) {
  static std::atomic<uint64_t> tokens{0};
  bool pending;
  uint64_t token;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notifier_ = notifier;
    token = token_ = tokens.fetch_add(1, std::memory_order_relaxed) + 1;
    pending = !empty_locked();
    if (pending && notifier) notifier->notify(token);  // as push() tells it
  }
}

void ResponseTarget::deliver(ResponsePtr data) noexcept {
  if (finished.load()) return;
  if (data->final && finished.exchange(true)) return;
  if (dispatch_token != 0) dispatch_push(dispatch_token, data);
  queue.push(std::move(data));
}

void on_response(TRITONSERVER_InferenceResponse* response,
                 const uint32_t flags, void* userp) noexcept {
  auto* target = static_cast<ResponseTarget*>(userp);
  auto data = std::make_shared<const ResponseData>(
      take_response(response, flags));
  const bool final = data->final;
  target->deliver(std::move(data));
  if (final) target->final_delivered();
}

}  // namespace tsb

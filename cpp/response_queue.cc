#include "response_queue.h"

#include <unistd.h>

#include <chrono>

namespace tsb {
namespace {

void notify(int fd) noexcept {
  if (fd < 0) return;
  uint64_t one = 1;
  // An eventfd counter only overflows after 2^64-1 unread writes; a failed
  // write (EAGAIN) still leaves the fd readable, which is all we need.
  ssize_t ignored = write(fd, &one, sizeof(one));
  (void)ignored;
}

template <typename T>
bool wait_for_items(std::unique_lock<std::mutex>& lock,
                    std::condition_variable& cv, const std::deque<T>& items,
                    double timeout_s) {
  auto ready = [&] { return !items.empty(); };
  if (timeout_s < 0) {
    cv.wait(lock, ready);
    return true;
  }
  return cv.wait_for(lock, std::chrono::duration<double>(timeout_s), ready);
}

struct DispatchQueue {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::pair<uint64_t, ResponsePtr>> items;
};

DispatchQueue& dispatch_queue() {
  static DispatchQueue* q = new DispatchQueue();  // outlives static teardown
  return *q;
}

}  // namespace

void ResponseQueue::push(ResponsePtr response) noexcept {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(response));
    fd = notify_fd_;
  }
  ready_.notify_one();
  notify(fd);
}

ResponsePtr ResponseQueue::pop(double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!wait_for_items(lock, ready_, items_, timeout_s)) return nullptr;
  ResponsePtr r = std::move(items_.front());
  items_.pop_front();
  return r;
}

ResponsePtr ResponseQueue::try_pop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (items_.empty()) return nullptr;
  ResponsePtr r = std::move(items_.front());
  items_.pop_front();
  return r;
}

void ResponseQueue::set_notify_fd(int fd) {
  bool pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    notify_fd_ = fd;
    pending = !items_.empty();
  }
  if (pending) notify(fd);
}

void dispatch_push(uint64_t token, ResponsePtr response) noexcept {
  DispatchQueue& q = dispatch_queue();
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    q.items.emplace_back(token, std::move(response));
  }
  q.ready.notify_one();
}

std::pair<uint64_t, ResponsePtr> dispatch_pop(double timeout_s) {
  DispatchQueue& q = dispatch_queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  if (!wait_for_items(lock, q.ready, q.items, timeout_s)) return {0, nullptr};
  auto item = std::move(q.items.front());
  q.items.pop_front();
  return item;
}

}  // namespace tsb

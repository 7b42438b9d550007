#include "dispatch_queue.h"

#include <condition_variable>
#include <deque>
#include <mutex>

#include "spin_wait.h"

namespace tsb {
namespace {

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
  if (!wait_until_ready(lock, q.ready, timeout_s,
                        [&q] { return !q.items.empty(); })) {
    return {0, nullptr};
  }
  auto item = std::move(q.items.front());
  q.items.pop_front();
  return item;
}

}  // namespace tsb

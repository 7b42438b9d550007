// Handoff of responses from Triton's threads to Python waiters.
//
// push() runs on a Triton thread and never touches Python: it appends under a
// mutex, wakes a blocked sync waiter (condition variable) and, for asyncio,
// writes to an eventfd that the waiter's event loop watches.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "response.h"

namespace tsb {

using ResponsePtr = std::shared_ptr<const ResponseData>;

class ResponseQueue {
 public:
  void push(ResponsePtr response) noexcept;
  // Blocks (the caller releases the GIL) until a response is there or
  // `timeout_s` passes (negative: no limit). Returns null on timeout.
  ResponsePtr pop(double timeout_s);
  ResponsePtr try_pop();
  // Event loop wake-up: an eventfd written on every push (-1: none).
  void set_notify_fd(int fd);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ResponsePtr> items_;
  int notify_fd_ = -1;
};

// Responses of requests that have a user queue (response_queue=...) go here
// too, tagged with the request's token; one Python dispatcher thread drains
// them into the user's queues, so delivery does not depend on iteration.
void dispatch_push(uint64_t token, ResponsePtr response) noexcept;
// Blocks until an item is there or `timeout_s` passes; token 0 on timeout.
std::pair<uint64_t, ResponsePtr> dispatch_pop(double timeout_s);

}  // namespace tsb

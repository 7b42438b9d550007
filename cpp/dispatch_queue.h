// The user-queue dispatch queue: responses of requests that have a user
// queue (response_queue=...) are also pushed here, tagged with the
// request's token, on Triton's thread (no Python); one Python dispatcher
// thread (tritonserver/_api/_user_queues.py) drains them into the user's
// queues, so delivery does not depend on iteration.
#pragma once

#include <cstdint>
#include <utility>

#include "response.h"

namespace tsb {

void dispatch_push(uint64_t token, ResponsePtr response) noexcept;
// Blocks until an item is there or `timeout_s` passes; token 0 on timeout.
std::pair<uint64_t, ResponsePtr> dispatch_pop(double timeout_s);

}  // namespace tsb

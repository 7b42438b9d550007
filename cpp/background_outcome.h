// The outcome of work done on a thread of its own (a server's stop, a
// model's unload): set once by that thread, waited for by a caller in
// slices (a Ctrl-C is delivered between them).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>

#include "triton_api.h"

namespace tsb {

struct BackgroundOutcome {
  // The work is done: `failed` with the core's `code` and `message`.
  void set(bool failed_now, TRITONSERVER_Error_Code code_now,
           std::string message_now) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      failed = failed_now;
      code = code_now;
      message = std::move(message_now);
      done = true;
    }
    done_cv.notify_all();
  }

  // Waits until the work is done or `timeout_s` passes; true when done.
  bool wait(double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex);
    return done_cv.wait_for(lock, std::chrono::duration<double>(timeout_s),
                            [&] { return done; });
  }

  std::mutex mutex;  // guards the fields below (and a user's own, e.g. BackgroundStop's)
  std::condition_variable done_cv;
  bool done = false;
  bool failed = false;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  std::string message;
};

}  // namespace tsb

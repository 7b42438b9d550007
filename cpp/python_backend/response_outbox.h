// The final responses an in-process python model's execute() filled, and
// the requests it is done with, held until the model instance's thread has
// let go of the GIL, then sent and released (python_backend.cc). Sending
// one wakes the client waiting for it, and that client's next step is to
// take the GIL: sent while the model thread still held it (to finish
// execute), the client would block on the GIL and pay a thread wake-up for
// every request. A request released there would need the GIL let go and
// taken again in the middle of execute: a waiting client thread takes it
// then, and the model thread waits for it. Holds plain Triton handles only:
// flush() needs no GIL.
#pragma once

#include <cstdint>
#include <vector>

#include "../triton_api.h"

namespace tsb {

class ResponseOutbox {
 public:
  ResponseOutbox() = default;
  ResponseOutbox(const ResponseOutbox&) = delete;
  ResponseOutbox& operator=(const ResponseOutbox&) = delete;
  // Sends and releases whatever is still held (nothing is ever dropped).
  ~ResponseOutbox() { flush(); }

  // Takes `response` and `error` (may be null), to send with `flags`; on
  // failure (no memory) both are deleted and the exception propagates.
  void add(TRITONBACKEND_Response* response, uint32_t flags,
           TRITONSERVER_Error* error);
  // Takes `request`, to release after the responses are sent (released at
  // once, GIL or not, if it cannot be held).
  void release(TRITONBACKEND_Request* request) noexcept;
  // Sends the held responses in the order they were added, then releases
  // the held requests; a failed send is the core's to report (the client's
  // callback has the error).
  void flush() noexcept;

 private:
  struct Held {
    TRITONBACKEND_Response* response;
    uint32_t flags;
    TRITONSERVER_Error* error;
  };
  std::vector<Held> held_;
  std::vector<TRITONBACKEND_Request*> releases_;
};

}  // namespace tsb

// The final responses an in-process python model's execute() filled, held
// until the model instance's thread has let go of the GIL, then sent
// (python_backend.cc). Sending one wakes the client waiting for it, and
// that client's next step is to take the GIL: sent while the model thread
// still held it (to finish execute), the client would block on the GIL and
// pay a thread wake-up for every request. Holds plain Triton handles only:
// flush() needs no GIL.
#pragma once

#include <cstdint>
#include <vector>

#include "triton_api.h"

namespace tsb {

class ResponseOutbox {
 public:
  ResponseOutbox() = default;
  ResponseOutbox(const ResponseOutbox&) = delete;
  ResponseOutbox& operator=(const ResponseOutbox&) = delete;
  // Sends whatever is still held (nothing is ever dropped unsent).
  ~ResponseOutbox() { flush(); }

  // Takes `response` and `error` (may be null), to send with `flags`.
  void add(TRITONBACKEND_Response* response, uint32_t flags,
           TRITONSERVER_Error* error);
  // Sends the held responses in the order they were added; a failed send
  // is the core's to report (the client's callback has the error).
  void flush() noexcept;

 private:
  struct Held {
    TRITONBACKEND_Response* response;
    uint32_t flags;
    TRITONSERVER_Error* error;
  };
  std::vector<Held> held_;
};

}  // namespace tsb

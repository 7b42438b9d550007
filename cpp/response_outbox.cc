#include "response_outbox.h"

#include "errors.h"
#include "triton_library.h"

namespace tsb {

void ResponseOutbox::add(TRITONBACKEND_Response* response, uint32_t flags,
                         TRITONSERVER_Error* error) {
  held_.push_back({response, flags, error});
}

void ResponseOutbox::flush() noexcept {
  const TritonApi& api = triton();
  for (const Held& held : held_) {
    TRITONSERVER_Error* sent =
        api.TRITONBACKEND_ResponseSend(held.response, held.flags, held.error);
    ignore_error(held.error);
    ignore_error(sent);
  }
  held_.clear();
}

}  // namespace tsb

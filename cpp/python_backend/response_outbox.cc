#include "response_outbox.h"

#include "../errors.h"
#include "../triton_library.h"

namespace tsb {

void ResponseOutbox::add(TRITONBACKEND_Response* response, uint32_t flags,
                         TRITONSERVER_Error* error) {
  try {
    held_.push_back({response, flags, error});
  } catch (...) {
    ignore_error(triton().TRITONBACKEND_ResponseDelete(response));
    ignore_error(error);
    throw;
  }
}

void ResponseOutbox::release(TRITONBACKEND_Request* request) noexcept {
  try {
    releases_.push_back(request);
  } catch (...) {
    ignore_error(triton().TRITONBACKEND_RequestRelease(
        request, TRITONSERVER_REQUEST_RELEASE_ALL));
  }
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
  for (TRITONBACKEND_Request* request : releases_) {
    ignore_error(
        api.TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
  }
  releases_.clear();
}

}  // namespace tsb

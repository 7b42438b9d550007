#include "errors.h"

#include "triton_library.h"

namespace tsb {

void check(TRITONSERVER_Error* err, const char* context) {
  if (err == nullptr) return;
  const TritonApi& api = triton();
  TRITONSERVER_Error_Code code = api.ErrorCode(err);
  std::string message = api.ErrorMessage(err);
  api.ErrorDelete(err);
  if (context != nullptr) message = std::string(context) + ": " + message;
  throw TritonException(code, message);
}

void ignore_error(TRITONSERVER_Error* err) noexcept {
  if (err != nullptr) triton().ErrorDelete(err);
}

TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code,
                               const char* message) noexcept {
  return triton().ErrorNew(code, message);
}

}  // namespace tsb

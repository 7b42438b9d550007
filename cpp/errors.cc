#include "errors.h"

#include <cstring>

#include "triton_library.h"

namespace tsb {

std::string core_message(const TritonApi& api, TRITONSERVER_Error* err) {
  static constexpr char kNoId[] = "[request id: <id_unknown>] ";
  const char* message = api.ErrorMessage(err);
  if (message == nullptr) return std::string();
  if (std::strncmp(message, kNoId, sizeof(kNoId) - 1) == 0) {
    message += sizeof(kNoId) - 1;
  }
  return std::string(message);
}

void check(TRITONSERVER_Error* err, const char* context) {
  if (err == nullptr) return;
  const TritonApi& api = triton();
  TRITONSERVER_Error_Code code = api.ErrorCode(err);
  std::string message = core_message(api, err);
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

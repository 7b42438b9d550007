// The ModelInferResponse message (Triton's grpc_service.proto) of a
// response, written natively for the native gRPC transport's ModelInfer
// (cpp/grpc_transport.cc), so that answering needs neither Python nor the
// GIL. Its parse is what tritonclient's generated module (and
// tritonserver/_kserve/grpc_service.py's native_reply, which wrote it
// before) give for the same response: tests/test_frontend_grpc.py compares
// the two. Writing only; requests are read by protobuf's parser.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "response.h"

namespace tsb {

// The serialized message of a response without an error, or nullopt when it
// has a parameter this writer leaves to the servicer (a BYTES one).
std::optional<std::string> infer_response_message(std::string_view model_name, std::string_view request_id,
                                                  const ResponseData& data);

}  // namespace tsb

// The ModelInferResponse message (Triton's grpc_service.proto) of a
// response, written natively for the native gRPC transport's ModelInfer
// (cpp/grpc_transport.cc), so that answering needs neither Python nor the
// GIL. Its parse is what the servicer (tritonserver/_kserve/grpc_service.py)
// answers for the same response: tests/test_frontend_grpc.py compares the
// two. Writing only; requests are read by protobuf's parser.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "response.h"

namespace tsb {

// What the binary answers for a response with a BYTES parameter (which the
// backend API cannot set; the core's API could carry one): an UNSUPPORTED error.
inline constexpr std::string_view kBytesParameterRefused =
    "Response parameter of type 'TRITONSERVER_PARAMETER_BYTES' is not currently supported";

// The serialized message of a response without an error, or nullopt for one
// with a BYTES parameter (kBytesParameterRefused).
std::optional<std::string> infer_response_message(std::string_view model_name, std::string_view request_id,
                                                  const ResponseData& data);

// ModelStreamInfer's message of a response: `infer_response` (what
// infer_response_message wrote) with the triton_final_response parameter.
std::string stream_infer_response_message(std::string infer_response, bool final);

// ModelStreamInfer's message of an error: its text, and the request's id,
// model name and version as the request gave them, with
// triton_final_response.
std::string stream_error_message(std::string_view error, std::string_view request_id, std::string_view model_name,
                                 std::string_view model_version, bool final);

}  // namespace tsb

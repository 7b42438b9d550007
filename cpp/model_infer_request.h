// The ModelInferRequest protobuf message of a native gRPC ModelInfer
// (cpp/grpc_transport.cc), read without Python or the GIL into the plan
// that kserve_infer's build_planned builds a request from: the twin of
// infer_response_message, which writes the answer.
//
// It covers the plain request, the one the servicer
// (tritonserver/_kserve/grpc_service.py) would send the core unchanged:
// every input's data in raw_input_contents, one per input and of the exact
// size of its shape (no BYTES, no BF16), no typed contents, no parameters
// but triton_enable_empty_final_response (a bool, which a unary call does
// not use: perf_analyzer sends it), names without NUL. Anything else (unknown
// fields, malformed or non-UTF-8 strings, a version that is not plain
// digits, ...) is declined: the servicer then reads the message with
// protobuf and answers it with its own checks and messages. Declining
// never changes an answer, only who gives it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kserve_infer.h"

namespace tsb {

struct ModelInferPlan {
  std::string model_name;
  int64_t model_version = -1;  // -1: none asked
  std::string model_version_text;  // as the request gave it ("" or digits)
  Plan plan;                   // input offsets are into the message
  // triton_enable_empty_final_response (the last one given): a decoupled
  // model's empty final response is then answered in a stream.
  bool empty_final = false;
  bool decoupled = false;      // set by the caller, who asks the core
};

// Reads `message` (a ModelInferRequest's serialized bytes) into `out`;
// false when this path does not cover it. Needs no GIL; never throws
// but std::bad_alloc.
bool plan_model_infer(const unsigned char* message, size_t size, ModelInferPlan* out);

}  // namespace tsb

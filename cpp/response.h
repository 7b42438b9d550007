// Turning a Triton response into plain C++ data (outputs, error, flags,
// parameters) on the Triton thread, without Python. The Triton response is
// deleted right away: output buffers live on through their BufferRefs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "allocator.h"
#include "triton_api.h"

namespace tsb {

struct OutputTensor {
  std::string name;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  size_t byte_size = 0;  // of the tensor; the buffer may be larger
  BufferRef buffer;
};

// Where the host can read `t`'s bytes: its buffer itself, or for a GPU
// buffer a host copy, which `host` keeps alive.
const void* host_bytes(const OutputTensor& t, BufferRef& host);

struct Bytes {
  std::string data;
};
using ParameterValue = std::variant<std::string, int64_t, bool, double, Bytes>;

struct ResponseData {
  std::string request_id;
  // The version of the model that made it (-1: none, e.g. a flags-only
  // end): the one the core chose for a request without a version.
  int64_t model_version = -1;
  bool final = false;
  bool has_error = false;
  TRITONSERVER_Error_Code error_code = TRITONSERVER_ERROR_UNKNOWN;
  std::string error_message;
  std::vector<OutputTensor> outputs;
  std::vector<std::pair<std::string, ParameterValue>> parameters;
  // The end that cancel() puts in the request's queue (cancelled_end()):
  // the consumer's stream ends there, with CancelledError, whatever the
  // backend still sends.
  bool cancelled = false;
};

// A response as queued and shared between its holders (read-only).
using ResponsePtr = std::shared_ptr<const ResponseData>;

// The one cancelled end (final, no outputs, `cancelled`).
const ResponsePtr& cancelled_end() noexcept;

// Consumes `response` (may be null: a flags-only final callback) and
// deletes it. Never throws: failures become an error in the result.
ResponseData take_response(TRITONSERVER_InferenceResponse* response,
                           uint32_t flags) noexcept;

}  // namespace tsb

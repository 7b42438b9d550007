// The fast path of the KServe v2 HTTP infer route (tritonserver/_kserve/
// fast_infer.py): one native call takes the request's body, reads its JSON
// header (yyjson, cpp/yyjson.cmake), builds and submits the Triton request with the
// binary tensors taken from the body, and its stream's one awaited result
// is the whole HTTP response body, written here: the JSON header
// (byte for byte what tritonserver/_kserve/codec.py's encode_response
// writes) followed by the binary outputs.
//
// It covers the common request: every input a binary tensor
// (binary_data_size) of any datatype (BYTES too), every output asked as
// binary data, an optional id, no other parameter, a non-decoupled model.
// For anything else, invalid requests included, kserve_infer() returns
// None before touching the core, and the caller takes the general codec,
// whose checks and messages are the protocol's: this file refuses nothing
// itself. Errors of the core (a submission it refuses, a failed response)
// raise the same error objects as Model.async_infer.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "asyncio_waiters.h"
#include "server.h"

namespace tsb {

// The protocol's name of a Triton data type ("FP32", ...; "INVALID" for none).
std::string_view datatype_name(TRITONSERVER_DataType type);

// A protocol datatype name (codec.py's DATATYPES) with its Triton type and
// element size (0: BYTES, elements of their own length).
struct Datatype {
  std::string_view name;
  TRITONSERVER_DataType type;
  size_t size;
};
// The datatype of a protocol name; null for a name the protocol lacks.
const Datatype* datatype_named(std::string_view name);

// codec.py's MAX_DIMS.
constexpr size_t kMaxDims = 32;

// A request a native path builds, read from its message without the GIL
// (the KServe HTTP header here; gRPC's ModelInferRequest in
// model_infer_request.cc): each input's bytes lie at `offset` in one buffer.
struct PlannedInput {
  std::string name;
  TRITONSERVER_DataType type;
  int64_t dims[kMaxDims];
  size_t ndim;
  size_t offset, size;  // in the buffer the request is built from
};
struct Plan {
  bool has_id = false;
  std::string id;
  std::vector<PlannedInput> inputs;
  std::vector<std::string> outputs;
  bool any_large_input = false;  // an input past kCopiedInputMaxBytes (request.h)
};

// A planned request built (not yet submitted): its Request object (None
// when the core refused to create it, e.g. the model unloaded meanwhile:
// the general path says so), the request id to answer with, and the
// uvicorn route's own response parameters.
struct Built {
  nanobind::object request = nanobind::none();
  std::string id;
  std::vector<std::pair<std::string, std::string>> route;
};

// The Triton request of `plan` (with the GIL), its inputs read from
// `binary`. What keeps the inputs Triton reads by pointer alive: `body`
// when it is an immutable bytes object holding `binary`; a private copy of
// the buffer otherwise (a bytearray or memoryview may be refilled while the
// request is in flight; a native transport's buffer is reused). Inputs up
// to kCopiedInputMaxBytes are copied anyway. A core error adding an input
// is raised (TritonException), the request discarded.
Built build_planned(Server& server, const std::string& model_name, int64_t model_version, Plan& plan,
                    const unsigned char* binary, size_t binary_size, nanobind::handle body);

// An AsyncResponseStream whose response is delivered as
// (body: bytes, header_length: int | None): None when no binary data
// follows the JSON (a response without outputs). A response that carries
// an error raises it; a non-final one without outputs gives None (await
// the next).
struct KServeInferStream : AsyncResponseStream {
  std::string model_name, request_id;
  // The route's own response parameters: (name, JSON text of the value),
  // merged over the response's as {**response, **route} would.
  std::vector<std::pair<std::string, std::string>> route_parameters;

  KServeInferStream(nanobind::object model_, nanobind::object request_,
                    nanobind::object loop_, nanobind::object waiters_,
                    std::string model_name_, std::string request_id_,
                    std::vector<std::pair<std::string, std::string>> route_parameters_);
  nanobind::object deliver(const ResponseData& response) override;

 private:
  std::string json_header(const ResponseData& data) const;
};

// Builds and submits the request of `body` (a buffer: a JSON header of
// `header_length` bytes, read here, then the binary tensors) for
// `model_name` and `model_version` on `server`, answered on `loop` through
// `waiters` (its AsyncioWaiters); `route_parameters` (a dict) are added to
// the response's parameters. Returns the submitted KServeInferStream, or
// None when the request is not one this path covers (nothing was sent to
// the core).
nanobind::object kserve_infer(Server& server, nanobind::handle model,
                              const std::string& model_name,
                              int64_t model_version, nanobind::handle body,
                              size_t header_length,
                              nanobind::handle route_parameters,
                              nanobind::handle loop, nanobind::handle waiters);

// Where kserve_infer_reply's answer goes: (HTTP status, body, length of
// its JSON header when binary outputs follow it, else -1). Called once, on
// Triton's thread, without the GIL.
using KServeReplyWriter = std::function<void(int status, std::string body, int64_t header_length)>;

// Whether the core knows the model `model_name` at `model_version` and it
// is decoupled (nullopt: the core does not find it). Call it without the
// GIL: the core takes the model repository's locks, and the last reference
// to a model being unloaded, dropped here, runs its teardown (python
// models' finalize() included).
std::optional<bool> model_decoupled(Server& server, const std::string& model_name, int64_t model_version);

// Whether the native paths that answer once may serve requests of the
// model: the core knows it and it is not decoupled (model_decoupled).
bool natively_servable(Server& server, const std::string& model_name, int64_t model_version);

// kserve_infer for a native transport (cpp/http_transport.cc), called
// without the GIL: the request's JSON header is read and checked without
// it, and the GIL is taken only to build and submit a request this path
// covers. Its reply (the body as kserve_infer's stream gives it, or a core
// error as the routes word it) goes to `write` from Triton's thread,
// without Python. Returns false, having sent nothing to the core, for a
// request this path does not cover, and when the core refuses the
// submission: the general path then answers it. `*cancel` is then set to
// the request's canceller (Request::canceller): after it, `write` is not
// called.
bool kserve_infer_reply(Server& server, const std::string& model_name, int64_t model_version,
                        const char* body, size_t body_size, size_t header_length,
                        KServeReplyWriter write, std::function<void()>* cancel);

}  // namespace tsb

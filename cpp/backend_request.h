// A request given to an in-process python model (python_backend.cc), as a
// Python object: its inputs as read-only NumPy views of the core's buffers
// (no copy), its metadata, and sending responses. The object owns the
// TRITONBACKEND_Request: it is released when the object dies, i.e. after
// execute() returned and the last input view is gone, so an input kept by
// the model stays valid. A ResponseSender owns a response factory of the
// request (decoupled models) and may outlive it.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "response_outbox.h"
#include "triton_api.h"

namespace tsb {

// The outputs of one response, from Python. Each is read in place from
// anything with the buffer protocol (a NumPy array; a copy is made of one
// that is not C-contiguous), or, where the caller's `output_spec(name,
// datatype, array)` makes it, from (name, TRITONSERVER_DataType, data,
// shape or None): BYTES serialized with the tensor's shape, or, for a
// tensor in GPU memory, data (pointer, bytes, device id, owner) with the
// shape given. The buffers are held until the response is filled; made
// and destroyed with the GIL held.
class Outputs {
 public:
  struct Output {
    std::string name;
    int datatype;
    std::vector<int64_t> shape;
    Py_buffer view;  // host data (device < 0)
    int device = -1;  // GPU data: its device, pointer, size and owner
    const void* device_data = nullptr;
    size_t device_size = 0;
    nanobind::object owner;
  };
  Outputs() = default;
  // The outputs of pb_utils Tensor objects (their _name, _triton_dtype and
  // _array read in place); `output_spec(name, datatype, array)` gives the
  // entry of a BYTES tensor or one in GPU memory.
  Outputs(nanobind::handle tensors, nanobind::handle output_spec);
  // The outputs of a dict {name: array} whose data types are
  // `datatypes[name]` (TRITONSERVER_DataType numbers), `output_spec` as
  // above.
  Outputs(nanobind::handle arrays, nanobind::handle datatypes,
          nanobind::handle output_spec);
  ~Outputs();
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  const std::vector<Output>& items() const { return items_; }

 private:
  // One output; `contiguous` is numpy.ascontiguousarray once looked up.
  void add(std::string name, int datatype, nanobind::handle data,
           nanobind::handle shape, nanobind::object& contiguous);
  // One output of a tensor's parts: its array read in place, or through
  // `output_spec` (BYTES, GPU data).
  void add_value(nanobind::handle name, nanobind::handle datatype,
                 nanobind::handle array, nanobind::handle output_spec,
                 nanobind::object& contiguous);
  std::vector<Output> items_;
};
using ErrorSpec = std::optional<std::pair<int, std::string>>;

// What a request and its response factory share: the model's name (for
// messages), the outputs the client asked for (read from the request before
// the first response: a response carries only those, as with the stub),
// whether a final response went out, and whether any response carried an
// error (for the statistics).
// The data types an in-process model's config declares for its outputs
// (TRITONSERVER_DataType numbers by name), and the outputs found returned
// as another type (said once each). Used with the GIL held.
struct DeclaredOutputs {
  std::unordered_map<std::string, int> types;
  std::unordered_set<std::string> warned;
};

struct ResponseState {
  explicit ResponseState(std::string model,
                         std::shared_ptr<DeclaredOutputs> outputs = nullptr,
                         bool is_decoupled = false)
      : model_name(std::move(model)), declared(std::move(outputs)),
        decoupled(is_decoupled) {}
  const std::string model_name;
  const std::shared_ptr<DeclaredOutputs> declared;  // null: not checked
  const bool decoupled;
  // The sends counted as the stub's response sender counts them (its
  // UpdateStateAndCounters): every send for the request (through the
  // sender, or a response execute() returned), and whether the final flag
  // was among them or execute() failed (closed: the sender sends no more).
  // Changed before the send, as there.
  std::mutex sends_mutex;
  uint32_t sends = 0;
  bool closed = false;
  bool requested_known = false;
  std::unordered_set<std::string> requested;
  std::atomic<bool> final_sent{false};
  std::atomic<bool> failed{false};
  // Released with TRITONSERVER_REQUEST_RELEASE_RESCHEDULE: execute() gets
  // the request again, so its sender may go without the final flag.
  std::atomic<bool> rescheduled{false};
};

class ResponseSender;

class BackendRequest {
 public:
  // While `outbox` is set (during execute), a final response sent through
  // this object is filled at once and held there to be sent later, and the
  // request, if this object dies meanwhile, is released from there too.
  // `device_inputs`: an input in GPU memory is given as it is (the model
  // config's FORCE_CPU_ONLY_INPUT_TENSORS "no"), else copied to the host.
  // `zero_copy_inputs`: a numeric input in host memory is a read-only view
  // of the request's memory (the config's ZERO_COPY_INPUTS "yes"), else a
  // private, writable copy.
  BackendRequest(TRITONBACKEND_Request* request,
                 std::shared_ptr<ResponseState> state, ResponseOutbox* outbox,
                 bool device_inputs = false, bool zero_copy_inputs = false)
      : request_(request), state_(std::move(state)), outbox_(outbox),
        device_inputs_(device_inputs), zero_copy_inputs_(zero_copy_inputs) {}
  // Answers a request left without a final response (so that no client
  // waits forever), then releases it.
  ~BackendRequest();
  BackendRequest(const BackendRequest&) = delete;
  BackendRequest& operator=(const BackendRequest&) = delete;

  TRITONBACKEND_Request* raw() const { return request_; }
  bool succeeded() const { return !state_->failed.load(); }
  bool final_sent() const { return state_->final_sent.load(); }
  // How many sends were counted for this request (ResponseState::sends).
  uint32_t sends() const;
  // From now on responses are sent, and the request released, at once
  // (execute returned and the object outlives it, kept by an input view).
  void detach_outbox() { outbox_ = nullptr; }
  // Releases the request now (answered first if nothing did), for an
  // object the model keeps past execute() when nothing of the core's
  // memory depends on it (no input views): kept, it would hold the model
  // and so its unload and the server's stop. Every later use raises
  // UnavailableError naming the model.
  void release_after_execute();
  // The release flags execute() set (pb_utils set_release_flags):
  // TRITONSERVER_REQUEST_RELEASE_ALL, or _RESCHEDULE to have the core give
  // this request to execute() again (iterative sequence batching); any
  // other value raises InvalidArgumentError.
  void set_release_flags(uint32_t flags);
  bool rescheduled() const { return state_->rescheduled.load(); }

  // (TRITONSERVER_DataType, shape, NumPy array) of the input `name`, or
  // None when the request has no such input: the array is of the input's
  // type and shape, a private writable copy, or with `zero_copy_inputs` a
  // read-only view of the core's buffer (no copy) when it is one piece in
  // host memory; of BYTES and BF16 (no NumPy type) its raw bytes (uint8,
  // 1-D, a read-only view when one piece). An input in GPU memory is copied
  // to the host, or, with `device_inputs`, given as (pointer, bytes, device
  // id) when it is one piece. `self` is this object's Python handle: a view
  // keeps it alive.
  nanobind::object input(nanobind::handle self, const std::string& name);
  // The value of the input `name`, or None: for a numeric input in host
  // memory input()'s array, else what `input_value(name, found, self)`
  // gives for what input() found (BYTES decoded, GPU data).
  nanobind::object input_value(nanobind::handle self, nanobind::str name,
                               nanobind::handle input_value);
  // The same value as a pb_utils Tensor (`tensor_type`), made without its
  // __init__ (_name, _array and _triton_dtype set), or None.
  nanobind::object input_tensor(nanobind::handle self, nanobind::str name,
                                nanobind::handle tensor_type,
                                nanobind::handle input_value);
  std::vector<std::string> input_names() const;
  std::vector<std::string> requested_output_names() const;
  std::string id() const;
  nanobind::object correlation_id() const;  // int, or str for a string id
  uint32_t flags() const;
  nanobind::dict parameters() const;
  bool is_cancelled() const;

  // Sends one response made from the request (outputs, error, flags,
  // response parameters {str: str | int | bool}).
  void send(const Outputs& outputs, const ErrorSpec& error, uint32_t flags,
            const nanobind::dict& parameters);
  // Sends an error response with the final flag unless the final response
  // was sent already (execute() failed or gave no response for it).
  void fail_if_unanswered(int code, const std::string& message);
  // The response factory of this request (one per request).
  std::shared_ptr<ResponseSender> response_sender();

 private:
  // (datatype, value) of input_value(), or nullopt when there is no such
  // input.
  std::optional<std::pair<nanobind::object, nanobind::object>> typed_value(
      nanobind::handle self, nanobind::str name, nanobind::handle input_value);
  void read_requested_outputs();
  // request_, or UnavailableError once release_after_execute() ran.
  TRITONBACKEND_Request* live() const;
  // Hands `request` back to the core for rescheduling, without the GIL; if
  // the core refuses (the model's config does not allow it), the request
  // gets an error response naming the cause and is released for good.
  void release_rescheduled(TRITONBACKEND_Request* request) noexcept;
  TRITONBACKEND_Request* request_;
  std::shared_ptr<ResponseState> state_;
  std::weak_ptr<ResponseSender> sender_;
  bool sender_made_ = false;
  ResponseOutbox* outbox_;
  const bool device_inputs_;
  const bool zero_copy_inputs_;
};

// Answers `request` with an error response (`code`, `message`) and
// releases it, without Python (no GIL needed).
void fail_natively(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code,
                   const std::string& message) noexcept;

// A pb_utils InferenceRequest (`request_type`) of the BackendRequest
// `native`, for execute(): its _native and _model_name set, no __init__.
nanobind::object wrap_request(nanobind::handle request_type,
                              nanobind::handle native,
                              nanobind::handle model_name);

// Sends the final response of each request in `natives` (BackendRequest
// objects) from `responses` (what execute() returned: one per request)
// where it is a `response_type` (pb_utils.InferenceResponse) without an
// error, its tensors read in place (Outputs above); requests answered
// already are skipped. Returns the indices of the responses left to the
// caller: another type, an error response, or a send that failed (the
// caller's own send raises the same, and the caller words it).
nanobind::list send_final_responses(nanobind::handle natives,
                                    nanobind::handle responses,
                                    nanobind::handle response_type,
                                    nanobind::handle output_spec);

class ResponseSender {
 public:
  ResponseSender(TRITONBACKEND_ResponseFactory* factory,
                 std::shared_ptr<ResponseState> state)
      : factory_(factory), state_(std::move(state)) {}
  // Sends the final flag with an error if the model never did (else the
  // client would wait forever), then deletes the factory.
  ~ResponseSender();
  ResponseSender(const ResponseSender&) = delete;
  ResponseSender& operator=(const ResponseSender&) = delete;

  // The model's sends: checked and counted first as the stub's sender
  // checks them (its words; InvalidArgumentError).
  void send(const Outputs& outputs, const ErrorSpec& error, uint32_t flags,
            const nanobind::dict& parameters);
  void send_flags(uint32_t flags);
  // The runtime's send of an error for a request left unanswered: closes
  // the sender, without the model's checks.
  void send_error(int code, const std::string& message);
  bool is_cancelled() const;
  bool final_sent() const { return state_->final_sent.load(); }

 private:
  void send_response(const Outputs& outputs, const ErrorSpec& error,
                     uint32_t flags, const nanobind::dict& parameters);
  TRITONBACKEND_ResponseFactory* factory_;
  std::shared_ptr<ResponseState> state_;
};

}  // namespace tsb

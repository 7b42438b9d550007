// A request given to an in-process python model (python_backend.cc), as a
// Python object: its inputs (one reader, `read_input`, behind both ways
// Python takes them: a value, or a pb_utils Tensor), its metadata, and its
// responses (backend_response.h). The object owns the
// TRITONBACKEND_Request: it is released when the object dies, i.e. after
// execute() returned and the last input view is gone, so an input kept by
// the model stays valid.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../triton_api.h"
#include "backend_response.h"
#include "response_outbox.h"

namespace tsb {


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
        device_inputs_(device_inputs), zero_copy_inputs_(zero_copy_inputs) {
    state_->request = this;
  }
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

  // The value of the input `name`, or None: a NumPy array of the input's
  // type and shape (see read_input), BYTES decoded, or GPU data, as
  // pb_utils' _input_value gives it (pb_utils_bridge.h). `self` is this
  // object's Python handle: a view keeps it alive.
  nanobind::object input_value(nanobind::handle self, nanobind::str name);
  // The same value as a pb_utils Tensor, or None (pb_utils_bridge.h).
  nanobind::object input_tensor(nanobind::handle self, nanobind::str name);
  std::vector<std::string> input_names() const;
  std::vector<std::string> requested_output_names() const;
  std::string id() const;
  nanobind::object correlation_id() const;  // int, or str for a string id
  uint32_t flags() const;
  // The request's timeout in microseconds (0: none, or a core without
  // TRITONBACKEND_InferenceRequestTimeoutMicroseconds).
  uint64_t timeout_us() const;
  nanobind::dict parameters() const;
  bool is_cancelled() const;

  // Sends one response made from the request (outputs, error, flags,
  // response parameters {str: str | int | bool}).
  void send(const Outputs& outputs, const ErrorSpec& error, uint32_t flags,
            const nanobind::dict& parameters);
  // Sends an error response with the final flag unless the final response
  // was sent already (execute() failed or gave no response for it).
  void fail_if_unanswered(int code, const std::string& message);
  // For a request execute() returned without answering (a non-decoupled
  // model's None): it stays open while the model holds it or its sender,
  // and gets an error response of `message` if both go without its final
  // response (ResponseState::unanswered_message).
  void answer_when_dropped(std::string message);
  // Listed open for an unload (list_open) when execute() left it so: its
  // final response not sent, or this object kept by the model.
  void list_if_open(TRITONSERVER_Server* server, bool kept) noexcept;
  // The runtime's error for a request its model left open past its unload
  // (claim_final first), through its sender if made; then the request is
  // released, unless inputs may be views of its memory (ZERO_COPY_INPUTS).
  void fail_open(int code, const std::string& message);
  // The response factory of this request (one per request).
  std::shared_ptr<ResponseSender> response_sender();
  // After execute(): a sender the model made gives up its response
  // factory once the request's final response is sent (see
  // ResponseSender::release_factory_after_final).
  void release_sender_after_final() noexcept;

 private:
  // (TRITONSERVER_DataType, shape, data) of the input `name`, or None when
  // the request has no such input: the data is a NumPy array of the
  // input's type and shape, a private writable copy, or with
  // `zero_copy_inputs` a read-only view of the core's buffer (no copy)
  // when it is one piece in host memory; of BYTES and BF16 (no NumPy type)
  // its raw bytes (uint8, 1-D, a read-only view when one piece). An input
  // in GPU memory is copied to the host, or, with `device_inputs`, given as
  // (pointer, bytes, device id) when it is one piece.
  nanobind::object read_input(nanobind::handle self, const std::string& name);
  // (datatype, value) of input_value(), or nullopt when there is no such
  // input.
  std::optional<std::pair<nanobind::object, nanobind::object>> typed_value(
      nanobind::handle self, nanobind::str name);
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

// Answers each request of `model` of `server` (null: every model) that
// its model left open (list_open) with an UNAVAILABLE error saying that the
// model was unloaded before its final response, and releases it: what an
// unload past its drain's time does, so that the core can finalize the
// model's instances. Call with the GIL held; never throws.
void fail_open_requests(TRITONSERVER_Server* server, const char* model) noexcept;

// Answers `request` with an error response (`code`, `message`) and
// releases it, without Python (no GIL needed).
void fail_natively(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code,
                   const std::string& message) noexcept;

// Sends the final response of each request in `natives` (BackendRequest
// objects) from `responses` (what execute() returned: one per request)
// where it is a pb_utils.InferenceResponse without an error, its tensors
// read in place (Outputs); requests answered already are skipped. Returns
// (left, rescheduled, twice): the indices of the responses left to the
// caller (another type, an error response, or a send that failed: the
// caller's own send raises the same, and the caller words it); or, with
// nothing sent, the first request rescheduled that got a response (else
// None) and the requests that got a response after a send through their
// sender (the batch fails, as the stub's execute does).
nanobind::tuple send_final_responses(nanobind::handle natives,
                                     nanobind::handle responses);

}  // namespace tsb

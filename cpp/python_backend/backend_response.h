// The responses of an in-process python model's request (backend_request.h
// makes them): the outputs read in place from the model's arrays
// (`Outputs`), a response filled and sent, the send counting the 2.51
// stub's sender does, and `ResponseSender`, which owns a request's response
// factory (decoupled models) and may outlive the request.
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

#include "../errors.h"
#include "../triton_api.h"

namespace tsb {

class BackendRequest;
class ResponseSender;

// The outputs of one response, from Python. Each is read in place from
// anything with the buffer protocol (a NumPy array; a copy is made of one
// that is not C-contiguous), or, where pb_utils' `_output_spec(name,
// datatype, array)` (pb_utils_bridge.h) makes it, from (name,
// TRITONSERVER_DataType, data, shape or None): BYTES serialized with the tensor's shape, or, for a
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
  // The outputs of pb_utils Tensor objects (their parts read in place);
  // `_output_spec` gives the entry of a BYTES tensor or one in GPU memory.
  explicit Outputs(nanobind::handle tensors);
  // The outputs of a dict {name: array} whose data types are
  // `datatypes[name]` (TRITONSERVER_DataType numbers), `_output_spec` as
  // above.
  Outputs(nanobind::handle arrays, nanobind::handle datatypes);
  ~Outputs();
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  const std::vector<Output>& items() const { return items_; }

 private:
  // One output; `contiguous` is numpy.ascontiguousarray once looked up.
  void add(std::string name, int datatype, nanobind::handle data,
           nanobind::handle shape, nanobind::object& contiguous);
  // One output of a tensor's parts: its array read in place, or through
  // `_output_spec` (BYTES, GPU data).
  void add_value(nanobind::handle name, nanobind::handle datatype,
                 nanobind::handle array, nanobind::object& contiguous);
  std::vector<Output> items_;
};
using ErrorSpec = std::optional<std::pair<int, std::string>>;

// The data types an in-process model's config declares for its outputs
// (TRITONSERVER_DataType numbers by name), and the outputs found returned
// as another type (said once each). Used with the GIL held.
struct DeclaredOutputs {
  std::unordered_map<std::string, int> types;
  std::unordered_set<std::string> warned;
};

// What a request and its response factory share: the model's name (for
// messages), the outputs the client asked for (read from the request before
// the first response: a response carries only those, as with the stub),
// whether a final response went out, and whether any response carried an
// error (for the statistics).
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
  // Set when execute() returned without answering the request (a
  // non-decoupled model's None): the error it gets when the request and its
  // sender both go (the model kept neither, or let go of them) without its
  // final response; empty: the words of whichever went last. Used with the
  // GIL held.
  std::string unanswered_message;
  // Where the request is answered from: its object while it lives, its
  // sender once made (set by them, with the GIL held).
  BackendRequest* request = nullptr;
  std::weak_ptr<ResponseSender> sender;
  // Set by list_open: the server of the model, and whether the state is
  // listed (it leaves the list when it goes).
  TRITONSERVER_Server* server = nullptr;
  bool listed = false;
  ~ResponseState();
};

// The requests execute() left open (no final response yet, or their
// object kept by the model), listed from execute()'s return until the
// request's object and its sender are both gone, so that an unload can
// answer and release them (fail_open_requests, backend_request.h). Both
// with the GIL held. `model` null: every model of the server.
void list_open(ResponseState& state, TRITONSERVER_Server* server) noexcept;
std::vector<ResponseState*> open_requests(TRITONSERVER_Server* server,
                                          const char* model);
// Closes the request's sends for a final response of the runtime's own:
// true when the caller is to send it, false when the request's final
// response went out or is going out (the model's send, which closed the
// sends before it let the GIL go), or it was rescheduled. Exactly one final
// response: a model's send after this is refused (admit_send).
bool claim_final(ResponseState& state);

// Fills `response` with the parameters and outputs (deleting it on
// failure).
void fill(TRITONBACKEND_Response* response, ResponseState& state,
          const Outputs& outputs, const nanobind::dict& parameters);
// Fills `response` and sends it; the GIL is released while the core takes
// it.
void fill_and_send(TRITONBACKEND_Response* response, ResponseState& state,
                   const Outputs& outputs, const ErrorSpec& error,
                   uint32_t flags, const nanobind::dict& parameters);
// The core's error of `error` (null: none).
TRITONSERVER_Error* error_object(const ErrorSpec& error);
// Records what a response sent with `flags` (and `error`) means for the
// request.
void mark_sent(ResponseState& state, const ErrorSpec& error, uint32_t flags);
// Counts a send for the request (ResponseState::sends); the caller holds
// the state's sends_mutex.
void count_send(ResponseState& state, uint32_t flags);
// InvalidArgumentError when the request's final response went out.
void check_not_final(const ResponseState& state);

// Whether `handle` was cancelled, asked through `query`: a backend function
// that older cores lack (then UNSUPPORTED, naming it).
template <typename Handle>
bool ask_cancelled(TRITONSERVER_Error* (*query)(Handle*, bool*),
                   Handle* handle, const char* name) {
  if (query == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          std::string("is_cancelled() needs ") + name +
              ", which this Triton core lacks");
  }
  bool cancelled = false;
  check(query(handle, &cancelled));
  return cancelled;
}

class ResponseSender {
 public:
  ResponseSender(TRITONBACKEND_ResponseFactory* factory,
                 std::shared_ptr<ResponseState> state)
      : factory_(factory), state_(std::move(state)) {}
  // Sends the final flag with an error if the model never did (else the
  // client would wait forever), then deletes the factory (if the final
  // response has not deleted it already).
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
  // The runtime's error for a request its model left open past its unload
  // (claim_final first): sent unless the final response went out.
  void fail_open(int code, const std::string& message);
  bool is_cancelled() const;
  // Once the request's final response is sent (by this sender, or by the
  // runtime with what execute() returned), deletes the factory: it holds
  // the model in the core, and a sender the model keeps (in a reference
  // cycle of an exception's traceback, say) would otherwise hold up the
  // model's unload until Python's garbage collector runs. is_cancelled()
  // then answers what the factory said at that moment.
  void release_factory_after_final() noexcept;

 private:
  void send_response(const Outputs& outputs, const ErrorSpec& error,
                     uint32_t flags, const nanobind::dict& parameters);
  TRITONBACKEND_ResponseFactory* factory_;
  std::shared_ptr<ResponseState> state_;
  bool cancelled_at_final_ = false;
};

}  // namespace tsb

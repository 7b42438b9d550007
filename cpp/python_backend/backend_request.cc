#include "backend_request.h"

#include <nanobind/stl/string.h>

#include <cstring>
#include <mutex>
#include <utility>

#include "../cuda_runtime.h"
#include "../element_types.h"
#include "../errors.h"
#include "../thread_state.h"
#include "../triton_library.h"
#include "numpy_views.h"
#include "pb_utils_bridge.h"

namespace nb = nanobind;

namespace tsb {

TRITONBACKEND_Request* BackendRequest::live() const {
  if (request_ == nullptr) {
    raise(TRITONSERVER_ERROR_UNAVAILABLE,
          "model '" + state_->model_name + "': this request was released when "
          "execute() returned (a model may keep what it read from a request, "
          "such as its input arrays, but not the request itself)");
  }
  return request_;
}

void BackendRequest::release_after_execute() {
  if (request_ == nullptr) return;
  if (!rescheduled() && !sender_made_ && !state_->final_sent) {
    fail_if_unanswered(TRITONSERVER_ERROR_INTERNAL,
                       "model '" + state_->model_name +
                           "': execute() gave no response for this request");
  }
  TRITONBACKEND_Request* request = request_;
  request_ = nullptr;
  if (rescheduled()) {
    release_rescheduled(request);
    return;
  }
  if (outbox_ != nullptr) {
    outbox_->release(request);
    outbox_ = nullptr;
    return;
  }
  GilRelease release;
  ignore_error(triton().TRITONBACKEND_RequestRelease(
      request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

void BackendRequest::set_release_flags(uint32_t flags) {
  live();
  if (flags != TRITONSERVER_REQUEST_RELEASE_ALL &&
      flags != TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + state_->model_name + "': set_release_flags(" +
              std::to_string(flags) +
              "): the flags are TRITONSERVER_REQUEST_RELEASE_ALL (1) or "
              "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE (2)");
  }
  state_->rescheduled = flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE;
}

void BackendRequest::release_rescheduled(TRITONBACKEND_Request* request) noexcept {
  const TritonApi& api = triton();
  GilRelease release;  // the core's locks (the scheduler enqueues it)
  TRITONSERVER_Error* refused = api.TRITONBACKEND_RequestRelease(
      request, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
  if (refused == nullptr) return;
  try {
    const std::string why = api.ErrorMessage(refused);
    std::string message =
        "model '" + state_->model_name + "': the request cannot be rescheduled: " + why;
    if (why.find("not configured") != std::string::npos) {
      message += " (a model reschedules requests only with sequence_batching { "
                 "iterative_sequence: true } in its config.pbtxt)";
    }
    api.ErrorDelete(refused);
    fail_natively(request, TRITONSERVER_ERROR_INVALID_ARG, message);
  } catch (...) {  // no memory for the message
    fail_natively(request, TRITONSERVER_ERROR_INTERNAL, "");
  }
}

BackendRequest::~BackendRequest() {
  const TritonApi& api = triton();
  state_->request = nullptr;
  if (request_ == nullptr) return;  // released when execute() returned
  if (rescheduled()) {
    release_rescheduled(request_);
    return;
  }
  if (!sender_made_ && !state_->final_sent) {
    try {
      fail_if_unanswered(TRITONSERVER_ERROR_INTERNAL,
                         !state_->unanswered_message.empty()
                             ? state_->unanswered_message
                             : "model '" + state_->model_name +
                                   "': execute() gave no response for this request");
    } catch (...) {
    }
  }
  if (outbox_ != nullptr) {
    outbox_->release(request_);
    return;
  }
  GilRelease release;
  ignore_error(
      api.TRITONBACKEND_RequestRelease(request_, TRITONSERVER_REQUEST_RELEASE_ALL));
}

nb::object BackendRequest::read_input(nb::handle self, const std::string& name) {
  const TritonApi& api = triton();
  TRITONBACKEND_Input* input = nullptr;
  TRITONSERVER_Error* err =
      api.TRITONBACKEND_RequestInput(live(), name.c_str(), &input);
  if (err != nullptr) {
    api.ErrorDelete(err);
    return nb::none();
  }
  const char* input_name = nullptr;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  const int64_t* shape = nullptr;
  uint32_t dims = 0, buffers = 0;
  uint64_t byte_size = 0;
  check(api.TRITONBACKEND_InputProperties(input, &input_name, &datatype, &shape,
                                          &dims, &byte_size, &buffers));
  // The array: of the input's type and shape, or its raw bytes (uint8,
  // 1-D) for a type NumPy lacks.
  const ElementType* element = element_type(datatype);
  if (element != nullptr && element->numpy_number < 0) element = nullptr;
  std::vector<size_t> array_shape;
  uint64_t expected = element ? static_cast<uint64_t>(element->bits) / 8 : 0;
  for (uint32_t i = 0; i < dims; ++i) {
    const size_t dim = shape[i] < 0 ? 0 : static_cast<size_t>(shape[i]);
    array_shape.push_back(dim);
    expected *= dim;
  }
  if (element == nullptr) {
    element = element_type(TRITONSERVER_TYPE_UINT8);
    array_shape.assign(1, static_cast<size_t>(byte_size));
  } else if (expected != byte_size) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + state_->model_name + "': input '" + name + "' has " +
              std::to_string(byte_size) + " bytes, not the " +
              std::to_string(expected) + " its shape and data type need");
  }
  struct Part {
    const void* data;
    uint64_t size;
    int device;  // -1: host memory
  };
  std::vector<Part> parts;
  for (uint32_t i = 0; i < buffers; ++i) {
    const void* buffer = nullptr;
    uint64_t size = 0;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    check(api.TRITONBACKEND_InputBuffer(input, i, &buffer, &size, &memory_type,
                                        &memory_type_id));
    const bool gpu = memory_type == TRITONSERVER_MEMORY_GPU;
    parts.push_back({buffer, size, gpu ? static_cast<int>(memory_type_id) : -1});
  }
  const bool whole = parts.size() == 1 && parts[0].size == byte_size &&
                     byte_size > 0;
  nb::tuple dims_tuple = nb::steal<nb::tuple>(PyTuple_New(dims));
  if (!dims_tuple.is_valid()) throw nb::python_error();
  for (uint32_t i = 0; i < dims; ++i) {
    PyTuple_SetItem(dims_tuple.ptr(), i, nb::int_(shape[i]).release().ptr());
  }
  if (whole && parts[0].device >= 0 && device_inputs_) {
    // Left on its device: the Python side keeps this request alive with it.
    return nb::make_tuple(
        static_cast<int>(datatype), dims_tuple,
        nb::make_tuple(reinterpret_cast<uintptr_t>(parts[0].data), byte_size,
                       parts[0].device));
  }
  // The core's buffer itself, read-only (the array keeps this request
  // alive): with `zero_copy_inputs`, and for BYTES and BF16, whose raw bytes
  // are only decoded (into new objects) or refused. Otherwise a private,
  // writable copy that NumPy owns, as the stub gives each model: no
  // consumer of the model's array (torch.from_numpy, say) can write into
  // the client's memory through it, and it holds nothing of the request.
  const bool numeric = datatype < TRITONSERVER_TYPE_BYTES;
  if (whole && parts[0].device < 0 && (zero_copy_inputs_ || !numeric)) {
    nb::object array = numpy_view(parts[0].data, array_shape.size(),
                                  array_shape.data(), *element, self);
    return nb::make_tuple(static_cast<int>(datatype), dims_tuple, array);
  }
  uint8_t* copy = nullptr;
  nb::object array =
      numpy_array(array_shape.size(), array_shape.data(), *element, &copy);
  size_t offset = 0;
  for (const Part& part : parts) {
    if (part.size > byte_size - offset) break;
    if (part.size > 0 && part.device >= 0) {
      GilRelease release;
      cuda_copy(copy + offset, part.data, part.size, part.device,
                "model '" + state_->model_name + "': input '" + name + "'");
    } else if (part.size > 0) {
      std::memcpy(copy + offset, part.data, part.size);
    }
    offset += part.size;
  }
  return nb::make_tuple(static_cast<int>(datatype), dims_tuple, array);
}

std::vector<std::string> BackendRequest::input_names() const {
  const TritonApi& api = triton();
  uint32_t count = 0;
  check(api.TRITONBACKEND_RequestInputCount(live(), &count));
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    check(api.TRITONBACKEND_RequestInputByIndex(live(), i, &input));
    const char* name = nullptr;
    check(api.TRITONBACKEND_InputProperties(input, &name, nullptr, nullptr,
                                            nullptr, nullptr, nullptr));
    names.emplace_back(name);
  }
  return names;
}

std::vector<std::string> BackendRequest::requested_output_names() const {
  const TritonApi& api = triton();
  uint32_t count = 0;
  check(api.TRITONBACKEND_RequestOutputCount(live(), &count));
  std::vector<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    check(api.TRITONBACKEND_RequestOutputName(live(), i, &name));
    names.emplace_back(name);
  }
  return names;
}

std::string BackendRequest::id() const {
  const char* id = nullptr;
  check(triton().TRITONBACKEND_RequestId(live(), &id));
  return id != nullptr ? id : "";
}

nb::object BackendRequest::correlation_id() const {
  const TritonApi& api = triton();
  uint64_t number = 0;
  TRITONSERVER_Error* err =
      api.TRITONBACKEND_RequestCorrelationId(live(), &number);
  if (err == nullptr) return nb::int_(number);
  api.ErrorDelete(err);
  const char* text = nullptr;
  check(api.TRITONBACKEND_RequestCorrelationIdString(live(), &text));
  return nb::str(text != nullptr ? text : "");
}

uint32_t BackendRequest::flags() const {
  uint32_t flags = 0;
  check(triton().TRITONBACKEND_RequestFlags(live(), &flags));
  return flags;
}

uint64_t BackendRequest::timeout_us() const {
  const TritonApi& api = triton();
  uint64_t timeout = 0;
  if (api.TRITONBACKEND_InferenceRequestTimeoutMicroseconds != nullptr) {
    check(api.TRITONBACKEND_InferenceRequestTimeoutMicroseconds(live(),
                                                                &timeout));
  }
  return timeout;
}

nb::dict BackendRequest::parameters() const {
  const TritonApi& api = triton();
  uint32_t count = 0;
  check(api.TRITONBACKEND_RequestParameterCount(live(), &count));
  nb::dict result;
  for (uint32_t i = 0; i < count; ++i) {
    const char* key = nullptr;
    TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
    const void* value = nullptr;
    check(api.TRITONBACKEND_RequestParameter(live(), i, &key, &type, &value));
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        result[key] = nb::str(static_cast<const char*>(value));
        break;
      case TRITONSERVER_PARAMETER_INT:
        result[key] = nb::int_(*static_cast<const int64_t*>(value));
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        result[key] = nb::bool_(*static_cast<const bool*>(value));
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        result[key] = nb::float_(*static_cast<const double*>(value));
        break;
      default:
        break;  // bytes parameters have no JSON form; the stub skips them too
    }
  }
  return result;
}

bool BackendRequest::is_cancelled() const {
  return ask_cancelled(triton().TRITONBACKEND_RequestIsCancelled, live(),
                       "TRITONBACKEND_RequestIsCancelled");
}

void BackendRequest::read_requested_outputs() {
  if (state_->requested_known) return;
  for (std::string& name : requested_output_names()) {
    state_->requested.insert(std::move(name));
  }
  state_->requested_known = true;
}

uint32_t BackendRequest::sends() const {
  std::lock_guard<std::mutex> lock(state_->sends_mutex);
  return state_->sends;
}

void BackendRequest::send(const Outputs& outputs, const ErrorSpec& error,
                          uint32_t flags, const nb::dict& parameters) {
  check_not_final(*state_);
  {
    std::lock_guard<std::mutex> lock(state_->sends_mutex);
    count_send(*state_, flags);
  }
  read_requested_outputs();
  TRITONBACKEND_Response* response = nullptr;
  check(triton().TRITONBACKEND_ResponseNew(&response, live()));
  if (outbox_ != nullptr && (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) {
    fill(response, *state_, outputs, parameters);
    outbox_->add(response, flags, error_object(error));
    mark_sent(*state_, error, flags);
    return;
  }
  fill_and_send(response, *state_, outputs, error, flags, parameters);
}

std::optional<std::pair<nb::object, nb::object>> BackendRequest::typed_value(
    nb::handle self, nb::str name) {
  nb::object found = read_input(self, name.c_str());
  if (found.is_none()) return std::nullopt;
  nb::object datatype = nb::borrow(PyTuple_GetItem(found.ptr(), 0));
  nb::handle data = PyTuple_GetItem(found.ptr(), 2);
  if (nb::cast<int>(datatype) < TRITONSERVER_TYPE_BYTES && !PyTuple_Check(data.ptr())) {
    return std::make_pair(datatype, nb::borrow(data));  // BOOL .. FP64 in host memory: the array
  }
  return std::make_pair(datatype, pb_utils_bridge().input_value(name, found, self));
}

nb::object BackendRequest::input_value(nb::handle self, nb::str name) {
  auto typed = typed_value(self, name);
  return typed ? typed->second : nb::none();
}

nb::object BackendRequest::input_tensor(nb::handle self, nb::str name) {
  auto typed = typed_value(self, name);
  return typed ? make_tensor(name, typed->second, typed->first) : nb::none();
}

nb::tuple send_final_responses(nb::handle natives, nb::handle responses) {
  const size_t count = nb::len(natives);
  // The batch's checks first: nothing is sent when one fails.
  nb::object rescheduled = nb::none();
  nb::list twice;
  for (size_t i = 0; i < count; ++i) {
    nb::object response = responses[i];
    if (response.is_none()) continue;
    BackendRequest& request = nb::cast<BackendRequest&>(natives[i]);
    if (request.rescheduled() && rescheduled.is_none()) rescheduled = nb::int_(i);
    if (request.sends() > 0) twice.append(i);
  }
  if (!rescheduled.is_none() || nb::len(twice) > 0) {
    return nb::make_tuple(nb::list(), rescheduled, twice);
  }
  nb::list left;
  for (size_t i = 0; i < count; ++i) {
    BackendRequest& request = nb::cast<BackendRequest&>(natives[i]);
    if (request.final_sent() || request.rescheduled()) continue;
    nb::object response = responses[i];
    try {
      ResponseParts parts;
      if (!response_parts(response, parts) || !parts.error.is_none() ||
          !PyDict_Check(parts.parameters.ptr())) {
        left.append(i);
        continue;
      }
      request.send(Outputs(parts.outputs), std::nullopt,
                   TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                   nb::borrow<nb::dict>(parts.parameters));
    } catch (...) {  // the caller's send meets it again, and words it
      PyErr_Clear();
      left.append(i);
    }
  }
  return nb::make_tuple(left, nb::none(), nb::list());
}

void BackendRequest::fail_if_unanswered(int code, const std::string& message) {
  if (state_->final_sent) return;
  state_->rescheduled = false;  // answered: not rescheduled
  if (auto sender = sender_.lock()) {
    sender->send_error(code, message);
  } else {
    send(Outputs(), ErrorSpec({code, message}), TRITONSERVER_RESPONSE_COMPLETE_FINAL,
         nb::dict());
  }
}

void BackendRequest::list_if_open(TRITONSERVER_Server* server, bool kept) noexcept {
  if (!rescheduled() && (kept || !final_sent())) list_open(*state_, server);
}

void BackendRequest::fail_open(int code, const std::string& message) {
  if (auto sender = sender_.lock()) {
    sender->fail_open(code, message);
  } else if (request_ != nullptr && claim_final(*state_)) {
    send(Outputs(), ErrorSpec({code, message}),
         TRITONSERVER_RESPONSE_COMPLETE_FINAL, nb::dict());
  }
  if (!zero_copy_inputs_ && !rescheduled() && final_sent()) release_after_execute();
}

void BackendRequest::answer_when_dropped(std::string message) {
  state_->unanswered_message = std::move(message);
}

void BackendRequest::release_sender_after_final() noexcept {
  if (auto sender = sender_.lock()) sender->release_factory_after_final();
}

std::shared_ptr<ResponseSender> BackendRequest::response_sender() {
  if (auto sender = sender_.lock()) return sender;
  if (sender_made_) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + state_->model_name + "': this request's response "
          "sender was already deleted (keep the one get_response_sender() "
          "returned until it sent the final flag)");
  }
  read_requested_outputs();
  TRITONBACKEND_ResponseFactory* factory = nullptr;
  check(triton().TRITONBACKEND_ResponseFactoryNew(&factory, live()));
  auto sender = std::make_shared<ResponseSender>(factory, state_);
  sender_ = sender;
  state_->sender = sender;
  sender_made_ = true;
  return sender;
}

void fail_open_requests(TRITONSERVER_Server* server, const char* model) noexcept {
  try {
    // Held first: an answer lets the GIL go, and the model's threads may
    // let go of theirs (and so of the list's entries) meanwhile.
    struct Held {
      nb::object request;  // its Python object, or none
      std::shared_ptr<ResponseSender> sender;
      std::string message;
    };
    std::vector<Held> held;
    for (ResponseState* state : open_requests(server, model)) {
      held.push_back({state->request != nullptr ? nb::find(state->request) : nb::object(),
                      state->sender.lock(),
                      "model '" + state->model_name + "' was unloaded before it sent this "
                      "request's final response (the model kept the request or its response "
                      "sender past the unload's exit_timeout without sending the final flag "
                      "TRITONSERVER_RESPONSE_COMPLETE_FINAL)"});
    }
    for (Held& open : held) {
      try {
        if (open.request.is_valid()) {
          nb::inst_ptr<BackendRequest>(open.request)->fail_open(
              TRITONSERVER_ERROR_UNAVAILABLE, open.message);
        } else if (open.sender) {
          open.sender->fail_open(TRITONSERVER_ERROR_UNAVAILABLE, open.message);
        }
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("tritonserver: answering a request left open at its model's unload");
      } catch (...) {  // the core's refusal: nothing more to do for it
      }
    }
  } catch (...) {  // no memory for the list: the unload waits, as before
  }
}

void fail_natively(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code,
                   const std::string& message) noexcept {
  const TritonApi& api = triton();
  TRITONBACKEND_Response* response = nullptr;
  if (api.TRITONBACKEND_ResponseNew(&response, request) == nullptr) {
    TRITONSERVER_Error* why = make_error(code, message.c_str());
    ignore_error(api.TRITONBACKEND_ResponseSend(
        response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, why));
    ignore_error(why);
  }
  ignore_error(
      api.TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
}

}  // namespace tsb

#include "backend_response.h"

#include <nanobind/stl/string.h>

#include <cstring>
#include <mutex>
#include <utility>

#include "../cuda_runtime.h"
#include "../thread_state.h"
#include "../triton_library.h"
#include "pb_utils_bridge.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// Says once per output (a warning through the runtime's logger) that the
// model returned it as another type than its config declares: the client
// would get that type while the model's metadata says the declared one.
// The response is sent as it is, as with the stub.
void check_declared_types(const ResponseState& state, const Outputs& outputs) {
  if (!state.declared) return;
  DeclaredOutputs& declared = *state.declared;
  for (const Outputs::Output& output : outputs.items()) {
    auto found = declared.types.find(output.name);
    if (found == declared.types.end() || found->second == output.datatype ||
        declared.warned.count(output.name) != 0) {
      continue;
    }
    declared.warned.insert(output.name);
    pb_utils_bridge().warn_output_type(state.model_name, output.name, found->second,
                                  output.datatype);
  }
}

// A send of the model's through its response sender, checked and counted
// as the 2.51 stub's sender does it (ResponseSender::UpdateStateAndCounters
// in the python backend, its words): a non-decoupled model sends one
// response, and then may send the final flag alone; nothing goes after the
// final flag, or after execute() failed.
void admit_send(ResponseState& state, bool has_response, uint32_t flags) {
  std::lock_guard<std::mutex> lock(state.sends_mutex);
  if (!state.decoupled) {
    if (has_response && state.sends > 0) {
      raise(TRITONSERVER_ERROR_INVALID_ARG,
            "Unable to send response. Non-decoupled model cannot send more "
            "than one response.");
    }
    if (!has_response && (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) &&
        state.sends == 0) {
      raise(TRITONSERVER_ERROR_INVALID_ARG,
            "Unable to send response. Non-decoupled model cannot send "
            "complete final before sending a response.");
    }
  }
  if (state.closed) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "Unable to send response. Response sender has been closed.");
  }
  count_send(state, flags);
}

// Closes the request's sender (the runtime answered the request).
void close_sends(ResponseState& state) {
  std::lock_guard<std::mutex> lock(state.sends_mutex);
  state.closed = true;
}

// The requests listed open (list_open), with the GIL held; never freed
// (no C++ destructor runs after the interpreter's teardown).
std::unordered_set<ResponseState*>& listed_open() {
  static auto* listed = new std::unordered_set<ResponseState*>();
  return *listed;
}

std::string no_bytes(const std::string& output) {
  return "output '" + output + "': its data has no bytes to send (an array "
         "of Python objects is valid only as BYTES)";
}


}  // namespace

ResponseState::~ResponseState() {
  if (listed) listed_open().erase(this);
}

void list_open(ResponseState& state, TRITONSERVER_Server* server) noexcept {
  if (state.listed) return;
  try {
    listed_open().insert(&state);
  } catch (...) {  // no memory: not listed, an unload waits for it as before
    return;
  }
  state.server = server;
  state.listed = true;
}

std::vector<ResponseState*> open_requests(TRITONSERVER_Server* server,
                                          const char* model) {
  std::vector<ResponseState*> found;
  for (ResponseState* state : listed_open()) {
    if (state->server == server &&
        (model == nullptr || state->model_name == model)) {
      found.push_back(state);
    }
  }
  return found;
}

bool claim_final(ResponseState& state) {
  std::lock_guard<std::mutex> lock(state.sends_mutex);
  if (state.closed || state.final_sent || state.rescheduled) return false;
  state.closed = true;
  return true;
}

void fill(TRITONBACKEND_Response* response, ResponseState& state,
          const Outputs& outputs, const nb::dict& parameters) {
  const TritonApi& api = triton();
  try {
    check_declared_types(state, outputs);
    for (auto [key, value] : parameters) {
      std::string name = nb::cast<std::string>(key);
      if (nb::isinstance<nb::bool_>(value)) {
        check(api.TRITONBACKEND_ResponseSetBoolParameter(
            response, name.c_str(), nb::cast<bool>(value)));
      } else if (nb::isinstance<nb::int_>(value)) {
        check(api.TRITONBACKEND_ResponseSetIntParameter(
            response, name.c_str(), nb::cast<int64_t>(value)));
      } else if (nb::isinstance<nb::str>(value)) {
        check(api.TRITONBACKEND_ResponseSetStringParameter(
            response, name.c_str(), nb::cast<std::string>(value).c_str()));
      } else {
        raise(TRITONSERVER_ERROR_INVALID_ARG,
              "model '" + state.model_name + "': response parameter '" + name +
                  "' must be a str, int or bool");
      }
    }
    for (const Outputs::Output& item : outputs.items()) {
      if (!state.requested.empty() && state.requested.count(item.name) == 0) {
        continue;  // not asked for
      }
      TRITONBACKEND_Output* output = nullptr;
      check(api.TRITONBACKEND_ResponseOutput(
          response, &output, item.name.c_str(),
          static_cast<TRITONSERVER_DataType>(item.datatype), item.shape.data(),
          static_cast<uint32_t>(item.shape.size())));
      // Asked for where the data is; the core's allocator decides.
      const bool on_device = item.device >= 0;
      const void* data = on_device ? item.device_data : item.view.buf;
      const size_t size =
          on_device ? item.device_size : static_cast<size_t>(item.view.len);
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory_type =
          on_device ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;
      int64_t memory_type_id = on_device ? item.device : 0;
      check(api.TRITONBACKEND_OutputBuffer(output, &buffer, size, &memory_type,
                                           &memory_type_id));
      if (size == 0) continue;
      if (on_device || memory_type == TRITONSERVER_MEMORY_GPU) {
        const int device = memory_type == TRITONSERVER_MEMORY_GPU
                               ? static_cast<int>(memory_type_id)
                               : item.device;
        GilRelease release;
        cuda_copy(buffer, data, size, device,
                  "model '" + state.model_name + "': output '" + item.name + "'");
      } else {
        std::memcpy(buffer, data, size);
      }
    }
  } catch (...) {
    ignore_error(api.TRITONBACKEND_ResponseDelete(response));
    throw;
  }
}

TRITONSERVER_Error* error_object(const ErrorSpec& error) {
  return error ? triton().ErrorNew(
                     static_cast<TRITONSERVER_Error_Code>(error->first),
                     error->second.c_str())
               : nullptr;
}

void mark_sent(ResponseState& state, const ErrorSpec& error, uint32_t flags) {
  if (error) state.failed = true;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state.final_sent = true;
}

void fill_and_send(TRITONBACKEND_Response* response, ResponseState& state,
                   const Outputs& outputs,
                   const ErrorSpec& error, uint32_t flags,
                   const nb::dict& parameters) {
  const TritonApi& api = triton();
  fill(response, state, outputs, parameters);
  TRITONSERVER_Error* error_object = ::tsb::error_object(error);
  TRITONSERVER_Error* sent;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) {
    GilRelease release;
    sent = api.TRITONBACKEND_ResponseSend(response, flags, error_object);
  } else {
    // A decoupled model's response before its last: sent holding the GIL.
    // The core only hands it to the request's callback (ours: queued, or
    // written by a native transport, without waiting on any thread that
    // needs the GIL: every lock on that path is taken after the GIL, never
    // before it). Letting the GIL go here gave it to a Python consumer
    // waiting for it at every response, the model thread then waiting to
    // take it back: a handoff each way per response.
    sent = api.TRITONBACKEND_ResponseSend(response, flags, error_object);
  }
  ignore_error(error_object);
  mark_sent(state, error, flags);
  check(sent, "sending the response");
}

void count_send(ResponseState& state, uint32_t flags) {
  ++state.sends;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state.closed = true;
}

void check_not_final(const ResponseState& state) {
  if (state.final_sent) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + state.model_name + "': the request's final response "
          "(TRITONSERVER_RESPONSE_COMPLETE_FINAL) was already sent");
  }
}

Outputs::Outputs(nb::handle tensors) {
  nb::object contiguous;
  for (nb::handle tensor : tensors) {
    TensorParts parts = tensor_parts(tensor);
    add_value(parts.name, parts.datatype, parts.array, contiguous);
  }
}

Outputs::Outputs(nb::handle arrays, nb::handle datatypes) {
  nb::object contiguous;
  nb::dict by_name = nb::borrow<nb::dict>(arrays);
  nb::dict types = nb::borrow<nb::dict>(datatypes);
  for (auto [name, array] : by_name) {
    PyObject* datatype = PyDict_GetItem(types.ptr(), name.ptr());  // borrowed
    if (datatype == nullptr) {
      throw nb::key_error(("output '" + nb::cast<std::string>(name) +
                           "' has no declared data type").c_str());
    }
    add_value(name, datatype, array, contiguous);
  }
}

void Outputs::add_value(nb::handle name, nb::handle datatype, nb::handle array,
                        nb::object& contiguous) {
  const int type = nb::cast<int>(datatype);
  if (type != TRITONSERVER_TYPE_BYTES && PyObject_CheckBuffer(array.ptr())) {
    add(nb::cast<std::string>(name), type, array, nb::none(), contiguous);
  } else {  // BYTES to serialize, or data in GPU memory
    nb::tuple fields = nb::borrow<nb::tuple>(
        pb_utils_bridge().output_spec(name, datatype, array));
    add(nb::cast<std::string>(fields[0]), nb::cast<int>(fields[1]), fields[2],
        fields[3], contiguous);
  }
}

void Outputs::add(std::string name, int datatype, nb::handle data,
                  nb::handle shape, nb::object& contiguous) {
  Output item{std::move(name), datatype, {}, {}};
  if (PyTuple_Check(data.ptr())) {  // in GPU memory
    nb::tuple device = nb::borrow<nb::tuple>(data);
    if (device.size() != 4 || shape.is_none()) {
      throw nb::type_error("a GPU output must be (pointer, bytes, device id, "
                           "owner) with its shape");
    }
    item.device_data = reinterpret_cast<const void*>(
        nb::cast<uintptr_t>(device[0]));
    item.device_size = nb::cast<size_t>(device[1]);
    item.device = nb::cast<int>(device[2]);
    item.owner = device[3];
    for (nb::handle dim : shape) item.shape.push_back(nb::cast<int64_t>(dim));
    items_.push_back(std::move(item));
    return;
  }
  constexpr int kFlags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
  nb::object held = nb::borrow(data);
  if (PyObject_GetBuffer(held.ptr(), &item.view, kFlags) != 0) {
    PyErr_Clear();
    if (!contiguous.is_valid()) {
      contiguous = nb::module_::import_("numpy").attr("ascontiguousarray");
    }
    try {
      held = contiguous(held);
    } catch (nb::python_error&) {
      held = nb::object();
    }
    if (!held.is_valid() ||
        PyObject_GetBuffer(held.ptr(), &item.view, kFlags) != 0) {
      PyErr_Clear();
      throw nb::type_error(no_bytes(item.name).c_str());
    }
  }
  try {
    // Python objects (NumPy's object arrays give their pointers).
    if (item.view.format != nullptr && std::strchr(item.view.format, 'O')) {
      throw nb::type_error(no_bytes(item.name).c_str());
    }
    if (shape.is_none()) {
      item.shape.assign(item.view.shape, item.view.shape + item.view.ndim);
    } else {
      for (nb::handle dim : shape) item.shape.push_back(nb::cast<int64_t>(dim));
    }
    items_.push_back(std::move(item));
  } catch (...) {
    PyBuffer_Release(&item.view);
    throw;
  }
}

Outputs::~Outputs() {
  for (Output& item : items_) {
    if (item.device < 0) PyBuffer_Release(&item.view);
  }
}


ResponseSender::~ResponseSender() {
  const TritonApi& api = triton();
  if (!state_->final_sent && !state_->rescheduled) {
    try {
      send_error(TRITONSERVER_ERROR_INTERNAL,
                 !state_->unanswered_message.empty()
                     ? state_->unanswered_message
                     : "model '" + state_->model_name +
                           "': the response sender was deleted before it sent "
                           "the final flag (TRITONSERVER_RESPONSE_COMPLETE_FINAL)");
    } catch (...) {
    }
  }
  if (factory_ != nullptr) {
    ignore_error(api.TRITONBACKEND_ResponseFactoryDelete(factory_));
  }
}

void ResponseSender::release_factory_after_final() noexcept {
  if (factory_ == nullptr || !state_->final_sent) return;
  const TritonApi& api = triton();
  if (api.TRITONBACKEND_ResponseFactoryIsCancelled != nullptr) {
    bool cancelled = false;
    ignore_error(
        api.TRITONBACKEND_ResponseFactoryIsCancelled(factory_, &cancelled));
    cancelled_at_final_ = cancelled;
  }
  ignore_error(api.TRITONBACKEND_ResponseFactoryDelete(factory_));
  factory_ = nullptr;
}

void ResponseSender::send(const Outputs& outputs, const ErrorSpec& error,
                          uint32_t flags, const nb::dict& parameters) {
  admit_send(*state_, true, flags);
  send_response(outputs, error, flags, parameters);
}

void ResponseSender::send_error(int code, const std::string& message) {
  close_sends(*state_);
  check_not_final(*state_);
  send_response(Outputs(), ErrorSpec({code, message}),
                TRITONSERVER_RESPONSE_COMPLETE_FINAL, nb::dict());
}

void ResponseSender::fail_open(int code, const std::string& message) {
  if (!claim_final(*state_)) return;
  send_response(Outputs(), ErrorSpec({code, message}),
                TRITONSERVER_RESPONSE_COMPLETE_FINAL, nb::dict());
}

void ResponseSender::send_response(const Outputs& outputs,
                                   const ErrorSpec& error, uint32_t flags,
                                   const nb::dict& parameters) {
  TRITONBACKEND_Response* response = nullptr;
  check(triton().TRITONBACKEND_ResponseNewFromFactory(&response, factory_));
  try {
    fill_and_send(response, *state_, outputs, error, flags, parameters);
  } catch (...) {
    release_factory_after_final();
    throw;
  }
  release_factory_after_final();
}

void ResponseSender::send_flags(uint32_t flags) {
  admit_send(*state_, false, flags);
  TRITONSERVER_Error* err;
  {
    GilRelease release;
    err = triton().TRITONBACKEND_ResponseFactorySendFlags(factory_, flags);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state_->final_sent = true;
  release_factory_after_final();
  check(err, "sending the response flags");
}

bool ResponseSender::is_cancelled() const {
  if (factory_ == nullptr &&
      triton().TRITONBACKEND_ResponseFactoryIsCancelled != nullptr) {
    return cancelled_at_final_;
  }
  return ask_cancelled(triton().TRITONBACKEND_ResponseFactoryIsCancelled,
                       factory_, "TRITONBACKEND_ResponseFactoryIsCancelled");
}

}  // namespace tsb

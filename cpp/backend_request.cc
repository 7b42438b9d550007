#include "backend_request.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <initializer_list>
#include <mutex>
#include <utility>

#include "cuda_runtime.h"
#include "errors.h"
#include "numpy_views.h"
#include "triton_library.h"
#include "thread_state.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// The NumPy type (as DLPack's) of a TRITONSERVER_DataType; none (nullopt)
// for BYTES and BF16, which NumPy has no type for.
std::optional<nb::dlpack::dtype> array_dtype(TRITONSERVER_DataType datatype) {
  using Code = nb::dlpack::dtype_code;
  auto of = [](Code code, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(code),
                             static_cast<uint8_t>(bits), 1};
  };
  switch (datatype) {
    case TRITONSERVER_TYPE_BOOL: return of(Code::Bool, 8);
    case TRITONSERVER_TYPE_UINT8: return of(Code::UInt, 8);
    case TRITONSERVER_TYPE_UINT16: return of(Code::UInt, 16);
    case TRITONSERVER_TYPE_UINT32: return of(Code::UInt, 32);
    case TRITONSERVER_TYPE_UINT64: return of(Code::UInt, 64);
    case TRITONSERVER_TYPE_INT8: return of(Code::Int, 8);
    case TRITONSERVER_TYPE_INT16: return of(Code::Int, 16);
    case TRITONSERVER_TYPE_INT32: return of(Code::Int, 32);
    case TRITONSERVER_TYPE_INT64: return of(Code::Int, 64);
    case TRITONSERVER_TYPE_FP16: return of(Code::Float, 16);
    case TRITONSERVER_TYPE_FP32: return of(Code::Float, 32);
    case TRITONSERVER_TYPE_FP64: return of(Code::Float, 64);
    default: return std::nullopt;
  }
}

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
    nb::module_::import_("tritonserver._python_models._runtime")
        .attr("warn_output_type")(state.model_name, output.name, found->second,
                                  output.datatype);
  }
}

// Fills `response` with the parameters and outputs (deleting it on
// failure).
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

// Records what a response sent with `flags` (and `error`) means for the
// request.
void mark_sent(ResponseState& state, const ErrorSpec& error, uint32_t flags) {
  if (error) state.failed = true;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state.final_sent = true;
}

// Fills `response` and sends it; the GIL is released while the core takes
// it.
void fill_and_send(TRITONBACKEND_Response* response, ResponseState& state,
                   const Outputs& outputs,
                   const ErrorSpec& error, uint32_t flags,
                   const nb::dict& parameters) {
  const TritonApi& api = triton();
  fill(response, state, outputs, parameters);
  TRITONSERVER_Error* error_object = ::tsb::error_object(error);
  TRITONSERVER_Error* sent;
  {
    GilRelease release;
    sent = api.TRITONBACKEND_ResponseSend(response, flags, error_object);
  }
  ignore_error(error_object);
  mark_sent(state, error, flags);
  check(sent, "sending the response");
}

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

// Counts a send for the request (ResponseState::sends); the caller holds
// the state's sends_mutex.
void count_send(ResponseState& state, uint32_t flags) {
  ++state.sends;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state.closed = true;
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

void check_not_final(const ResponseState& state) {
  if (state.final_sent) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "model '" + state.model_name + "': the request's final response "
          "(TRITONSERVER_RESPONSE_COMPLETE_FINAL) was already sent");
  }
}

// A new instance of the Python class `type` (one with __slots__) without
// its __init__; `fields` (name, value) set through its slots.
nb::object bare_instance(nb::handle type,
                         std::initializer_list<std::pair<PyObject*, nb::handle>> fields) {
  using Alloc = PyObject* (*)(PyTypeObject*, Py_ssize_t);
  auto* python_type = reinterpret_cast<PyTypeObject*>(type.ptr());
  auto alloc = reinterpret_cast<Alloc>(PyType_GetSlot(python_type, Py_tp_alloc));
  nb::object instance = nb::steal(alloc(python_type, 0));
  if (!instance.is_valid()) throw nb::python_error();
  for (const auto& [key, value] : fields) {
    if (PyObject_SetAttr(instance.ptr(), key, value.ptr()) != 0) {
      throw nb::python_error();
    }
  }
  return instance;
}

// The slot names of a pb_utils Tensor, interned once (never freed: used
// until the process ends).
struct TensorSlots {
  PyObject* name = PyUnicode_InternFromString("_name");
  PyObject* datatype = PyUnicode_InternFromString("_triton_dtype");
  PyObject* array = PyUnicode_InternFromString("_array");
};
const TensorSlots& tensor_slots() {
  static const TensorSlots* const slots = new TensorSlots();
  return *slots;
}

std::string no_bytes(const std::string& output) {
  return "output '" + output + "': its data has no bytes to send (an array "
         "of Python objects is valid only as BYTES)";
}

}  // namespace

Outputs::Outputs(nb::handle tensors, nb::handle output_spec) {
  const TensorSlots& slots = tensor_slots();
  nb::object contiguous;
  for (nb::handle tensor : tensors) {
    nb::object name = nb::steal(PyObject_GetAttr(tensor.ptr(), slots.name));
    nb::object datatype = nb::steal(PyObject_GetAttr(tensor.ptr(), slots.datatype));
    nb::object array = nb::steal(PyObject_GetAttr(tensor.ptr(), slots.array));
    if (!name.is_valid() || !datatype.is_valid() || !array.is_valid()) {
      throw nb::python_error();
    }
    add_value(name, datatype, array, output_spec, contiguous);
  }
}

Outputs::Outputs(nb::handle arrays, nb::handle datatypes, nb::handle output_spec) {
  nb::object contiguous;
  nb::dict by_name = nb::borrow<nb::dict>(arrays);
  nb::dict types = nb::borrow<nb::dict>(datatypes);
  for (auto [name, array] : by_name) {
    PyObject* datatype = PyDict_GetItem(types.ptr(), name.ptr());  // borrowed
    if (datatype == nullptr) {
      throw nb::key_error(("output '" + nb::cast<std::string>(name) +
                           "' has no declared data type").c_str());
    }
    add_value(name, datatype, array, output_spec, contiguous);
  }
}

void Outputs::add_value(nb::handle name, nb::handle datatype, nb::handle array,
                        nb::handle output_spec, nb::object& contiguous) {
  const int type = nb::cast<int>(datatype);
  if (type != TRITONSERVER_TYPE_BYTES && PyObject_CheckBuffer(array.ptr())) {
    add(nb::cast<std::string>(name), type, array, nb::none(), contiguous);
  } else {  // BYTES to serialize, or data in GPU memory
    nb::tuple fields = nb::borrow<nb::tuple>(output_spec(name, datatype, array));
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
  if (request_ == nullptr) return;  // released when execute() returned
  if (rescheduled()) {
    release_rescheduled(request_);
    return;
  }
  if (!sender_made_ && !state_->final_sent) {
    try {
      fail_if_unanswered(TRITONSERVER_ERROR_INTERNAL,
                         "model '" + state_->model_name +
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

nb::object BackendRequest::input(nb::handle self, const std::string& name) {
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
  std::optional<nb::dlpack::dtype> dtype = array_dtype(datatype);
  std::vector<size_t> array_shape;
  uint64_t expected = dtype ? dtype->bits / 8 : 0;
  for (uint32_t i = 0; i < dims; ++i) {
    const size_t dim = shape[i] < 0 ? 0 : static_cast<size_t>(shape[i]);
    array_shape.push_back(dim);
    expected *= dim;
  }
  if (!dtype) {
    dtype = nb::dtype<uint8_t>();
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
                                  array_shape.data(), *dtype, self);
    return nb::make_tuple(static_cast<int>(datatype), dims_tuple, array);
  }
  uint8_t* copy = nullptr;
  nb::object array =
      numpy_array(array_shape.size(), array_shape.data(), *dtype, &copy);
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
    nb::handle self, nb::str name, nb::handle input_value) {
  nb::object found = input(self, name.c_str());
  if (found.is_none()) return std::nullopt;
  nb::object datatype = nb::borrow(PyTuple_GetItem(found.ptr(), 0));
  nb::handle data = PyTuple_GetItem(found.ptr(), 2);
  if (nb::cast<int>(datatype) < TRITONSERVER_TYPE_BYTES && !PyTuple_Check(data.ptr())) {
    return std::make_pair(datatype, nb::borrow(data));  // BOOL .. FP64 in host memory: the view
  }
  return std::make_pair(datatype, input_value(name, found, self));
}

nb::object BackendRequest::input_value(nb::handle self, nb::str name,
                                       nb::handle input_value) {
  auto typed = typed_value(self, name, input_value);
  return typed ? typed->second : nb::none();
}

nb::object BackendRequest::input_tensor(nb::handle self, nb::str name,
                                        nb::handle tensor_type,
                                        nb::handle input_value) {
  const TensorSlots& slots = tensor_slots();
  auto typed = typed_value(self, name, input_value);
  if (!typed) return nb::none();
  return bare_instance(tensor_type, {{slots.name, name},
                                     {slots.array, typed->second},
                                     {slots.datatype, typed->first}});
}

nb::object wrap_request(nb::handle request_type, nb::handle native,
                        nb::handle model_name) {
  static PyObject* const native_key = PyUnicode_InternFromString("_native");
  static PyObject* const model_key = PyUnicode_InternFromString("_model_name");
  return bare_instance(request_type, {{native_key, native}, {model_key, model_name}});
}

nb::list send_final_responses(nb::handle natives, nb::handle responses,
                              nb::handle response_type,
                              nb::handle output_spec) {
  static PyObject* const outputs_key = PyUnicode_InternFromString("_outputs");
  static PyObject* const error_key = PyUnicode_InternFromString("_error");
  static PyObject* const parameters_key =
      PyUnicode_InternFromString("_parameters");
  nb::list left;
  const size_t count = nb::len(natives);
  for (size_t i = 0; i < count; ++i) {
    BackendRequest& request = nb::cast<BackendRequest&>(natives[i]);
    if (request.final_sent() || request.rescheduled()) continue;
    nb::object response = responses[i];
    if (Py_TYPE(response.ptr()) != reinterpret_cast<PyTypeObject*>(response_type.ptr())) {
      left.append(i);
      continue;
    }
    try {
      nb::object error = nb::steal(PyObject_GetAttr(response.ptr(), error_key));
      nb::object tensors = nb::steal(PyObject_GetAttr(response.ptr(), outputs_key));
      nb::object parameters =
          nb::steal(PyObject_GetAttr(response.ptr(), parameters_key));
      if (!error.is_valid() || !tensors.is_valid() || !parameters.is_valid()) {
        throw nb::python_error();
      }
      if (!error.is_none() || !PyDict_Check(parameters.ptr())) {
        left.append(i);
        continue;
      }
      request.send(Outputs(tensors, output_spec), std::nullopt,
                   TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                   nb::borrow<nb::dict>(parameters));
    } catch (...) {  // the caller's send meets it again, and words it
      PyErr_Clear();
      left.append(i);
    }
  }
  return left;
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
  sender_made_ = true;
  return sender;
}

ResponseSender::~ResponseSender() {
  const TritonApi& api = triton();
  if (!state_->final_sent && !state_->rescheduled) {
    try {
      send_error(TRITONSERVER_ERROR_INTERNAL,
                 "model '" + state_->model_name +
                     "': the response sender was deleted before it sent the "
                     "final flag (TRITONSERVER_RESPONSE_COMPLETE_FINAL)");
    } catch (...) {
    }
  }
  ignore_error(api.TRITONBACKEND_ResponseFactoryDelete(factory_));
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

void ResponseSender::send_response(const Outputs& outputs,
                                   const ErrorSpec& error, uint32_t flags,
                                   const nb::dict& parameters) {
  TRITONBACKEND_Response* response = nullptr;
  check(triton().TRITONBACKEND_ResponseNewFromFactory(&response, factory_));
  fill_and_send(response, *state_, outputs, error, flags, parameters);
}

void ResponseSender::send_flags(uint32_t flags) {
  admit_send(*state_, false, flags);
  TRITONSERVER_Error* err;
  {
    GilRelease release;
    err = triton().TRITONBACKEND_ResponseFactorySendFlags(factory_, flags);
  }
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) state_->final_sent = true;
  check(err, "sending the response flags");
}

bool ResponseSender::is_cancelled() const {
  return ask_cancelled(triton().TRITONBACKEND_ResponseFactoryIsCancelled,
                       factory_, "TRITONBACKEND_ResponseFactoryIsCancelled");
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

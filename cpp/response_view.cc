#include "response_view.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <new>
#include <utility>

#include "api_types.h"
#include "errors.h"
#include "type_slots.h"
#include "thread_state.h"

namespace nb = nanobind;

namespace tsb {
namespace {

nb::object to_python(const ParameterValue& v) {
  if (auto* s = std::get_if<std::string>(&v)) return nb::str(s->c_str());
  if (auto* i = std::get_if<int64_t>(&v)) return nb::int_(*i);
  if (auto* b = std::get_if<bool>(&v)) return nb::bool_(*b);
  if (auto* d = std::get_if<double>(&v)) return nb::float_(*d);
  const std::string& bytes = std::get<Bytes>(v).data;
  return nb::bytes(bytes.data(), bytes.size());
}

nb::dict parameters_dict(const ResponseData& data) {
  nb::dict d;
  for (const auto& [k, v] : data.parameters) d[k.c_str()] = to_python(v);
  return d;
}

}  // namespace

BufferHandle::~BufferHandle() {
  if (ref && ref->memory_type != TRITONSERVER_MEMORY_CPU &&
      ref->refs.load(std::memory_order_acquire) == 1) {
    GilRelease release;
    ref = BufferRef();
  }
}

nb::object memory_buffer(BufferRef buffer, size_t size) {
  const ApiTypes& types = api_types();
  const OutputBuffer& b = *buffer.get();
  // MemoryBuffer(data_ptr, memory_type, memory_type_id, size, owner)
  nb::object args[] = {
      nb::int_(reinterpret_cast<uintptr_t>(b.data)),
      enum_member(types.memory_types, static_cast<int>(b.memory_type)),
      nb::int_(b.memory_type_id), nb::int_(size),
      nb::cast(BufferHandle(std::move(buffer), size))};
  PyObject* raw[] = {args[0].ptr(), args[1].ptr(), args[2].ptr(),
                     args[3].ptr(), args[4].ptr()};
  PyObject* result = PyObject_Vectorcall(types.memory_buffer.ptr(), raw, 5, nullptr);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

nb::object copy_buffer(uintptr_t src, size_t size, int src_type,
                       int memory_type, int64_t memory_type_id) {
  BufferRef copy;
  {
    GilRelease release;
    copy = buffer_copy(reinterpret_cast<const void*>(src), size,
                       static_cast<TRITONSERVER_MemoryType>(src_type),
                       static_cast<TRITONSERVER_MemoryType>(memory_type),
                       memory_type_id);
  }
  return memory_buffer(std::move(copy), size);
}

namespace {

nb::object vectorcall(const nb::object& callable, PyObject* const* args,
                      size_t count) {
  PyObject* result = PyObject_Vectorcall(callable.ptr(), args, count, nullptr);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

}  // namespace

nb::object response_error(const ResponseData& d, bool cancelled) {
  const ApiTypes& types = api_types();
  if (d.has_error) {
    nb::object args[] = {nb::int_(static_cast<int>(d.error_code)),
                         nb::str(d.error_message.data(), d.error_message.size())};
    PyObject* raw[] = {args[0].ptr(), args[1].ptr()};
    return vectorcall(types.error_from_code, raw, 2);
  }
  if (cancelled && d.final && d.outputs.empty()) {
    nb::object message = nb::str("request cancelled");
    PyObject* raw[] = {message.ptr()};
    return vectorcall(types.cancelled_error, raw, 1);
  }
  return nb::none();
}

nb::object inference_response(const ResponseData& d, nb::handle model,
                              nb::handle inference_request, bool cancelled,
                              nb::object* error_out) {
  const ApiTypes& types = api_types();
  nb::dict outputs;
  for (const OutputTensor& t : d.outputs) {
    // Tensor(data_type, shape, memory_buffer)
    nb::object args[] = {
        enum_member(types.data_types, static_cast<int>(t.datatype)),
        nb::cast(t.shape), memory_buffer(t.buffer, t.byte_size)};
    PyObject* raw[] = {args[0].ptr(), args[1].ptr(), args[2].ptr()};
    nb::str name(t.name.data(), t.name.size());
    if (PyDict_SetItem(outputs.ptr(), name.ptr(), vectorcall(types.tensor, raw, 3).ptr()) != 0) {
      throw nb::python_error();
    }
  }
  nb::object error = response_error(d, cancelled);
  nb::object request_id;
  if (d.request_id.empty()) {
    request_id = nb::steal(PyObject_GetAttr(inference_request.ptr(),
                                            types.request_id_name.ptr()));
    if (!request_id.is_valid()) throw nb::python_error();
  } else {
    request_id = nb::str(d.request_id.data(), d.request_id.size());
  }
  // InferenceResponse(model, request_id, parameters, outputs, error,
  //                   classification_label, final, model_version)
  nb::object parameters = parameters_dict(d);
  nb::object version = d.model_version >= 0 ? nb::object(nb::int_(d.model_version))
                                            : nb::none();
  PyObject* raw[] = {model.ptr(), request_id.ptr(), parameters.ptr(),
                     outputs.ptr(), error.ptr(), Py_None,
                     d.final ? Py_True : Py_False, version.ptr()};
  nb::object response = vectorcall(types.inference_response, raw, 8);
  if (error_out != nullptr) *error_out = std::move(error);
  return response;
}

ResponseStream::ResponseStream(nb::object model_, nb::object request_,
                               nb::object inference_request_, bool raise)
    : model(std::move(model_)),
      request(std::move(request_)),
      inference_request(std::move(inference_request_)),
      native_request(&nb::cast<Request&>(request)),
      raise_on_error(raise) {}

nb::object ResponseStream::deliver(const ResponseData& taken) {
  // Once cancelled, the stream ends with its cancelled end, whatever was
  // taken (a late response is dropped; its buffers go with it).
  const ResponseData& data = cancelled || taken.cancelled ? *cancelled_end() : taken;
  nb::object error;
  nb::object response =
      inference_response(data, model, inference_request, cancelled || data.cancelled, &error);
  complete = data.final;
  if (raise_on_error) raise_if_error(error);
  return response;
}

void raise_if_error(const nb::object& error) {
  if (error.is_none()) return;
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw nb::python_error();
}

int ResponseStream::traverse(visitproc visit, void* arg) {
  Py_VISIT(model.ptr());
  Py_VISIT(request.ptr());
  Py_VISIT(inference_request.ptr());
  return 0;
}

void ResponseStream::clear() noexcept {
  // The Request stays: native_request points into it (a Request holds no
  // Python references that could close a cycle).
  nb::object gone[] = {std::move(model), std::move(inference_request)};
  model = nb::none();
  inference_request = nb::none();
}

void ResponseStream::cancel() {
  if (native_request->cancel()) cancelled = true;
}

namespace {

// next(): the next response, waiting with the GIL released; NULL with no
// exception set ends a loop (as StopIteration would) once the final
// response was delivered.
PyObject* stream_next(PyObject* self) {
  if (!nb::inst_ready(self)) {
    PyErr_SetString(PyExc_TypeError, "ResponseStream.__init__() was not called");
    return nullptr;
  }
  ResponseStream* s = nb::inst_ptr<ResponseStream>(self);
  if (s->complete) return nullptr;
  try {
    if (s->cancelled) return s->deliver(*cancelled_end()).release().ptr();
    ResponsePtr r = s->native_request->next_from_python(-1.0);
    if (!r) {  // no timeout given: next() waits for one
      PyErr_SetString(PyExc_RuntimeError, "no response after an unbounded wait");
      return nullptr;
    }
    return s->deliver(*r).release().ptr();
  } catch (...) {
    set_error_from_current_exception();
  }
  return nullptr;
}

}  // namespace

PyType_Slot response_stream_slots[] = {
    {Py_tp_traverse, reinterpret_cast<void*>(traverse_slot<ResponseStream>)},
    {Py_tp_clear, reinterpret_cast<void*>(clear_slot<ResponseStream>)},
    {Py_tp_iter, reinterpret_cast<void*>(self_slot)},
    {Py_tp_iternext, reinterpret_cast<void*>(stream_next)},
    {0, nullptr}};

nb::object response_to_python(ResponsePtr response) {
  if (!response) return nb::none();
  return nb::cast(ResponseHandle{std::move(response)});
}

nb::object dispatch_pop_from_python(double timeout_s) {
  std::pair<uint64_t, ResponsePtr> item;
  {
    GilRelease release;
    item = dispatch_pop(timeout_s);
  }
  if (!item.second) return nb::none();
  return nb::make_tuple(item.first, response_to_python(std::move(item.second)));
}

}  // namespace tsb

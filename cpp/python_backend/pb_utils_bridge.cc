#include "pb_utils_bridge.h"

#include <nanobind/stl/string.h>

#include <initializer_list>
#include <utility>

namespace nb = nanobind;

namespace tsb {
namespace {

PyObject* interned(const char* name) { return PyUnicode_InternFromString(name); }

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

nb::object slot(nb::handle object, PyObject* name) {
  nb::object value = nb::steal(PyObject_GetAttr(object.ptr(), name));
  if (!value.is_valid()) throw nb::python_error();
  return value;
}

}  // namespace

const PbUtilsBridge& pb_utils_bridge() {
  static PbUtilsBridge* bridge = nullptr;
  if (bridge == nullptr) {
    auto* b = new PbUtilsBridge();
    nb::module_ pb_utils = nb::module_::import_("tritonserver._python_models.pb_utils");
    b->tensor = pb_utils.attr("Tensor");
    b->inference_request = pb_utils.attr("InferenceRequest");
    b->inference_response = pb_utils.attr("InferenceResponse");
    b->input_value = pb_utils.attr("_input_value");
    b->output_spec = pb_utils.attr("_output_spec");
    nb::module_ runtime = nb::module_::import_("tritonserver._python_models._runtime");
    b->load_instance = runtime.attr("load_instance");
    b->auto_complete = runtime.attr("auto_complete");
    b->warn_output_type = runtime.attr("warn_output_type");
    b->tensor_name = interned("_name");
    b->tensor_datatype = interned("_triton_dtype");
    b->tensor_array = interned("_array");
    b->request_native = interned("_native");
    b->request_model_name = interned("_model_name");
    b->response_outputs = interned("_outputs");
    b->response_error = interned("_error");
    b->response_parameters = interned("_parameters");
    bridge = b;  // only once complete: a failed import is tried again
  }
  return *bridge;
}

nb::object make_tensor(nb::handle name, nb::handle array, nb::handle datatype) {
  const PbUtilsBridge& b = pb_utils_bridge();
  return bare_instance(b.tensor, {{b.tensor_name, name},
                                  {b.tensor_array, array},
                                  {b.tensor_datatype, datatype}});
}

TensorParts tensor_parts(nb::handle tensor) {
  const PbUtilsBridge& b = pb_utils_bridge();
  return {slot(tensor, b.tensor_name), slot(tensor, b.tensor_datatype),
          slot(tensor, b.tensor_array)};
}

nb::object wrap_request(nb::handle native, nb::handle model_name) {
  const PbUtilsBridge& b = pb_utils_bridge();
  return bare_instance(b.inference_request, {{b.request_native, native},
                                             {b.request_model_name, model_name}});
}

bool response_parts(nb::handle response, ResponseParts& parts) {
  const PbUtilsBridge& b = pb_utils_bridge();
  if (Py_TYPE(response.ptr()) != reinterpret_cast<PyTypeObject*>(b.inference_response.ptr())) {
    return false;
  }
  parts = {slot(response, b.response_outputs), slot(response, b.response_error),
           slot(response, b.response_parameters)};
  return true;
}

RunnerFacts runner_facts(nb::handle runner) {
  RunnerFacts facts{nb::cast<bool>(runner.attr("device_inputs")),
                    nb::cast<bool>(runner.attr("zero_copy_inputs")),
                    nb::cast<bool>(runner.attr("decoupled")),
                    nb::cast<bool>(runner.attr("batching")),
                    nb::cast<bool>(runner.attr("hand_off")),
                    runner.attr("request_type"),
                    runner.attr("execute"),
                    {}};
  for (auto [name, datatype] : nb::cast<nb::dict>(runner.attr("declared_outputs"))) {
    facts.declared_outputs.emplace(nb::cast<std::string>(name), nb::cast<int>(datatype));
  }
  return facts;
}

void start_worker(nb::handle runner, nb::object run) { runner.attr("start_worker")(run); }

void finalize_runner(nb::handle runner) { runner.attr("finalize")(); }

}  // namespace tsb

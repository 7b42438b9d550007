// The one place where the backend wing depends on the Python of the
// in-process python models (tritonserver._python_models), as api_types.h is
// for tritonserver._api: every object C++ makes or reads there, every slot
// it relies on, and every Python function it calls, looked up once, by
// name, on first use (then reused without a lookup by name per request).
// tests/test_pb_utils_bridge.py pins this list: a rename in Python fails
// that test, not a request.
//
// pb_utils (tritonserver._python_models.pb_utils):
//   Tensor              made without __init__ (input_tensor) and read
//                       (Outputs): slots _name, _triton_dtype, _array
//   InferenceRequest    made without __init__ for execute() (wrap_request):
//                       slots _native, _model_name
//   InferenceResponse   read (send_final_responses): slots _outputs,
//                       _error, _parameters
//   _input_value(name, found, owner)        an input's value from
//                       read_input's (datatype, shape, data): BYTES
//                       decoded, GPU data as a DeviceArray
//   _output_spec(name, triton_dtype, array) an output BYTES-serialized or
//                       in GPU memory, as (name, datatype, data, shape)
// _runtime (tritonserver._python_models._runtime):
//   load_instance(args, server_address) -> (runner, None) | (None, (code, message))
//   auto_complete(args) -> (config JSON | None, None | (code, message))
//   warn_output_type(model, output, declared, returned)
//   the runner's attributes, read once per instance (RunnerFacts):
//     device_inputs, zero_copy_inputs, decoupled, batching, hand_off (bool),
//     request_type (pb_utils.InferenceRequest, or None: execute takes the
//     BackendRequest objects), declared_outputs ({name: datatype}),
//     execute(natives, requests), start_worker(run), finalize()
#pragma once

#include <nanobind/nanobind.h>

#include <string>
#include <unordered_map>

namespace tsb {

struct PbUtilsBridge {
  nanobind::object tensor, inference_request, inference_response;
  nanobind::object input_value, output_spec;
  nanobind::object load_instance, auto_complete, warn_output_type;
  // The slot names, interned.
  PyObject *tensor_name, *tensor_datatype, *tensor_array;
  PyObject *request_native, *request_model_name;
  PyObject *response_outputs, *response_error, *response_parameters;
};

// Imported on first use; never freed (no Python after teardown). Call with
// the GIL held; raises (nanobind::python_error) while they cannot be
// imported (a failed import is tried again).
const PbUtilsBridge& pb_utils_bridge();

// A pb_utils Tensor of (name, array, TRITONSERVER_DataType), no __init__.
nanobind::object make_tensor(nanobind::handle name, nanobind::handle array,
                             nanobind::handle datatype);
// A tensor's (name, datatype, array) slots, read in place.
struct TensorParts {
  nanobind::object name, datatype, array;
};
TensorParts tensor_parts(nanobind::handle tensor);

// A pb_utils InferenceRequest of the BackendRequest `native`, for
// execute(): its _native and _model_name set, no __init__.
nanobind::object wrap_request(nanobind::handle native,
                              nanobind::handle model_name);

// A pb_utils InferenceResponse's (outputs, error, parameters) slots; false
// when `response` is of another type.
struct ResponseParts {
  nanobind::object outputs, error, parameters;
};
bool response_parts(nanobind::handle response, ResponseParts& parts);

// What the runtime's instance object (`runner`) tells the backend, read
// once when the instance is made.
struct RunnerFacts {
  bool device_inputs, zero_copy_inputs, decoupled, batching, hand_off;
  nanobind::object request_type, execute;
  std::unordered_map<std::string, int> declared_outputs;
};
RunnerFacts runner_facts(nanobind::handle runner);
// runner.start_worker(run) and runner.finalize().
void start_worker(nanobind::handle runner, nanobind::object run);
void finalize_runner(nanobind::handle runner);

}  // namespace tsb

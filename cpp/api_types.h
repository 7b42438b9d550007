// The one place where the native layer depends on the Python API layer
// (tritonserver._api): the classes and functions it calls to build what it
// hands out, imported once, by name, on first use. The constructors are
// called positionally, so their argument order is part of this contract;
// tests/test_api_types.py pins it. Nothing else in cpp/ imports
// tritonserver._api.
#pragma once

#include <nanobind/nanobind.h>

namespace tsb {

struct ApiTypes {
  // DataType and MemoryType members indexed by value.
  nanobind::tuple data_types, memory_types;
  // MemoryBuffer(data_ptr, memory_type, memory_type_id, size, owner)
  nanobind::object memory_buffer;
  // Tensor(data_type, shape, memory_buffer)
  nanobind::object tensor;
  // InferenceResponse(model, request_id, parameters, outputs, error,
  //                   classification_label, final)
  nanobind::object inference_response;
  // error_from_code(code, message) and CancelledError(message)
  nanobind::object error_from_code, cancelled_error;
  // The TritonError subclasses indexed by TRITONSERVER_Error_Code.
  nanobind::tuple error_classes;
  nanobind::object request_id_name;  // "request_id", interned
};

// Imported on first use; never freed (no Python after teardown). Call with
// the GIL held; raises (nanobind::python_error) while they cannot be
// imported.
const ApiTypes& api_types();

// The member of an enum table for `value` (a plain int when out of range).
nanobind::object enum_member(const nanobind::tuple& table, int value);

}  // namespace tsb

// The in-process python backend: the functions the backend library
// (python_backend_shim.cc) forwards the core's entry points to. A model
// instance is a Python object made by tritonserver._python_models._runtime
// (it imports model.py and calls TritonPythonModel), kept as the
// instance's state; execute hands it the requests as BackendRequest
// objects (backend_request.h).
#pragma once

#include "python_backend_table.h"

namespace tsb {

// The table published as the capsule TSB_PYTHON_BACKEND_CAPSULE.
const PythonBackendTable* python_backend_table();

}  // namespace tsb

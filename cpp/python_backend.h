// The in-process python backend: the functions the backend library
// (python_backend_shim.cc) forwards the core's entry points to. A model
// instance is a Python object made by tritonserver._python_models._runtime
// (it imports model.py and calls TritonPythonModel), kept as the
// instance's state; execute hands it the requests as BackendRequest
// objects (backend_request.h).
#pragma once

#include <string>

#include "python_backend_table.h"

namespace tsb {

// Hands this extension's table to the backend library at `library` (the
// package's libtriton_python.so), loading it for good. "" when done, else
// why not. Needs the core loaded (the library takes TRITONSERVER_ErrorNew
// from it).
std::string attach_python_backend(const std::string& library);

}  // namespace tsb

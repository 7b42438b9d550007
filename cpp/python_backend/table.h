// The function table through which the in-process python backend library
// (shim.cc, installed as tritonserver/_backend/
// libtriton_python.so) forwards the core's backend entry points to this
// package's extension (python_backend.cc). The extension hands it to the
// library (tsb_python_backend_attach) when the package lays out a backend
// folder. Plain C types only: the shim and the extension are built
// separately.
#pragma once

#include <cstdint>

extern "C" {

struct TRITONSERVER_Error;
struct TRITONBACKEND_Backend;
struct TRITONBACKEND_Model;
struct TRITONBACKEND_ModelInstance;
struct TRITONBACKEND_Request;

// Bumped when a member changes: the shim refuses a table of another
// version (a wheel mixing files of two builds).
constexpr uint32_t kPythonBackendTableVersion = 5;

// Each function is called on the core's threads without the GIL (it takes
// the GIL itself, or, for instance_execute, hands the requests to the
// instance's worker thread) and never throws; a returned error is the
// core's to delete.
struct PythonBackendTable {
  uint32_t version;
  TRITONSERVER_Error* (*model_initialize)(TRITONBACKEND_Model*);
  TRITONSERVER_Error* (*instance_initialize)(TRITONBACKEND_ModelInstance*);
  TRITONSERVER_Error* (*instance_finalize)(TRITONBACKEND_ModelInstance*);
  TRITONSERVER_Error* (*instance_execute)(TRITONBACKEND_ModelInstance*,
                                          TRITONBACKEND_Request**, uint32_t);
};

}  // extern "C"

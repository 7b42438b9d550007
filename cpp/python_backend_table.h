// The function table through which the in-process python backend library
// (python_backend_shim.cc, installed as tritonserver/_backend/
// libtriton_python.so) forwards the core's backend entry points to this
// package's extension (python_backend.cc). The extension publishes it as
// the capsule tritonserver._native._python_backend_table. Plain C types
// only: the shim and the extension are built separately.
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
constexpr uint32_t kPythonBackendTableVersion = 3;
#define TSB_PYTHON_BACKEND_CAPSULE "tritonserver._native._python_backend_table"

// Each function is called with the GIL held (the shim takes it), but for
// instance_execute, and never throws; a returned error is the core's to
// delete.
struct PythonBackendTable {
  uint32_t version;
  TRITONSERVER_Error* (*model_initialize)(TRITONBACKEND_Model*);
  TRITONSERVER_Error* (*model_finalize)(TRITONBACKEND_Model*);
  TRITONSERVER_Error* (*instance_initialize)(TRITONBACKEND_ModelInstance*);
  TRITONSERVER_Error* (*instance_finalize)(TRITONBACKEND_ModelInstance*);
  // Without the GIL: it takes the GIL itself, or hands the requests to the
  // instance's worker thread (instance_worker.h).
  TRITONSERVER_Error* (*instance_execute)(TRITONBACKEND_ModelInstance*,
                                          TRITONBACKEND_Request**, uint32_t);
};

}  // extern "C"

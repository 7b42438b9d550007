// The in-process python backend library: the core loads it as
// <backend folder>/python/libtriton_python.so (the folder the package lays
// out, _api/_python_backend_layout.py) and calls its TRITONBACKEND_* entry points
// on its own threads. Each entry point it has forwards to the table of
// tritonserver._native (table.h), where the logic is, and
// which the extension hands to this library (tsb_python_backend_attach)
// before any server can load it. This library touches no Python: the
// table's functions take the GIL themselves (thread_state.h). It has no
// TRITONBACKEND_ModelFinalize: the core calls that one only where a backend
// has it, and a model holds nothing to free.
//
// It has no NEEDED entry on libpython, libtritonserver or CUDA:
// TRITONSERVER_ErrorNew resolves from the core (loaded RTLD_GLOBAL by the
// package). One file serves every Python >= 3.10.
#include "table.h"

extern "C" {
enum TRITONSERVER_Error_Code_ : int { kInternal = 1, kUnavailable = 4 };
TRITONSERVER_Error* TRITONSERVER_ErrorNew(int code, const char* message);
}

#define TSB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

const PythonBackendTable* table = nullptr;

TRITONSERVER_Error* check_table() {
  if (table != nullptr) return nullptr;
  return TRITONSERVER_ErrorNew(
      kUnavailable,
      "the in-process python backend of the tritonserver package runs only "
      "inside a Python process whose tritonserver package laid out this "
      "backend folder (a server of that package)");
}

}  // namespace

// Called by tritonserver._native (python_backend.cc) with its table. 0:
// taken; 1: a table of another version (files of two builds mixed).
TSB_EXPORT int tsb_python_backend_attach(const PythonBackendTable* given) {
  if (given == nullptr || given->version != kPythonBackendTableVersion) return 1;
  table = given;
  return 0;
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend*) {
  return check_table();
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  return nullptr;
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model* model) {
  if (TRITONSERVER_Error* err = check_table()) return err;
  return table->model_initialize(model);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return table->instance_initialize(instance);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return table->instance_finalize(instance);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t count) {
  return table->instance_execute(instance, requests, count);
}

// The in-process python backend library: the core loads it as
// <backend folder>/python/libtriton_python.so (the folder the package lays
// out, _api/_python_models.py) and calls its TRITONBACKEND_* entry points
// on its own threads. Each entry point forwards to the table of
// tritonserver._native (python_backend_table.h), where the logic is; all
// but execute take the GIL first (execute decides where the batch runs).
//
// It has no NEEDED entry on libpython, libtritonserver or CUDA: the Python
// symbols resolve from the interpreter that loaded the package, and
// TRITONSERVER_ErrorNew from the core (loaded RTLD_GLOBAL by the package).
// Limited API only (Py_LIMITED_API): one file serves every Python >= 3.10.
// The GIL is taken with tsb::ThreadGil (thread_state.h,
// compiled into this library too): a core thread keeps one Python thread
// state for its life, never a new one per call.
#include <Python.h>  // the limited API (Py_LIMITED_API: CMakeLists.txt)

#include "python_backend_table.h"
#include "thread_state.h"

extern "C" {
enum TRITONSERVER_Error_Code_ : int { kInternal = 1, kUnavailable = 4 };
TRITONSERVER_Error* TRITONSERVER_ErrorNew(int code, const char* message);
}

#define TSB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

const PythonBackendTable* table = nullptr;

// The extension's table, imported on first use (with the GIL held).
TRITONSERVER_Error* load_table() {
  if (table != nullptr) return nullptr;
  if (!Py_IsInitialized()) {
    return TRITONSERVER_ErrorNew(
        kUnavailable,
        "the in-process python backend of the tritonserver package runs only "
        "inside a Python process that imported tritonserver");
  }
  auto* found = static_cast<const PythonBackendTable*>(
      PyCapsule_Import(TSB_PYTHON_BACKEND_CAPSULE, 0));
  if (found == nullptr) {
    PyErr_Clear();
    return TRITONSERVER_ErrorNew(
        kInternal,
        "the in-process python backend could not import "
        TSB_PYTHON_BACKEND_CAPSULE " (is this libtriton_python.so from the "
        "same tritonserver install as the running package?)");
  }
  if (found->version != kPythonBackendTableVersion) {
    return TRITONSERVER_ErrorNew(
        kInternal,
        "the in-process python backend library and tritonserver._native come "
        "from different builds of the tritonserver package: reinstall it");
  }
  table = found;
  return nullptr;
}

// Python can no longer be entered from the core's threads (the program is
// exiting: CPython would end a thread that takes the GIL now).
TRITONSERVER_Error* exiting() {
  return TRITONSERVER_ErrorNew(
      kUnavailable,
      "the in-process python backend cannot run python models: the Python "
      "program is exiting");
}

}  // namespace

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(
    TRITONBACKEND_Backend*) {
  if (!tsb::python_usable()) return exiting();
  tsb::ThreadGil gil;
  return load_table();
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  return nullptr;
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model* model) {
  if (!tsb::python_usable()) return exiting();
  tsb::ThreadGil gil;
  if (TRITONSERVER_Error* err = load_table()) return err;
  return table->model_initialize(model);
}

// The finalizers leave what they would free to the process's end when
// Python can no longer be entered.
TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(
    TRITONBACKEND_Model* model) {
  if (!tsb::python_usable()) return nullptr;
  tsb::ThreadGil gil;
  return table->model_finalize(model);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  if (!tsb::python_usable()) return exiting();
  tsb::ThreadGil gil;
  return table->instance_initialize(instance);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  if (!tsb::python_usable()) return nullptr;
  tsb::ThreadGil gil;
  return table->instance_finalize(instance);
}

TSB_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t count) {
  return table->instance_execute(instance, requests, count);  // no GIL
}

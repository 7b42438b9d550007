#include "errors.h"

#include <Python.h>

#include "triton_library.h"

namespace tsb {
namespace {

// The error classes indexed by code (a tuple); never freed (no Python
// after teardown). Null while they cannot be imported.
PyObject* error_classes() {
  static PyObject* classes = nullptr;
  if (classes == nullptr) {
    PyObject* module = PyImport_ImportModule("tritonserver._api._errors");
    PyObject* table = module ? PyObject_GetAttrString(module, "_BY_CODE") : nullptr;
    classes = table ? PySequence_Tuple(table) : nullptr;
    Py_XDECREF(table);
    Py_XDECREF(module);
    if (classes == nullptr) PyErr_Clear();
  }
  return classes;
}

}  // namespace

void translate_exception(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const TritonException& e) {
    PyObject* classes = error_classes();
    const auto code = static_cast<Py_ssize_t>(e.code());
    PyObject* cls = classes != nullptr && code >= 0 && code < PyTuple_Size(classes)
                        ? PyTuple_GetItem(classes, code)
                        : PyExc_RuntimeError;
    PyErr_SetString(cls, e.what());
  }
}

void check(TRITONSERVER_Error* err, const char* context) {
  if (err == nullptr) return;
  const TritonApi& api = triton();
  TRITONSERVER_Error_Code code = api.ErrorCode(err);
  std::string message = api.ErrorMessage(err);
  api.ErrorDelete(err);
  if (context != nullptr) message = std::string(context) + ": " + message;
  throw TritonException(code, message);
}

TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code,
                               const char* message) noexcept {
  return triton().ErrorNew(code, message);
}

}  // namespace tsb

// translate_exception() (errors.h): a TritonException raised as the
// tritonserver.*Error class of its code. Kept apart from errors.cc, which
// has no Python in it (the C API floor benchmark links that one).
#include <Python.h>

#include "errors.h"

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

}  // namespace tsb

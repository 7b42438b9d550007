// translate_exception() (errors.h): a TritonException raised as the
// tritonserver.*Error class of its code; set_error_from_current_exception()
// for the raw type slots, which nanobind does not wrap. Kept apart from
// errors.cc, which has no Python in it (the C API floor benchmark links
// that one).
#include <Python.h>
#include <cxxabi.h>
#include <nanobind/nanobind.h>

#include <new>

#include "api_types.h"
#include "errors.h"
#include "thread_state.h"

namespace nb = nanobind;

namespace tsb {
void translate_exception(const std::exception_ptr& exception, void*) {
  try {
    std::rethrow_exception(exception);
  } catch (const TritonException& e) {
    PyObject* classes = nullptr;
    try {
      classes = api_types().error_classes.ptr();
    } catch (nb::python_error&) {  // the API cannot be imported: RuntimeError
    }
    const auto code = static_cast<Py_ssize_t>(e.code());
    PyObject* cls = classes != nullptr && code >= 0 && code < PyTuple_Size(classes)
                        ? PyTuple_GetItem(classes, code)
                        : PyExc_RuntimeError;
    PyErr_SetString(cls, e.what());
  }
}

void set_error_from_current_exception() noexcept {
  try {
    throw;
  } catch (abi::__forced_unwind&) {
    // Finalization ended this thread inside Python a type slot called: not
    // an error to raise, and never to swallow (thread_state.h).
    park_forever();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const TritonException&) {
    translate_exception(std::current_exception(), nullptr);
  } catch (const nb::builtin_exception& e) {
    // What nanobind would raise for it.
    PyObject* type = PyExc_RuntimeError;
    switch (e.type()) {
      case nb::exception_type::value_error: type = PyExc_ValueError; break;
      case nb::exception_type::type_error: type = PyExc_TypeError; break;
      case nb::exception_type::index_error: type = PyExc_IndexError; break;
      case nb::exception_type::key_error: type = PyExc_KeyError; break;
      case nb::exception_type::buffer_error: type = PyExc_BufferError; break;
      default: break;
    }
    PyErr_SetString(type, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

}  // namespace tsb

// Type slots shared by the native classes that nanobind binds with
// nb::type_slots: garbage-collector support and "return self" for
// __iter__ / __await__.
#pragma once

#include <nanobind/nanobind.h>

namespace tsb {

// tp_traverse for a class T with `int traverse(visitproc, void*)`.
template <typename T>
int traverse_slot(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nanobind::inst_ready(self)) return 0;
  return nanobind::inst_ptr<T>(self)->traverse(visit, arg);
}

// tp_clear for a class T with `void clear() noexcept`.
template <typename T>
int clear_slot(PyObject* self) {
  if (nanobind::inst_ready(self)) nanobind::inst_ptr<T>(self)->clear();
  return 0;
}

inline PyObject* self_slot(PyObject* self) { return Py_NewRef(self); }

}  // namespace tsb

#include "numpy_views.h"

#include <nanobind/stl/string.h>

#include <string>

namespace nb = nanobind;

namespace tsb {
namespace {

// Slots of NumPy's C-API table (numpy/_core/code_generators/numpy_api.py)
// and the constants of ndarraytypes.h this file needs.
constexpr int kArrayTypeSlot = 2;          // PyArray_Type
constexpr int kDescrFromTypeSlot = 45;     // PyArray_DescrFromType
constexpr int kNewFromDescrSlot = 94;      // PyArray_NewFromDescr
constexpr int kSetBaseObjectSlot = 282;    // PyArray_SetBaseObject
constexpr int kCContiguous = 0x0001;       // NPY_ARRAY_C_CONTIGUOUS
constexpr int kAligned = 0x0100;           // NPY_ARRAY_ALIGNED

using DescrFromType = PyObject* (*)(int);
using NewFromDescr = PyObject* (*)(PyTypeObject*, PyObject*, int, Py_ssize_t*,
                                   Py_ssize_t*, void*, int, PyObject*);
using SetBaseObject = int (*)(PyObject*, PyObject*);

struct Api {
  PyTypeObject* array_type;
  DescrFromType descr_from_type;
  NewFromDescr new_from_descr;
  SetBaseObject set_base_object;
};

// The table of the NumPy that is imported (2.x moved it to numpy._core),
// fetched at its first use. Not a function-local static: its set-up runs
// Python (the imports), which can let the GIL go,
// and a second thread waiting on a static's guard while holding the GIL
// would then keep the first from ever taking it back (a deadlock seen on
// the first concurrent requests). Set under the GIL: two threads may both
// build it; the first stored wins, and a failed import is tried again.
const Api* g_api = nullptr;

const Api& api() {
  if (g_api != nullptr) return *g_api;
  // The C module itself, which `import numpy` initialized: on NumPy 1.x
  // numpy._core._multiarray_umath is a Python shim imported on first use,
  // which a second thread could see half-made (no _ARRAY_API yet: a first
  // request failed so, once in 50 processes of concurrent first requests).
  nb::object numpy = nb::module_::import_("numpy");
  const bool numpy1 =
      nb::cast<std::string>(numpy.attr("__version__")).rfind("1.", 0) == 0;
  nb::object module = nb::module_::import_(
      numpy1 ? "numpy.core._multiarray_umath" : "numpy._core._multiarray_umath");
  nb::object capsule = module.attr("_ARRAY_API");
  void** slots =
      static_cast<void**>(PyCapsule_GetPointer(capsule.ptr(), nullptr));
  if (slots == nullptr) throw nb::python_error();
  if (g_api == nullptr) {  // never freed: used until the process ends
    g_api = new Api{static_cast<PyTypeObject*>(slots[kArrayTypeSlot]),
                    reinterpret_cast<DescrFromType>(slots[kDescrFromTypeSlot]),
                    reinterpret_cast<NewFromDescr>(slots[kNewFromDescrSlot]),
                    reinterpret_cast<SetBaseObject>(slots[kSetBaseObjectSlot])};
  }
  return *g_api;
}

// The dimensions as NumPy takes them.
struct Dims {
  Py_ssize_t values[32];
  Dims(size_t ndim, const size_t* shape) {
    if (ndim > 32) throw nb::value_error("more than 32 dimensions");
    for (size_t i = 0; i < ndim; ++i) {
      values[i] = static_cast<Py_ssize_t>(shape[i]);
    }
  }
};

PyObject* descr_of(const Api& numpy, const ElementType& type) {
  if (type.numpy_number < 0) throw nb::type_error("no NumPy type for this Triton type");
  PyObject* descr = numpy.descr_from_type(type.numpy_number);
  if (descr == nullptr) throw nb::python_error();
  return descr;
}

}  // namespace

nb::object numpy_array(size_t ndim, const size_t* shape,
                       const ElementType& type, uint8_t** data) {
  const Api& numpy = api();
  Dims dims(ndim, shape);
  // Steals the descriptor; no data: NumPy allocates (writable, C order).
  PyObject* array = numpy.new_from_descr(numpy.array_type, descr_of(numpy, type),
                                         static_cast<int>(ndim), dims.values,
                                         nullptr, nullptr, 0, nullptr);
  if (array == nullptr) throw nb::python_error();
  // PyArray_DATA: the field after the object header (PyArrayObject_fields,
  // the same in NumPy 1.x and 2.x).
  *data = *reinterpret_cast<uint8_t**>(reinterpret_cast<char*>(array) +
                                       sizeof(PyObject));
  return nb::steal(array);
}

nb::object numpy_view(const void* data, size_t ndim, const size_t* shape,
                      const ElementType& type, nb::handle owner) {
  const Api& numpy = api();
  Dims dims(ndim, shape);
  // Empty arrays too get a pointer of ours: with none NumPy would
  // allocate (and make the array writeable).
  static const uint64_t empty = 0;
  if (data == nullptr) data = &empty;
  const size_t item = static_cast<size_t>(type.bits) / 8;
  const bool aligned = reinterpret_cast<uintptr_t>(data) % item == 0;
  PyObject* descr = descr_of(numpy, type);
  // Steals `descr`; no WRITEABLE flag: read-only.
  PyObject* array = numpy.new_from_descr(
      numpy.array_type, descr, static_cast<int>(ndim), dims.values, nullptr,
      const_cast<void*>(data), kCContiguous | (aligned ? kAligned : 0),
      nullptr);
  if (array == nullptr) throw nb::python_error();
  nb::object result = nb::steal(array);
  // Steals the reference given to the owner, also on failure.
  if (numpy.set_base_object(array, nb::borrow(owner).release().ptr()) != 0) {
    throw nb::python_error();
  }
  return result;
}

}  // namespace tsb

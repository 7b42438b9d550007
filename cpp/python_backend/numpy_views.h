// Read-only NumPy arrays over memory we hold (and new arrays NumPy owns), made with NumPy's own C API:
// its function table, the `_ARRAY_API` capsule of the NumPy module in use
// (1.x or 2.x), fetched at run time (the build has no NumPy headers). One
// call instead of a buffer-protocol round trip through numpy.asarray; the
// table's slots used here are the same in NumPy 1.x and 2.x.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <cstdint>

#include "../element_types.h"

namespace tsb {

// A C-contiguous, read-only array of `type` (its NumPy type) and `shape` over `data`,
// keeping `owner` alive as its base. Needs the GIL. Throws nb::python_error
// (NumPy's) on failure.
nanobind::object numpy_view(const void* data, size_t ndim, const size_t* shape,
                            const ElementType& type,
                            nanobind::handle owner);

// A new C-contiguous, writable array of `type` (its NumPy type) and `shape` whose memory
// NumPy owns; `*data` is set to its first byte. Needs the GIL.
nanobind::object numpy_array(size_t ndim, const size_t* shape,
                             const ElementType& type, uint8_t** data);

}  // namespace tsb

// The one element-type table of the native layer: for each fixed-size
// TRITONSERVER_DataType, its NumPy kind ('b' bool, 'u' unsigned, 'i'
// signed, 'f' float; 0 for BF16, which NumPy lacks), its bits, and its
// NumPy type number (NPY_TYPES; 64-bit integers as NPY_LONG, numpy's own
// int64/uint64 on LP64 Linux). The Python twin is
// tritonserver/_api/_datautils.py's ELEMENT_TYPES. Used by request.cc (the
// type of a client's buffer) and the backend wing (numpy_views.cc, the
// arrays of a python model's inputs). BYTES has no fixed-size element.
#pragma once

#include <cstddef>

#include "triton_api.h"

namespace tsb {

struct ElementType {
  TRITONSERVER_DataType type;
  char numpy_kind;
  int bits;
  int numpy_number;  // -1: none
};

inline constexpr ElementType kElementTypes[] = {
    {TRITONSERVER_TYPE_BOOL, 'b', 8, 0},   {TRITONSERVER_TYPE_UINT8, 'u', 8, 2},
    {TRITONSERVER_TYPE_UINT16, 'u', 16, 4}, {TRITONSERVER_TYPE_UINT32, 'u', 32, 6},
    {TRITONSERVER_TYPE_UINT64, 'u', 64, 8}, {TRITONSERVER_TYPE_INT8, 'i', 8, 1},
    {TRITONSERVER_TYPE_INT16, 'i', 16, 3},  {TRITONSERVER_TYPE_INT32, 'i', 32, 5},
    {TRITONSERVER_TYPE_INT64, 'i', 64, 7},  {TRITONSERVER_TYPE_FP16, 'f', 16, 23},
    {TRITONSERVER_TYPE_FP32, 'f', 32, 11},  {TRITONSERVER_TYPE_FP64, 'f', 64, 12},
    {TRITONSERVER_TYPE_BF16, 0, 16, -1},
};
static_assert(sizeof(long) == 8, "NPY_LONG is 64-bit here");

// The entry of `type`, or null (BYTES, INVALID).
inline const ElementType* element_type(TRITONSERVER_DataType type) {
  for (const ElementType& entry : kElementTypes) {
    if (entry.type == type) return &entry;
  }
  return nullptr;
}

// The type of NumPy kind `kind` with elements of `bytes` bytes, or INVALID.
inline TRITONSERVER_DataType element_type_of(char kind, size_t bytes) {
  if (kind == 0) return TRITONSERVER_TYPE_INVALID;
  for (const ElementType& entry : kElementTypes) {
    if (entry.numpy_kind == kind && static_cast<size_t>(entry.bits) == bytes * 8) {
      return entry.type;
    }
  }
  return TRITONSERVER_TYPE_INVALID;
}

}  // namespace tsb

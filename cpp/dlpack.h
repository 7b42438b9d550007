// DLPack in both directions, with our own declarations of the DLPack ABI:
// export of any (owner, pointer, shape, dtype, device) as a legacy or
// versioned capsule, and import of anything that speaks DLPack (through
// nanobind's ndarray, which handles both capsule kinds).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <vector>

#include "allocator.h"

namespace tsb {

enum DLDeviceTypeCode : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLCUDAManaged = 13,
};

// Returns a "dltensor" (or "dltensor_versioned") capsule describing
// contiguous memory at `data`. The capsule holds `owner` until the
// consumer's deleter runs: a Buffer (our output) as its native reference,
// anything else as a Python reference; the deleter never takes the GIL. Raises ValueError, exporting nothing,
// when the shape does not fit in the `nbytes` bytes at `data` or `data` is
// null (a consumer would read past the buffer, or at address 0).
nanobind::object export_dlpack(nanobind::handle owner, uintptr_t data,
                               size_t nbytes,
                               const std::vector<int64_t>& shape,
                               uint8_t code, uint8_t bits,
                               int32_t device_type, int32_t device_id,
                               bool versioned);

// (device type, device id) of a "dltensor" or "dltensor_versioned"
// capsule, read without consuming it; TypeError for anything else.
nanobind::tuple dlpack_capsule_device(nanobind::handle capsule);

// A foreign array imported through DLPack (or the buffer protocol).
class DLPackView {
 public:
  explicit DLPackView(nanobind::ndarray<nanobind::ro> array)
      : array_(std::move(array)) {}
  uintptr_t data_ptr() const;
  std::vector<int64_t> shape() const;
  uint8_t dtype_code() const { return array_.dtype().code; }
  uint8_t dtype_bits() const { return array_.dtype().bits; }
  int32_t device_type() const { return array_.device_type(); }
  int32_t device_id() const { return array_.device_id(); }
  size_t nbytes() const;
  bool c_contiguous() const;
  // A C-ordered copy in a host buffer of ours (CPU arrays only).
  BufferRef contiguous_copy() const;

 private:
  nanobind::ndarray<nanobind::ro> array_;
};

}  // namespace tsb

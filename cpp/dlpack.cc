#include "dlpack.h"

#include <Python.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "deferred_release.h"
#include "errors.h"
#include "response_view.h"
#include "thread_state.h"

namespace nb = nanobind;

namespace tsb {
namespace {

// The DLPack ABI (dlpack.h v1.x), declared here.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

// One heap block owns everything an export needs; the deleter frees it.
// The memory's owner is held once: our own output buffer as a native
// reference (freed without Python), any other owner as a Python reference.
struct Export {
  BufferRef buffer;
  PyObject* owner = nullptr;
  std::vector<int64_t> shape;  // copied: later shape changes do not leak in
  std::vector<int64_t> strides;  // C order, in elements (DLPack 1.2 wants them)
  DLManagedTensor legacy;
  DLManagedTensorVersioned versioned;
};

// Consumers may call the deleter from any thread, with or without the GIL,
// even at shutdown: it never takes the GIL.
void release(Export* e) noexcept {
  const bool gil = holds_gil();
  if (e->owner != nullptr) {
    if (gil) {
      Py_DECREF(e->owner);
    } else {
      std::vector<nb::object> owner;
      owner.push_back(nb::steal(e->owner));
      defer_release(std::move(owner));
    }
  }
  // The last reference to GPU or pinned memory frees it with cudaFree /
  // cudaFreeHost, which may wait for the device: not with the GIL held.
  if (gil && e->buffer && e->buffer->memory_type != TRITONSERVER_MEMORY_CPU) {
    PyThreadState* saved = PyEval_SaveThread();
    delete e;
    restore_thread(saved);
    return;
  }
  delete e;
}

void legacy_deleter(DLManagedTensor* t) noexcept {
  release(static_cast<Export*>(t->manager_ctx));
}

void versioned_deleter(DLManagedTensorVersioned* t) noexcept {
  release(static_cast<Export*>(t->manager_ctx));
}

// Only an unconsumed capsule still carries its name (a consumer renames it
// "used_dltensor..."): then the export is still ours to release.
//
// A consumer that refuses the capsule (NumPy for a BF16 tensor) drops it
// with its own exception set: that exception is saved first and restored
// last, so that it reaches the caller, and the release runs with no
// exception pending. Only what the destructor's own calls raise is
// cleared. (PyErr_Fetch/PyErr_Restore: in the limited API of every
// supported Python.)
void capsule_destructor(PyObject* capsule) noexcept {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  const char* name = PyCapsule_GetName(capsule);
  if (name != nullptr && (std::strcmp(name, "dltensor") == 0 ||
                          std::strcmp(name, "dltensor_versioned") == 0)) {
    if (void* e = PyCapsule_GetContext(capsule)) {
      release(static_cast<Export*>(e));
    }
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
}

}  // namespace

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// Bytes the shape needs at `bits` per element; ValueError for a negative
// dimension or a size past 2^64.
uint64_t required_bytes(const std::vector<int64_t>& shape, uint8_t bits) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw nb::value_error(("cannot export a tensor of shape " +
                             shape_text(shape) + ": negative dimension")
                                .c_str());
    }
    const auto n = static_cast<uint64_t>(d);
    if (n != 0 && elements > kMax / n) {
      elements = kMax;  // only the comparison below matters
      break;
    }
    elements *= n;
  }
  const uint64_t item = (static_cast<uint64_t>(bits) + 7) / 8;
  return elements > kMax / item ? kMax : elements * item;
}

}  // namespace

nb::object export_dlpack(nb::handle owner, uintptr_t data, size_t nbytes,
                         const std::vector<int64_t>& shape, uint8_t code,
                         uint8_t bits, int32_t device_type, int32_t device_id,
                         bool versioned) {
  const uint64_t needed = required_bytes(shape, bits);
  if (needed > nbytes) {
    throw nb::value_error(
        ("cannot export a tensor of shape " + shape_text(shape) + " with " +
         std::to_string(bits) + "-bit elements: it needs " +
         (needed == std::numeric_limits<uint64_t>::max()
              ? std::string("more than 2^64")
              : std::to_string(needed)) +
         " bytes, its buffer holds " + std::to_string(nbytes) +
         " (were the Tensor's shape or data_type changed?)")
            .c_str());
  }
  if (data == 0 && needed > 0) {
    throw nb::value_error(
        ("cannot export a tensor of shape " + shape_text(shape) +
         ": its data pointer is null")
            .c_str());
  }
  auto* e = new Export();
  if (nb::isinstance<BufferHandle>(owner)) {
    e->buffer = nb::cast<const BufferHandle&>(owner).ref;
  } else {
    e->owner = owner.ptr();
    Py_INCREF(e->owner);
  }
  e->shape = shape;
  e->strides.assign(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) {
    e->strides[i - 1] = e->strides[i] * std::max<int64_t>(shape[i], 1);
  }
  DLTensor t{};
  t.data = reinterpret_cast<void*>(data);
  t.device = DLDevice{device_type, device_id};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = DLDataType{code, bits, 1};
  t.shape = e->shape.data();
  // Explicit C-order strides: DLPack 1.2 no longer allows NULL for a
  // tensor of rank > 0 (consumers may read them unconditionally).
  t.strides = e->strides.empty() ? nullptr : e->strides.data();
  t.byte_offset = 0;
  PyObject* capsule;
  if (versioned) {
    e->versioned.version = DLPackVersion{1, 0};
    e->versioned.manager_ctx = e;
    e->versioned.deleter = versioned_deleter;
    e->versioned.flags = 0;
    e->versioned.dl_tensor = t;
    capsule = PyCapsule_New(&e->versioned, "dltensor_versioned",
                            capsule_destructor);
  } else {
    e->legacy.dl_tensor = t;
    e->legacy.manager_ctx = e;
    e->legacy.deleter = legacy_deleter;
    capsule = PyCapsule_New(&e->legacy, "dltensor", capsule_destructor);
  }
  if (capsule == nullptr || PyCapsule_SetContext(capsule, e) != 0) {
    Py_XDECREF(capsule);  // its destructor finds no context: nothing freed
    release(e);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

nb::tuple dlpack_capsule_device(nb::handle capsule) {
  const DLTensor* tensor = nullptr;
  if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    tensor = &static_cast<DLManagedTensor*>(
                  PyCapsule_GetPointer(capsule.ptr(), "dltensor"))
                  ->dl_tensor;
  } else if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    tensor = &static_cast<DLManagedTensorVersioned*>(
                  PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"))
                  ->dl_tensor;
  } else {
    throw nb::type_error(
        "expected a DLPack capsule (\"dltensor\" or \"dltensor_versioned\", "
        "not consumed yet) or an object with __dlpack__");
  }
  return nb::make_tuple(tensor->device.device_type, tensor->device.device_id);
}

uintptr_t DLPackView::data_ptr() const {
  return reinterpret_cast<uintptr_t>(array_.data());
}

std::vector<int64_t> DLPackView::shape() const {
  std::vector<int64_t> out(array_.ndim());
  for (size_t i = 0; i < array_.ndim(); ++i) out[i] = array_.shape(i);
  return out;
}

size_t DLPackView::nbytes() const { return array_.nbytes(); }

bool DLPackView::c_contiguous() const {
  int64_t expected = 1;
  for (size_t i = array_.ndim(); i-- > 0;) {
    if (array_.shape(i) == 0) return true;  // empty: nothing to lay out
    if (array_.shape(i) != 1 && array_.stride(i) != expected) return false;
    expected *= array_.shape(i);
  }
  return true;
}

BufferRef DLPackView::contiguous_copy() const {
  if (array_.device_type() != kDLCPU && array_.device_type() != kDLCUDAHost) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "non-contiguous device arrays are not supported: make the array "
          "contiguous first (e.g. .contiguous() / cupy.ascontiguousarray)");
  }
  const size_t item = array_.itemsize();
  BufferRef out =
      BufferRef::adopt(buffer_allocate(nbytes(), TRITONSERVER_MEMORY_CPU, 0));
  auto* dst = static_cast<uint8_t*>(out->data);
  const auto* src = static_cast<const uint8_t*>(array_.data());
  const size_t ndim = array_.ndim();
  if (nbytes() == 0) return out;
  // Walk the source in C order; strides may be negative.
  std::function<void(size_t, const uint8_t*)> walk = [&](size_t dim,
                                                          const uint8_t* p) {
    const int64_t step = array_.stride(dim) * static_cast<int64_t>(item);
    for (size_t i = 0; i < array_.shape(dim); ++i) {
      const uint8_t* q = p + static_cast<int64_t>(i) * step;
      if (dim + 1 == ndim) {
        std::memcpy(dst, q, item);
        dst += item;
      } else {
        walk(dim + 1, q);
      }
    }
  };
  walk(0, src);
  return out;
}

}  // namespace tsb

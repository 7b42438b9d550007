// The process-wide response allocator and the ownership of output buffers.
//
// Every buffer handed to Triton is a reference-counted OutputBuffer record.
// Triton holds one reference until it releases the buffer (when the response
// is deleted); each Python owner of the output takes another, so outputs
// outlive their response without a copy and are freed when the last
// reference goes, on whatever thread that is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "triton_api.h"

namespace tsb {

struct OutputBuffer {
  void* data = nullptr;
  size_t size = 0;
  size_t capacity = 0;  // of the host block behind `data` (CPU memory)
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  std::atomic<int> refs{1};
};

// Allocates `size` bytes of the given kind with one reference held by the
// caller. Throws TritonException (UNSUPPORTED without CUDA for GPU/pinned,
// INTERNAL when the allocation itself fails).
OutputBuffer* buffer_allocate(size_t size, TRITONSERVER_MemoryType type,
                              int64_t type_id);
void buffer_ref(OutputBuffer* buffer) noexcept;
void buffer_unref(OutputBuffer* buffer) noexcept;

// RAII reference to an OutputBuffer.
class BufferRef {
 public:
  BufferRef() = default;
  // Adopts one existing reference.
  static BufferRef adopt(OutputBuffer* b) {
    BufferRef r;
    r.buffer_ = b;
    return r;
  }
  // Takes a new reference.
  static BufferRef share(OutputBuffer* b) {
    buffer_ref(b);
    return adopt(b);
  }
  BufferRef(const BufferRef& o) : buffer_(o.buffer_) {
    if (buffer_) buffer_ref(buffer_);
  }
  BufferRef(BufferRef&& o) noexcept : buffer_(o.buffer_) { o.buffer_ = nullptr; }
  BufferRef& operator=(BufferRef o) noexcept {
    std::swap(buffer_, o.buffer_);
    return *this;
  }
  ~BufferRef() {
    if (buffer_) buffer_unref(buffer_);
  }
  OutputBuffer* get() const noexcept { return buffer_; }
  OutputBuffer* operator->() const noexcept { return buffer_; }
  explicit operator bool() const noexcept { return buffer_ != nullptr; }

 private:
  OutputBuffer* buffer_ = nullptr;
};

// A new buffer of the given kind holding a copy of `size` bytes at `src`
// (which lives in memory of `src_type`). Device copies use cudaMemcpy.
BufferRef buffer_copy(const void* src, size_t size,
                      TRITONSERVER_MemoryType src_type,
                      TRITONSERVER_MemoryType type, int64_t type_id);

// What a request asks of the allocator; the response allocator's user
// pointer for that request.
// Default (no preference given): CPU, as the official binding does.
struct AllocationPolicy {
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
};

// Resolves the memory a request will get: pinned becomes CPU where CUDA is
// absent; GPU without CUDA throws UNSUPPORTED (before anything is queued).
AllocationPolicy make_policy(TRITONSERVER_MemoryType type, int64_t type_id);

// The one process-wide TRITONSERVER_ResponseAllocator (created on first
// use, after the core is loaded; never deleted: it must outlive every
// in-flight request, whatever the shutdown order).
TRITONSERVER_ResponseAllocator* response_allocator();

#ifdef TRITONSERVER_TESTING
// The live-buffer registry, for leak and zero-copy tests (test build only).
size_t live_buffer_count() noexcept;
std::vector<uintptr_t> live_buffer_addresses();
#endif

}  // namespace tsb

#include "allocator.h"

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include "cuda_runtime.h"
#include "errors.h"
#include "host_pool.h"
#include "triton_library.h"

namespace tsb {
namespace {

constexpr unsigned int kCudaHostAllocPortable = 1;

#ifdef TRITONSERVER_TESTING
// The live-buffer registry of the test build: a global mutex taken per
// buffer on Triton's threads, which a normal build does without.
std::mutex g_registry_mutex;
std::unordered_set<const OutputBuffer*> g_live;

void register_buffer(const OutputBuffer* b) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_live.insert(b);
}

void unregister_buffer(const OutputBuffer* b) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_live.erase(b);
}
#else
void register_buffer(const OutputBuffer*) noexcept {}
void unregister_buffer(const OutputBuffer*) noexcept {}
#endif

void free_memory(OutputBuffer* b) noexcept {
  if (b->data == nullptr) return;
  switch (b->memory_type) {
    case TRITONSERVER_MEMORY_CPU:
      host_free(b->data, b->capacity);
      break;
    case TRITONSERVER_MEMORY_CPU_PINNED:
      if (const CudaRuntime* rt = cuda()) rt->FreeHost(b->data);
      break;
    case TRITONSERVER_MEMORY_GPU:
      if (const CudaRuntime* rt = cuda()) {
        ScopedDevice device(static_cast<int>(b->memory_type_id));
        rt->Free(b->data);
      }
      break;
  }
}

TRITONSERVER_Error* alloc_fn(TRITONSERVER_ResponseAllocator*, const char*,
                             size_t byte_size, TRITONSERVER_MemoryType,
                             int64_t, void* userp, void** buffer,
                             void** buffer_userp,
                             TRITONSERVER_MemoryType* actual_type,
                             int64_t* actual_type_id) noexcept {
  AllocationPolicy policy;
  if (userp != nullptr) policy = *static_cast<const AllocationPolicy*>(userp);
  if (byte_size == 0) {
    // Triton does not release null buffers: hand out no record at all (the
    // response reader makes an empty one that the output owns).
    *buffer = nullptr;
    *buffer_userp = nullptr;
    *actual_type = policy.memory_type;
    *actual_type_id = policy.memory_type_id;
    return nullptr;
  }
  try {
    OutputBuffer* b = buffer_allocate(byte_size, policy.memory_type,
                                      policy.memory_type_id);
    *buffer = b->data;
    *buffer_userp = b;
    *actual_type = b->memory_type;
    *actual_type_id = b->memory_type_id;
    return nullptr;
  } catch (const TritonException& e) {
    return make_error(e.code(), e.what());
  } catch (const std::exception& e) {
    return make_error(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return make_error(TRITONSERVER_ERROR_INTERNAL, "allocation failed");
  }
}

TRITONSERVER_Error* release_fn(TRITONSERVER_ResponseAllocator*, void*,
                               void* buffer_userp, size_t,
                               TRITONSERVER_MemoryType, int64_t) noexcept {
  if (buffer_userp != nullptr) {
    buffer_unref(static_cast<OutputBuffer*>(buffer_userp));
  }
  return nullptr;
}

TRITONSERVER_Error* query_fn(TRITONSERVER_ResponseAllocator*, void* userp,
                             const char*, size_t*,
                             TRITONSERVER_MemoryType* memory_type,
                             int64_t* memory_type_id) noexcept {
  AllocationPolicy policy;
  if (userp != nullptr) policy = *static_cast<const AllocationPolicy*>(userp);
  *memory_type = policy.memory_type;
  *memory_type_id = policy.memory_type_id;
  return nullptr;
}

// A GPU id the process has (cudaSetDevice with any other would leave the
// current device in place: the memory would land there, labelled wrongly).
void check_gpu_id(int64_t type_id) {
  if (type_id < 0 || type_id >= cuda_device_count()) {
    raise(TRITONSERVER_ERROR_INVALID_ARG,
          "GPU id " + std::to_string(type_id) + " is out of range: " +
              std::to_string(cuda_device_count()) + " device(s) present");
  }
}

const char* memory_name(TRITONSERVER_MemoryType type) {
  switch (type) {
    case TRITONSERVER_MEMORY_CPU:
      return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED:
      return "pinned";
    case TRITONSERVER_MEMORY_GPU:
      return "GPU";
  }
  return "unknown memory";
}

}  // namespace

OutputBuffer* buffer_allocate(size_t size, TRITONSERVER_MemoryType type,
                              int64_t type_id) {
  if (type == TRITONSERVER_MEMORY_GPU && size > 0 && cuda() != nullptr) {
    check_gpu_id(type_id);
  }
  auto* b = new OutputBuffer();
  b->size = size;
  b->memory_type = type;
  b->memory_type_id = type_id;
  if (size > 0) {
    const CudaRuntime* rt = cuda();
    int err = kCudaSuccess;
    switch (type) {
      case TRITONSERVER_MEMORY_CPU:
        b->data = host_alloc(size, &b->capacity);
        break;
      case TRITONSERVER_MEMORY_CPU_PINNED:
        if (rt == nullptr) {
          // No CUDA: pinned memory is ordinary host memory, reported so.
          b->memory_type = TRITONSERVER_MEMORY_CPU;
          b->memory_type_id = 0;
          b->data = host_alloc(size, &b->capacity);
        } else {
          err = rt->HostAlloc(&b->data, size, kCudaHostAllocPortable);
        }
        break;
      case TRITONSERVER_MEMORY_GPU:
        if (rt == nullptr) {
          delete b;
          raise(TRITONSERVER_ERROR_UNSUPPORTED,
                "GPU memory requested but CUDA is not available (" +
                    cuda_status() + ")");
        } else {
          ScopedDevice device(static_cast<int>(type_id));
          err = rt->Malloc(&b->data, size);
        }
        break;
    }
    if (err != kCudaSuccess || b->data == nullptr) {
      std::string why = err != kCudaSuccess ? cuda_error_string(err)
                                            : std::string("out of memory");
      // The failed cudaMalloc / cudaHostAlloc left its error as the
      // runtime's last error: cleared, or the core's next cudaGetLastError
      // (same runtime when it is the core's copy) reports it as its own.
      if (err != kCudaSuccess) cuda_clear_last_error();
      delete b;
      raise(TRITONSERVER_ERROR_INTERNAL,
            "failed to allocate " + std::to_string(size) + " bytes: " + why);
    }
  }
  register_buffer(b);
  return b;
}

BufferRef buffer_copy(const void* src, size_t size,
                      TRITONSERVER_MemoryType src_type,
                      TRITONSERVER_MemoryType type, int64_t type_id) {
  BufferRef b = BufferRef::adopt(buffer_allocate(size, type, type_id));
  if (size == 0) return b;
  if (src_type != TRITONSERVER_MEMORY_GPU &&
      b->memory_type != TRITONSERVER_MEMORY_GPU) {
    std::memcpy(b->data, src, size);
    return b;
  }
  const CudaRuntime* rt = cuda();
  if (rt == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          "copying between host and GPU memory needs CUDA (" + cuda_status() +
              ")");
  }
  const int err = rt->Memcpy(b->data, src, size, kCudaMemcpyDefault);
  if (err != kCudaSuccess) {
    cuda_clear_last_error();
    raise(TRITONSERVER_ERROR_INTERNAL,
          "cudaMemcpy of " + std::to_string(size) + " bytes (" +
              memory_name(src_type) + " to " + memory_name(b->memory_type) +
              ") failed: " + cuda_error_string(err));
  }
  return b;
}

void buffer_ref(OutputBuffer* b) noexcept {
  b->refs.fetch_add(1, std::memory_order_relaxed);
}

void buffer_unref(OutputBuffer* b) noexcept {
  if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    unregister_buffer(b);
    free_memory(b);
    delete b;
  }
}

AllocationPolicy make_policy(TRITONSERVER_MemoryType type, int64_t type_id) {
  AllocationPolicy policy;
  policy.memory_type = type;
  policy.memory_type_id = type_id;
  if (type == TRITONSERVER_MEMORY_GPU) {
    if (cuda() == nullptr) {
      raise(TRITONSERVER_ERROR_UNSUPPORTED,
            "output_memory_type asks for GPU memory, but CUDA is not "
            "available in this process (" +
                cuda_status() + ")");
    }
    check_gpu_id(type_id);
  } else if (type == TRITONSERVER_MEMORY_CPU_PINNED && cuda() == nullptr) {
    policy.memory_type = TRITONSERVER_MEMORY_CPU;
    policy.memory_type_id = 0;
  } else if (type == TRITONSERVER_MEMORY_CPU) {
    policy.memory_type_id = 0;
  }
  return policy;
}

TRITONSERVER_ResponseAllocator* response_allocator() {
  static TRITONSERVER_ResponseAllocator* allocator = [] {
    const TritonApi& api = triton();
    TRITONSERVER_ResponseAllocator* a = nullptr;
    check(api.ResponseAllocatorNew(&a, alloc_fn, release_fn, nullptr),
          "creating the response allocator");
    check(api.ResponseAllocatorSetQueryFunction(a, query_fn),
          "setting the allocator query function");
    return a;
  }();
  return allocator;
}

#ifdef TRITONSERVER_TESTING
size_t live_buffer_count() noexcept {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  return g_live.size();
}

std::vector<uintptr_t> live_buffer_addresses() {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  std::vector<uintptr_t> out;
  out.reserve(g_live.size());
  for (const OutputBuffer* b : g_live) {
    out.push_back(reinterpret_cast<uintptr_t>(b->data));
  }
  return out;
}

#endif  // TRITONSERVER_TESTING

}  // namespace tsb

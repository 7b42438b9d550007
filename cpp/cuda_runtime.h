// The CUDA runtime, opened at run time. "No CUDA" (no library, no driver, no
// device) is a normal state: available() is then false and every GPU or
// pinned request is refused cleanly by the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tsb {

using cudaStream_t = void*;
using cudaEvent_t = void*;

// The runtime functions we call, resolved as "cuda" #name, like the core's
// (triton_api.h): X(name, return, (args)). A library without a required one
// is not used; an optional one missing stays null and only the feature
// that needs it is refused.
#define CUDA_REQUIRED_FUNCTIONS(X)                        \
  X(GetDeviceCount, int, (int*))                          \
  X(GetDevice, int, (int*))                               \
  X(SetDevice, int, (int))                                \
  X(Malloc, int, (void**, size_t))                        \
  X(Free, int, (void*))                                   \
  X(HostAlloc, int, (void**, size_t, unsigned int))       \
  X(FreeHost, int, (void*))                               \
  X(Memcpy, int, (void*, const void*, size_t, int))       \
  X(GetLastError, int, (void))                            \
  X(GetErrorString, const char*, (int))
// cuda_stream_wait_default (a DLPack consumer's stream) needs the event
// functions, cuda_copy the stream synchronization; the versions only name
// why no device is seen.
#define CUDA_OPTIONAL_FUNCTIONS(X)                         \
  X(EventCreateWithFlags, int, (cudaEvent_t*, unsigned int)) \
  X(EventRecord, int, (cudaEvent_t, cudaStream_t))         \
  X(EventDestroy, int, (cudaEvent_t))                      \
  X(StreamWaitEvent, int, (cudaStream_t, cudaEvent_t, unsigned int)) \
  X(DriverGetVersion, int, (int*))                         \
  X(RuntimeGetVersion, int, (int*))                        \
  X(StreamSynchronize, int, (cudaStream_t))

struct CudaRuntime {
#define CUDA_DECLARE_MEMBER(name, ret, args) ret(*name) args = nullptr;
  CUDA_REQUIRED_FUNCTIONS(CUDA_DECLARE_MEMBER)
  CUDA_OPTIONAL_FUNCTIONS(CUDA_DECLARE_MEMBER)
#undef CUDA_DECLARE_MEMBER
};

constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorInsufficientDriver = 35;
constexpr int kCudaMemcpyDefault = 4;
constexpr unsigned int kCudaEventDisableTiming = 2;

// Tries each candidate path in order until one opens, resolves and sees at
// least one device (a runtime newer than the driver sees none: the next
// candidate may be one the driver serves). When none sees a device, the
// first that opened stays loaded (so errors can be named) with 0 devices.
// Later calls return the first result. Returns the number of CUDA devices.
// cuda_status() names the runtime chosen and every candidate tried before
// it with its reason (not found, missing functions, its cudaGetDeviceCount
// error: no driver at all told apart from a driver older than the runtime),
// led by "no NVIDIA driver found" when a runtime found none.
int cuda_load(const std::vector<std::string>& candidates);

// The runtime if loaded and at least one device exists, else nullptr.
const CudaRuntime* cuda() noexcept;
int cuda_device_count() noexcept;
std::string cuda_status();
std::string cuda_error_string(int code);
// Clears the runtime's (non-sticky) last error after a failed call (a
// failed cudaMalloc leaves cudaErrorMemoryAllocation there, which the core's
// next cudaGetLastError would report as its own failure).
void cuda_clear_last_error() noexcept;

// Makes the consumer's `stream` (a cudaStream_t handle, as DLPack passes it)
// wait for all work queued so far on `device`'s legacy default stream, where
// cudaMemcpy copies run (the identity backend's, to_device()'s). Cheap: an
// event, no host synchronization. Throws TritonException on failure
// (UNSUPPORTED when the runtime lacks the event functions).
void cuda_stream_wait_default(int device, uintptr_t stream);

// Copies `size` bytes between any two of host and `device`'s memory
// (cudaMemcpy, direction from the pointers) and waits until the copy is
// complete, so that the source may be freed and the destination read at
// once. Call without the GIL. Throws TritonException (UNSUPPORTED without
// CUDA, INTERNAL naming `what` and the CUDA error when the copy fails).
void cuda_copy(void* dst, const void* src, size_t size, int device,
               const std::string& what);

// RAII: makes `device` current for the scope, restoring the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tsb

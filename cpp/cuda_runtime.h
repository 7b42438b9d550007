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

struct CudaRuntime {
  int (*GetDeviceCount)(int*) = nullptr;
  int (*GetDevice)(int*) = nullptr;
  int (*SetDevice)(int) = nullptr;
  int (*Malloc)(void**, size_t) = nullptr;
  int (*Free)(void*) = nullptr;
  int (*HostAlloc)(void**, size_t, unsigned int) = nullptr;
  int (*FreeHost)(void*) = nullptr;
  int (*Memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*DeviceSynchronize)() = nullptr;
  int (*EventCreateWithFlags)(cudaEvent_t*, unsigned int) = nullptr;
  int (*EventRecord)(cudaEvent_t, cudaStream_t) = nullptr;
  int (*EventDestroy)(cudaEvent_t) = nullptr;
  int (*StreamWaitEvent)(cudaStream_t, cudaEvent_t, unsigned int) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;
};

constexpr int kCudaSuccess = 0;
constexpr int kCudaMemcpyDefault = 4;
constexpr unsigned int kCudaEventDisableTiming = 2;

// Tries each candidate path in order (the first that opens and resolves
// wins); later calls return the first result. Returns the number of CUDA
// devices (0 when none or no runtime). `status` explains the outcome.
int cuda_load(const std::vector<std::string>& candidates);

// The runtime if loaded and at least one device exists, else nullptr.
const CudaRuntime* cuda() noexcept;
int cuda_device_count() noexcept;
std::string cuda_status();
std::string cuda_error_string(int code);

// Makes the consumer's `stream` (a cudaStream_t handle, as DLPack passes it)
// wait for all work queued so far on `device`'s legacy default stream, where
// cudaMemcpy copies run (the identity backend's, to_device()'s). Cheap: an
// event, no host synchronization. Throws TritonException on failure.
void cuda_stream_wait_default(int device, uintptr_t stream);

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

#include "cuda_runtime.h"

#include <dlfcn.h>

#include <mutex>

#include "errors.h"

namespace tsb {
namespace {

std::once_flag g_once;
CudaRuntime g_rt;
int g_devices = 0;
bool g_loaded = false;
std::string g_status = "CUDA runtime not searched yet";

template <typename F>
bool sym(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}

// "CUDA 12.6" from the runtime's encoding (1000 * major + 10 * minor).
std::string cuda_version(int version) {
  return "CUDA " + std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

// cudaGetDeviceCount's error `err` in words. The runtime's own text for
// cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA
// runtime version", is also what it says when there is no driver at all (a
// machine without an NVIDIA GPU): cudaDriverGetVersion tells the two apart
// (version 0: no driver), and `no_driver` is set for the first.
std::string device_count_error(const CudaRuntime& r, int err, bool* no_driver) {
  int driver = 0;
  if (err == kCudaErrorInsufficientDriver && r.DriverGetVersion != nullptr &&
      r.DriverGetVersion(&driver) == kCudaSuccess) {
    if (driver == 0) {
      *no_driver = true;
      return "no NVIDIA driver (error 35)";
    }
    int runtime = 0;
    const bool known = r.RuntimeGetVersion != nullptr &&
                       r.RuntimeGetVersion(&runtime) == kCudaSuccess &&
                       runtime > 0;
    return "the NVIDIA driver supports up to " + cuda_version(driver) +
           ", older than this runtime" +
           (known ? " (" + cuda_version(runtime) + ")" : std::string()) +
           ": update the driver, or use a runtime it serves (error 35)";
  }
  const char* text = r.GetErrorString(err);
  return std::string(text ? text : "?") + " (error " + std::to_string(err) +
         ")";
}

// One candidate: opened and resolved into `rt`, its device count in
// `devices`; false (with `why`) when it cannot be used at all. `no_driver`
// is set when it found no NVIDIA driver.
bool try_open(const std::string& path, CudaRuntime* rt, int* devices,
              std::string* why, bool* no_driver) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) {
    const char* e = dlerror();
    *why = e != nullptr ? e : "dlopen failed";
    return false;
  }
  CudaRuntime r;
  std::string missing;
#define CUDA_RESOLVE_REQUIRED(name, ret, args) \
  if (!sym(h, "cuda" #name, &r.name)) missing += " cuda" #name;
  CUDA_REQUIRED_FUNCTIONS(CUDA_RESOLVE_REQUIRED)
#undef CUDA_RESOLVE_REQUIRED
  if (!missing.empty()) {
    *why = "lacks CUDA runtime functions:" + missing;
    return false;  // left open: another user may have mapped it too
  }
#define CUDA_RESOLVE_OPTIONAL(name, ret, args) sym(h, "cuda" #name, &r.name);
  CUDA_OPTIONAL_FUNCTIONS(CUDA_RESOLVE_OPTIONAL)
#undef CUDA_RESOLVE_OPTIONAL
  *rt = r;
  int count = 0;
  const int err = r.GetDeviceCount(&count);
  if (err != kCudaSuccess) {
    // e.g. cudaErrorInsufficientDriver (35) for a runtime newer than the
    // driver or without a driver, cudaErrorNoDevice (100) without a GPU.
    *why = "cudaGetDeviceCount: " + device_count_error(r, err, no_driver);
    r.GetLastError();
    *devices = 0;
  } else {
    *devices = count;
    *why = std::to_string(count) + " device(s)";
  }
  return true;
}

}  // namespace

int cuda_load(const std::vector<std::string>& candidates) {
  std::call_once(g_once, [&] {
    std::string tried;  // every candidate passed over, with its reason
    CudaRuntime fallback;
    std::string fallback_path;
    bool no_driver = false;
    for (const std::string& path : candidates) {
      CudaRuntime rt;
      int devices = 0;
      std::string why;
      const bool opened = try_open(path, &rt, &devices, &why, &no_driver);
      if (opened && devices > 0) {
        g_rt = rt;
        g_loaded = true;
        g_devices = devices;
        g_status = path + ": " + why;
        if (!tried.empty()) g_status += " (passed over: " + tried + ")";
        return;
      }
      if (opened && fallback_path.empty()) {
        fallback = rt;  // usable, no device: kept to name errors with
        fallback_path = path;
      }
      if (!tried.empty()) tried += "; ";
      tried += path + ": " + why;
    }
    g_devices = 0;
    if (!fallback_path.empty()) {
      g_rt = fallback;
      g_loaded = true;
    }
    g_status = candidates.empty()
                   ? std::string("no CUDA runtime candidates")
                   : "no CUDA runtime sees a device (" + tried + ")";
    if (no_driver) {
      g_status = "no NVIDIA driver found (the CUDA runtime finds no "
                 "libcuda.so.1: this machine has no NVIDIA GPU, or its driver "
                 "is not installed); " + g_status;
    }
  });
  return g_devices;
}

const CudaRuntime* cuda() noexcept {
  return (g_loaded && g_devices > 0) ? &g_rt : nullptr;
}

int cuda_device_count() noexcept { return g_devices; }

std::string cuda_status() { return g_status; }

std::string cuda_error_string(int code) {
  const char* text = g_loaded ? g_rt.GetErrorString(code) : nullptr;
  return (text != nullptr ? std::string(text) : std::string("CUDA error")) +
         " (error " + std::to_string(code) + ")";
}

void cuda_clear_last_error() noexcept {
  if (g_loaded && g_rt.GetLastError != nullptr) g_rt.GetLastError();
}

void cuda_stream_wait_default(int device, uintptr_t stream) {
  const CudaRuntime* rt = cuda();
  if (rt == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          "CUDA is not available (" + cuda_status() + ")");
  }
  if (rt->EventCreateWithFlags == nullptr || rt->EventRecord == nullptr ||
      rt->EventDestroy == nullptr || rt->StreamWaitEvent == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          "a DLPack stream needs cudaEventRecord and cudaStreamWaitEvent, "
          "which the CUDA runtime lacks (" + cuda_status() + ")");
  }
  ScopedDevice scoped(device);
  cudaEvent_t event = nullptr;
  int err = rt->EventCreateWithFlags(&event, kCudaEventDisableTiming);
  if (err == kCudaSuccess) {
    err = rt->EventRecord(event, nullptr);  // the legacy default stream
    if (err == kCudaSuccess) {
      err = rt->StreamWaitEvent(reinterpret_cast<cudaStream_t>(stream), event,
                                0);
    }
    rt->EventDestroy(event);  // released once the wait no longer needs it
  }
  if (err != kCudaSuccess) {
    raise(TRITONSERVER_ERROR_INTERNAL,
          "making DLPack stream " + std::to_string(stream) +
              " wait for device " + std::to_string(device) +
              " failed: " + cuda_error_string(err));
  }
}

void cuda_copy(void* dst, const void* src, size_t size, int device,
               const std::string& what) {
  const CudaRuntime* rt = cuda();
  if (rt == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          what + " needs CUDA, which is not available (" + cuda_status() + ")");
  }
  if (rt->StreamSynchronize == nullptr) {
    raise(TRITONSERVER_ERROR_UNSUPPORTED,
          what + " needs cudaStreamSynchronize, which the CUDA runtime lacks (" +
              cuda_status() + ")");
  }
  ScopedDevice scoped(device);
  int err = rt->Memcpy(dst, src, size, kCudaMemcpyDefault);
  // A copy between device buffers may return before it is done.
  if (err == kCudaSuccess) err = rt->StreamSynchronize(nullptr);
  if (err != kCudaSuccess) {
    cuda_clear_last_error();
    raise(TRITONSERVER_ERROR_INTERNAL,
          what + ": copying " + std::to_string(size) + " bytes on device " +
              std::to_string(device) + " failed: " + cuda_error_string(err));
  }
}

ScopedDevice::ScopedDevice(int device) {
  if (const CudaRuntime* rt = cuda()) {
    if (rt->GetDevice(&previous_) != kCudaSuccess) previous_ = -1;
    if (previous_ != device) rt->SetDevice(device);
  }
}

ScopedDevice::~ScopedDevice() {
  if (const CudaRuntime* rt = cuda()) {
    if (previous_ >= 0) rt->SetDevice(previous_);
  }
}

}  // namespace tsb

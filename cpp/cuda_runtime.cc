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

bool try_open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (h == nullptr) return false;
  CudaRuntime rt;
  bool ok = true;
#define CUDA_RESOLVE_REQUIRED(name, ret, args) \
  ok = ok && sym(h, "cuda" #name, &rt.name);
  CUDA_REQUIRED_FUNCTIONS(CUDA_RESOLVE_REQUIRED)
#undef CUDA_RESOLVE_REQUIRED
  if (!ok) {
    g_status = path + " lacks CUDA runtime functions";
    return false;
  }
#define CUDA_RESOLVE_OPTIONAL(name, ret, args) sym(h, "cuda" #name, &rt.name);
  CUDA_OPTIONAL_FUNCTIONS(CUDA_RESOLVE_OPTIONAL)
#undef CUDA_RESOLVE_OPTIONAL
  g_rt = rt;
  g_loaded = true;
  int count = 0;
  int err = rt.GetDeviceCount(&count);
  if (err != kCudaSuccess) {
    g_status = path + ": " + rt.GetErrorString(err);
    g_devices = 0;
  } else {
    g_devices = count;
    g_status = path + ": " + std::to_string(count) + " device(s)";
  }
  return true;
}

}  // namespace

int cuda_load(const std::vector<std::string>& candidates) {
  std::call_once(g_once, [&] {
    g_status = "no CUDA runtime found";
    for (const std::string& path : candidates) {
      if (try_open(path)) break;
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
  if (!g_loaded) return "CUDA error " + std::to_string(code);
  return g_rt.GetErrorString(code);
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

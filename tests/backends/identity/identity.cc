// "identity" — a minimal Triton backend used only by this project's tests
// and benchmarks.
//
// For every request, each input tensor named INPUT<k> is copied byte for
// byte into an output tensor named OUTPUT<k> with the same datatype and
// shape (only the outputs the request asked for are produced).
//
// No Triton header is included: the TRITONSERVER_* types and enums come from
// the project's cpp/triton_api.h, the functions this file needs are declared
// below, following the public C API
// of Triton (TRITONBACKEND API 1.x, TRITONSERVER API 1.x).  The TRITONSERVER_*
// and TRITONBACKEND_* functions called here are not linked in; they are
// resolved when Triton dlopen()s this library, from libtritonserver which is
// already loaded in the global symbol scope of the process.
//
// Model configuration parameter (optional):
//   parameters { key: "output_memory_type" value: { string_value: "gpu" } }
// makes the backend ask the output allocator for GPU memory (device 0)
// instead of CPU memory.  Whatever memory type the allocator actually hands
// back is respected.  Copies that touch GPU memory use cudaMemcpy, looked up
// at run time with dlsym(RTLD_DEFAULT, ...); if the CUDA runtime is not
// loaded the request fails with an error response.

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

// The TRITONSERVER_* types, enums and flags: the project's own declarations.
#include "../../../cpp/triton_api.h"

// ---------------------------------------------------------------------------
// Declarations of the TRITONBACKEND API subset used by this backend.
// ---------------------------------------------------------------------------
extern "C" {

struct TRITONBACKEND_Backend;
struct TRITONBACKEND_Model;
struct TRITONBACKEND_ModelInstance;
struct TRITONBACKEND_Request;
struct TRITONBACKEND_Response;
struct TRITONBACKEND_Input;
struct TRITONBACKEND_Output;

// --- TRITONSERVER (server-side utilities) ---
TRITONSERVER_Error* TRITONSERVER_ErrorNew(
    TRITONSERVER_Error_Code code, const char* msg);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error);
TRITONSERVER_Error* TRITONSERVER_LogMessage(
    TRITONSERVER_LogLevel level, const char* filename, const int line,
    const char* msg);
TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(
    TRITONSERVER_Message* message, const char** base, size_t* byte_size);
TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message);

// --- TRITONBACKEND (backend API provided by Triton) ---
TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor);
TRITONSERVER_Error* TRITONBACKEND_BackendName(
    TRITONBACKEND_Backend* backend, const char** name);

TRITONSERVER_Error* TRITONBACKEND_ModelName(
    TRITONBACKEND_Model* model, const char** name);
TRITONSERVER_Error* TRITONBACKEND_ModelVersion(
    TRITONBACKEND_Model* model, uint64_t* version);
TRITONSERVER_Error* TRITONBACKEND_ModelConfig(
    TRITONBACKEND_Model* model, const uint32_t config_version,
    TRITONSERVER_Message** model_config);
TRITONSERVER_Error* TRITONBACKEND_ModelState(
    TRITONBACKEND_Model* model, void** state);
TRITONSERVER_Error* TRITONBACKEND_ModelSetState(
    TRITONBACKEND_Model* model, void* state);

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(
    TRITONBACKEND_ModelInstance* instance, const char** name);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(
    TRITONBACKEND_ModelInstance* instance, void** state);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(
    TRITONBACKEND_ModelInstance* instance, void* state);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request,
    const bool success, const uint64_t exec_start_ns,
    const uint64_t compute_start_ns, const uint64_t compute_end_ns,
    const uint64_t exec_end_ns);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const uint64_t batch_size,
    const uint64_t exec_start_ns, const uint64_t compute_start_ns,
    const uint64_t compute_end_ns, const uint64_t exec_end_ns);

TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(
    TRITONBACKEND_Request* request, uint32_t* count);
TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(
    TRITONBACKEND_Request* request, const uint32_t index,
    TRITONBACKEND_Input** input);
TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(
    TRITONBACKEND_Request* request, uint32_t* count);
TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(
    TRITONBACKEND_Request* request, const uint32_t index,
    const char** output_name);
TRITONSERVER_Error* TRITONBACKEND_RequestRelease(
    TRITONBACKEND_Request* request, uint32_t release_flags);

TRITONSERVER_Error* TRITONBACKEND_InputProperties(
    TRITONBACKEND_Input* input, const char** name,
    TRITONSERVER_DataType* datatype, const int64_t** shape,
    uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count);
TRITONSERVER_Error* TRITONBACKEND_InputBuffer(
    TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
    uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id);

TRITONSERVER_Error* TRITONBACKEND_ResponseNew(
    TRITONBACKEND_Response** response, TRITONBACKEND_Request* request);
TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(
    TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
    const char* name, const TRITONSERVER_DataType datatype,
    const int64_t* shape, const uint32_t dims_count);
TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(
    TRITONBACKEND_Output* output, void** buffer,
    const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
    int64_t* memory_type_id);
TRITONSERVER_Error* TRITONBACKEND_ResponseSend(
    TRITONBACKEND_Response* response, const uint32_t send_flags,
    TRITONSERVER_Error* error);

}  // extern "C"

#define IDENTITY_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The backend API major version this file was written against.
constexpr uint32_t kBackendApiMajor = 1;

#define IDENTITY_TRY(expr)                 \
  do {                                     \
    TRITONSERVER_Error* ie_err__ = (expr); \
    if (ie_err__ != nullptr) {             \
      return ie_err__;                     \
    }                                      \
  } while (false)

void
Log(TRITONSERVER_LogLevel level, int line, const std::string& msg) noexcept
{
  TRITONSERVER_Error* err =
      TRITONSERVER_LogMessage(level, __FILE__, line, msg.c_str());
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
  }
}

void
LogAndDelete(int line, const char* what, TRITONSERVER_Error* err) noexcept
{
  if (err == nullptr) {
    return;
  }
  try {
    std::string msg = std::string("identity backend: ") + what + ": " +
                      TRITONSERVER_ErrorMessage(err);
    Log(TRITONSERVER_LOG_ERROR, line, msg);
  }
  catch (...) {
  }
  TRITONSERVER_ErrorDelete(err);
}

TRITONSERVER_Error*
MakeError(TRITONSERVER_Error_Code code, const std::string& msg) noexcept
{
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

uint64_t
NowNs() noexcept
{
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// ---------------------------------------------------------------------------
// Tiny read-only JSON walker: enough to pull a few values out of the model
// configuration that Triton hands over as serialized JSON.
// ---------------------------------------------------------------------------
class JsonWalker {
 public:
  JsonWalker(const char* begin, const char* end) : pos_(begin), end_(end) {}

  // At an object: advance to the value of member 'key' (true) or past the
  // whole object (false).
  bool EnterMember(const char* key)
  {
    SkipSpace();
    if (!Consume('{')) {
      return false;
    }
    SkipSpace();
    if (Consume('}')) {
      return false;
    }
    while (true) {
      std::string name;
      SkipSpace();
      if (!ReadString(&name)) {
        return false;
      }
      SkipSpace();
      if (!Consume(':')) {
        return false;
      }
      if (name == key) {
        SkipSpace();
        return true;
      }
      if (!SkipValue(0)) {
        return false;
      }
      SkipSpace();
      if (Consume(',')) {
        continue;
      }
      return false;  // '}' (key absent) or malformed input
    }
  }

  bool ReadStringValue(std::string* out)
  {
    SkipSpace();
    return ReadString(out);
  }

  bool ReadIntValue(int64_t* out)
  {
    SkipSpace();
    bool negative = false;
    if (Consume('-')) {
      negative = true;
    }
    if (pos_ >= end_ || *pos_ < '0' || *pos_ > '9') {
      return false;
    }
    int64_t value = 0;
    while (pos_ < end_ && *pos_ >= '0' && *pos_ <= '9') {
      value = value * 10 + (*pos_ - '0');
      ++pos_;
    }
    *out = negative ? -value : value;
    return true;
  }

 private:
  void SkipSpace()
  {
    while (pos_ < end_ &&
           (*pos_ == ' ' || *pos_ == '\t' || *pos_ == '\n' || *pos_ == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char c)
  {
    if (pos_ < end_ && *pos_ == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  static int HexDigit(char c)
  {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  static void AppendUtf8(std::string* out, uint32_t cp)
  {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool ReadHex4(uint32_t* cp)
  {
    if (end_ - pos_ < 4) {
      return false;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = HexDigit(pos_[i]);
      if (d < 0) {
        return false;
      }
      v = (v << 4) | static_cast<uint32_t>(d);
    }
    pos_ += 4;
    *cp = v;
    return true;
  }

  // Reads a JSON string (pos_ at the opening quote); 'out' may be null.
  bool ReadString(std::string* out)
  {
    if (!Consume('"')) {
      return false;
    }
    while (pos_ < end_) {
      const char c = *pos_++;
      if (c == '"') {
        return true;
      }
      if (c != '\\') {
        if (out != nullptr) out->push_back(c);
        continue;
      }
      if (pos_ >= end_) {
        return false;
      }
      const char esc = *pos_++;
      char plain = 0;
      switch (esc) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!ReadHex4(&cp)) {
            return false;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF && end_ - pos_ >= 6 &&
              pos_[0] == '\\' && pos_[1] == 'u') {
            const char* save = pos_;
            pos_ += 2;
            uint32_t low = 0;
            if (ReadHex4(&low) && low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          if (out != nullptr) AppendUtf8(out, cp);
          continue;
        }
        default:
          return false;
      }
      if (out != nullptr) out->push_back(plain);
    }
    return false;
  }

  bool SkipValue(int depth)
  {
    if (depth > 128) {
      return false;
    }
    SkipSpace();
    if (pos_ >= end_) {
      return false;
    }
    const char c = *pos_;
    if (c == '"') {
      return ReadString(nullptr);
    }
    if (c == '{' || c == '[') {
      const char close = (c == '{') ? '}' : ']';
      ++pos_;
      SkipSpace();
      if (Consume(close)) {
        return true;
      }
      while (true) {
        if (c == '{') {
          SkipSpace();
          if (!ReadString(nullptr)) return false;
          SkipSpace();
          if (!Consume(':')) return false;
        }
        if (!SkipValue(depth + 1)) return false;
        SkipSpace();
        if (Consume(',')) continue;
        return Consume(close);
      }
    }
    // number, true, false, null
    const char* start = pos_;
    while (pos_ < end_ && *pos_ != ',' && *pos_ != '}' && *pos_ != ']' &&
           *pos_ != ' ' && *pos_ != '\t' && *pos_ != '\n' && *pos_ != '\r') {
      ++pos_;
    }
    return pos_ != start;
  }

  const char* pos_;
  const char* end_;
};

// ---------------------------------------------------------------------------
// Memory copies
// ---------------------------------------------------------------------------
using CudaMemcpyFn = int (*)(void*, const void*, size_t, int);
using CudaGetErrorStringFn = const char* (*)(int);
constexpr int kCudaMemcpyDefault = 4;

CudaMemcpyFn
LookupCudaMemcpy() noexcept
{
  // Only a successful lookup is cached: the CUDA runtime may be loaded later.
  static std::atomic<CudaMemcpyFn> cached{nullptr};
  CudaMemcpyFn fn = cached.load(std::memory_order_acquire);
  if (fn == nullptr) {
    void* sym = dlsym(RTLD_DEFAULT, "cudaMemcpy");
    if (sym != nullptr) {
      fn = reinterpret_cast<CudaMemcpyFn>(sym);
      cached.store(fn, std::memory_order_release);
    }
  }
  return fn;
}

std::string
CudaErrorText(int code)
{
  std::string text = "CUDA error " + std::to_string(code);
  void* sym = dlsym(RTLD_DEFAULT, "cudaGetErrorString");
  if (sym != nullptr) {
    const char* s = reinterpret_cast<CudaGetErrorStringFn>(sym)(code);
    if (s != nullptr) {
      text += std::string(" (") + s + ")";
    }
  }
  return text;
}

const char*
MemoryTypeName(TRITONSERVER_MemoryType t)
{
  switch (t) {
    case TRITONSERVER_MEMORY_CPU: return "CPU";
    case TRITONSERVER_MEMORY_CPU_PINNED: return "CPU_PINNED";
    case TRITONSERVER_MEMORY_GPU: return "GPU";
  }
  return "UNKNOWN";
}

TRITONSERVER_Error*
CopyBytes(
    void* dst, TRITONSERVER_MemoryType dst_type, const void* src,
    TRITONSERVER_MemoryType src_type, size_t n)
{
  if (n == 0) {
    return nullptr;
  }
  if (dst_type != TRITONSERVER_MEMORY_GPU &&
      src_type != TRITONSERVER_MEMORY_GPU) {
    std::memcpy(dst, src, n);
    return nullptr;
  }
  CudaMemcpyFn cuda_memcpy = LookupCudaMemcpy();
  if (cuda_memcpy == nullptr) {
    return MakeError(
        TRITONSERVER_ERROR_UNAVAILABLE,
        std::string("identity backend: copying ") + MemoryTypeName(src_type) +
            " -> " + MemoryTypeName(dst_type) +
            " memory needs the CUDA runtime, but 'cudaMemcpy' is not loaded "
            "in this process");
  }
  const int rc = cuda_memcpy(dst, src, n, kCudaMemcpyDefault);
  if (rc != 0) {
    return MakeError(
        TRITONSERVER_ERROR_INTERNAL,
        std::string("identity backend: cudaMemcpy ") +
            MemoryTypeName(src_type) + " -> " + MemoryTypeName(dst_type) +
            " of " + std::to_string(n) + " bytes failed: " + CudaErrorText(rc));
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Per-model / per-instance state
// ---------------------------------------------------------------------------
struct ModelState {
  std::string name;
  uint64_t version = 0;
  int64_t max_batch_size = 0;
  bool output_on_gpu = false;
};

struct InstanceState {
  ModelState* model = nullptr;
  TRITONBACKEND_ModelInstance* instance = nullptr;
  std::string name;
};

TRITONSERVER_Error*
ReadModelSettings(TRITONBACKEND_Model* model, ModelState* state)
{
  TRITONSERVER_Message* message = nullptr;
  IDENTITY_TRY(TRITONBACKEND_ModelConfig(model, 1 /* config_version */, &message));

  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err =
      TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  if (err == nullptr) {
    try {
      const std::string json(base, size);  // owned copy; message freed below
      const char* b = json.data();
      const char* e = json.data() + json.size();

      {
        JsonWalker w(b, e);
        int64_t mbs = 0;
        if (w.EnterMember("max_batch_size") && w.ReadIntValue(&mbs)) {
          state->max_batch_size = mbs;
        }
      }

      std::string memory_type = "cpu";
      {
        JsonWalker w(b, e);
        std::string value;
        if (w.EnterMember("parameters") &&
            w.EnterMember("output_memory_type") &&
            w.EnterMember("string_value") && w.ReadStringValue(&value)) {
          memory_type = value;
        }
      }
      for (char& c : memory_type) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      if (memory_type == "gpu") {
        state->output_on_gpu = true;
      } else if (memory_type == "cpu" || memory_type.empty()) {
        state->output_on_gpu = false;
      } else {
        err = MakeError(
            TRITONSERVER_ERROR_INVALID_ARG,
            "identity backend: model '" + state->name +
                "': parameter output_memory_type must be \"cpu\" or \"gpu\", "
                "got \"" +
                memory_type + "\"");
      }
    }
    catch (const std::exception& ex) {
      err = MakeError(
          TRITONSERVER_ERROR_INTERNAL,
          std::string("identity backend: reading model config: ") + ex.what());
    }
  }
  TRITONSERVER_Error* del_err = TRITONSERVER_MessageDelete(message);
  if (del_err != nullptr) {
    TRITONSERVER_ErrorDelete(del_err);
  }
  return err;
}

// ---------------------------------------------------------------------------
// Request processing
// ---------------------------------------------------------------------------
struct Stats {
  uint64_t compute_start_ns = 0;
  uint64_t compute_end_ns = 0;
};

bool
IsRequested(const std::vector<const char*>& requested, const std::string& name)
{
  for (const char* r : requested) {
    if (name == r) {
      return true;
    }
  }
  return false;
}

// Fills 'response' with the outputs for 'request'.  Returns the error to send
// back (nullptr on success).
TRITONSERVER_Error*
ProcessRequest(
    const ModelState& model, TRITONBACKEND_Request* request,
    TRITONBACKEND_Response* response, Stats* stats)
{
  uint32_t output_count = 0;
  IDENTITY_TRY(TRITONBACKEND_RequestOutputCount(request, &output_count));
  std::vector<const char*> requested;
  requested.reserve(output_count);
  for (uint32_t i = 0; i < output_count; ++i) {
    const char* name = nullptr;
    IDENTITY_TRY(TRITONBACKEND_RequestOutputName(request, i, &name));
    requested.push_back(name);
  }

  uint32_t input_count = 0;
  IDENTITY_TRY(TRITONBACKEND_RequestInputCount(request, &input_count));

  const TRITONSERVER_MemoryType preferred_type =
      model.output_on_gpu ? TRITONSERVER_MEMORY_GPU : TRITONSERVER_MEMORY_CPU;

  std::vector<std::string> produced;
  stats->compute_start_ns = NowNs();
  for (uint32_t i = 0; i < input_count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    IDENTITY_TRY(TRITONBACKEND_RequestInputByIndex(request, i, &input));

    const char* input_name = nullptr;
    TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t dims_count = 0;
    uint64_t byte_size = 0;
    uint32_t buffer_count = 0;
    IDENTITY_TRY(TRITONBACKEND_InputProperties(
        input, &input_name, &datatype, &shape, &dims_count, &byte_size,
        &buffer_count));

    static const char kInPrefix[] = "INPUT";
    const size_t prefix_len = sizeof(kInPrefix) - 1;
    if (input_name == nullptr ||
        std::strncmp(input_name, kInPrefix, prefix_len) != 0) {
      return MakeError(
          TRITONSERVER_ERROR_INVALID_ARG,
          std::string("identity backend: model '") + model.name +
              "': input '" + (input_name ? input_name : "<null>") +
              "' is not named INPUT<k>");
    }
    const std::string output_name =
        std::string("OUTPUT") + (input_name + prefix_len);
    if (!IsRequested(requested, output_name)) {
      continue;
    }

    TRITONBACKEND_Output* output = nullptr;
    IDENTITY_TRY(TRITONBACKEND_ResponseOutput(
        response, &output, output_name.c_str(), datatype, shape, dims_count));
    produced.push_back(output_name);

    // The buffer is requested even for a zero-size tensor: response
    // allocators (e.g. tritonserver's HTTP frontend) attach per-output
    // bookkeeping in the allocation callback and expect it to have run for
    // every output.  Nothing is copied in that case and 'dst' may be null.
    void* dst = nullptr;
    TRITONSERVER_MemoryType dst_type = preferred_type;
    int64_t dst_type_id = 0;
    IDENTITY_TRY(TRITONBACKEND_OutputBuffer(
        output, &dst, byte_size, &dst_type, &dst_type_id));
    if (byte_size == 0) {
      continue;
    }
    if (dst == nullptr) {
      return MakeError(
          TRITONSERVER_ERROR_INTERNAL,
          "identity backend: model '" + model.name +
              "': no buffer was allocated for output '" + output_name + "'");
    }

    uint64_t offset = 0;
    for (uint32_t b = 0; b < buffer_count; ++b) {
      const void* src = nullptr;
      uint64_t src_size = 0;
      TRITONSERVER_MemoryType src_type = TRITONSERVER_MEMORY_CPU;
      int64_t src_type_id = 0;
      IDENTITY_TRY(TRITONBACKEND_InputBuffer(
          input, b, &src, &src_size, &src_type, &src_type_id));
      if (src_size == 0) {
        continue;
      }
      if (src_size > byte_size - offset) {
        return MakeError(
            TRITONSERVER_ERROR_INVALID_ARG,
            "identity backend: model '" + model.name + "': input '" +
                input_name + "' buffers hold more than its byte size (" +
                std::to_string(byte_size) + ")");
      }
      IDENTITY_TRY(CopyBytes(
          static_cast<char*>(dst) + offset, dst_type, src, src_type,
          static_cast<size_t>(src_size)));
      offset += src_size;
    }
    if (offset != byte_size) {
      return MakeError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "identity backend: model '" + model.name + "': input '" +
              input_name + "' buffers hold " + std::to_string(offset) +
              " bytes, expected " + std::to_string(byte_size));
    }
  }
  stats->compute_end_ns = NowNs();

  for (const char* r : requested) {
    bool found = false;
    for (const std::string& p : produced) {
      if (p == r) {
        found = true;
        break;
      }
    }
    if (!found) {
      return MakeError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "identity backend: model '" + model.name + "': requested output '" +
              r + "' has no matching input");
    }
  }
  return nullptr;
}

// Batch size contribution of one request for statistics.
uint64_t
RequestBatchSize(const ModelState& model, TRITONBACKEND_Request* request)
{
  if (model.max_batch_size <= 0) {
    return 1;
  }
  uint32_t input_count = 0;
  TRITONSERVER_Error* err =
      TRITONBACKEND_RequestInputCount(request, &input_count);
  if (err != nullptr || input_count == 0) {
    if (err != nullptr) TRITONSERVER_ErrorDelete(err);
    return 1;
  }
  TRITONBACKEND_Input* input = nullptr;
  err = TRITONBACKEND_RequestInputByIndex(request, 0, &input);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return 1;
  }
  const int64_t* shape = nullptr;
  uint32_t dims = 0;
  err = TRITONBACKEND_InputProperties(
      input, nullptr, nullptr, &shape, &dims, nullptr, nullptr);
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(err);
    return 1;
  }
  if (dims == 0 || shape == nullptr || shape[0] < 0) {
    return 1;
  }
  return static_cast<uint64_t>(shape[0]);
}

}  // namespace

// ---------------------------------------------------------------------------
// Backend entry points
// ---------------------------------------------------------------------------

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) noexcept
{
  try {
    uint32_t major = 0;
    uint32_t minor = 0;
    IDENTITY_TRY(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != kBackendApiMajor) {
      return MakeError(
          TRITONSERVER_ERROR_UNSUPPORTED,
          "identity backend: Triton backend API version " +
              std::to_string(major) + "." + std::to_string(minor) +
              " is not supported (need major version " +
              std::to_string(kBackendApiMajor) + ")");
    }
    const char* name = nullptr;
    IDENTITY_TRY(TRITONBACKEND_BackendName(backend, &name));
    Log(TRITONSERVER_LOG_INFO, __LINE__,
        std::string("identity backend: initialized '") +
            (name ? name : "") + "' (Triton backend API " +
            std::to_string(major) + "." + std::to_string(minor) + ")");
    return nullptr;
  }
  catch (...) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        "identity backend: unexpected failure in TRITONBACKEND_Initialize");
  }
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_Finalize(TRITONBACKEND_Backend* /*backend*/) noexcept
{
  return nullptr;
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) noexcept
{
  ModelState* state = nullptr;
  try {
    state = new ModelState();
    const char* name = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ModelName(model, &name);
    if (err == nullptr) {
      state->name = (name != nullptr) ? name : "";
      err = TRITONBACKEND_ModelVersion(model, &state->version);
    }
    if (err == nullptr) {
      err = ReadModelSettings(model, state);
    }
    if (err == nullptr) {
      err = TRITONBACKEND_ModelSetState(model, state);
    }
    if (err != nullptr) {
      delete state;
      return err;
    }
    Log(TRITONSERVER_LOG_INFO, __LINE__,
        "identity backend: model '" + state->name + "' version " +
            std::to_string(state->version) + " initialized (outputs in " +
            (state->output_on_gpu ? "GPU" : "CPU") + " memory preferred)");
    return nullptr;
  }
  catch (...) {
    delete state;
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        "identity backend: unexpected failure in TRITONBACKEND_ModelInitialize");
  }
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) noexcept
{
  void* vstate = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &vstate);
  if (err != nullptr) {
    return err;
  }
  delete static_cast<ModelState*>(vstate);
  return nullptr;
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) noexcept
{
  InstanceState* state = nullptr;
  try {
    TRITONBACKEND_Model* model = nullptr;
    IDENTITY_TRY(TRITONBACKEND_ModelInstanceModel(instance, &model));
    void* vmodel_state = nullptr;
    IDENTITY_TRY(TRITONBACKEND_ModelState(model, &vmodel_state));
    if (vmodel_state == nullptr) {
      return TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL,
          "identity backend: model state missing at instance initialization");
    }
    const char* name = nullptr;
    IDENTITY_TRY(TRITONBACKEND_ModelInstanceName(instance, &name));

    state = new InstanceState();
    state->model = static_cast<ModelState*>(vmodel_state);
    state->instance = instance;
    state->name = (name != nullptr) ? name : "";
    TRITONSERVER_Error* err =
        TRITONBACKEND_ModelInstanceSetState(instance, state);
    if (err != nullptr) {
      delete state;
      return err;
    }
    return nullptr;
  }
  catch (...) {
    delete state;
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        "identity backend: unexpected failure in "
        "TRITONBACKEND_ModelInstanceInitialize");
  }
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) noexcept
{
  void* vstate = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &vstate);
  if (err != nullptr) {
    return err;
  }
  delete static_cast<InstanceState*>(vstate);
  return nullptr;
}

IDENTITY_EXPORT TRITONSERVER_Error*
TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) noexcept
{
  const uint64_t exec_start_ns = NowNs();

  // Until a request is touched, returning an error leaves ownership of all
  // requests with Triton, which then answers them itself.
  void* vstate = nullptr;
  IDENTITY_TRY(TRITONBACKEND_ModelInstanceState(instance, &vstate));
  if (vstate == nullptr) {
    return TRITONSERVER_ErrorNew(
        TRITONSERVER_ERROR_INTERNAL,
        "identity backend: model instance state missing");
  }
  const InstanceState& inst = *static_cast<InstanceState*>(vstate);
  const ModelState& model = *inst.model;

  uint64_t total_batch_size = 0;
  uint64_t first_compute_start_ns = 0;
  uint64_t last_compute_end_ns = 0;

  for (uint32_t r = 0; r < request_count; ++r) {
    TRITONBACKEND_Request* request = requests[r];
    if (request == nullptr) {
      continue;
    }

    Stats stats;
    TRITONSERVER_Error* result = nullptr;
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, request);
    if (err != nullptr) {
      // Without a response object nothing can be sent back for this request.
      LogAndDelete(__LINE__, "creating response", err);
      response = nullptr;
      result = TRITONSERVER_ErrorNew(
          TRITONSERVER_ERROR_INTERNAL, "identity backend: no response");
    } else {
      try {
        result = ProcessRequest(model, request, response, &stats);
      }
      catch (const std::bad_alloc&) {
        result = TRITONSERVER_ErrorNew(
            TRITONSERVER_ERROR_INTERNAL, "identity backend: out of memory");
      }
      catch (...) {
        result = TRITONSERVER_ErrorNew(
            TRITONSERVER_ERROR_INTERNAL,
            "identity backend: unexpected failure while executing request");
      }
      LogAndDelete(
          __LINE__, "sending response",
          TRITONBACKEND_ResponseSend(
              response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, result));
    }

    const bool success = (result == nullptr);
    if (result != nullptr) {
      TRITONSERVER_ErrorDelete(result);  // ResponseSend does not take it
    }

    const uint64_t exec_end_ns = NowNs();
    if (stats.compute_start_ns == 0) stats.compute_start_ns = exec_end_ns;
    if (stats.compute_end_ns == 0) stats.compute_end_ns = exec_end_ns;
    if (success) {
      if (first_compute_start_ns == 0) {
        first_compute_start_ns = stats.compute_start_ns;
      }
      last_compute_end_ns = stats.compute_end_ns;
      total_batch_size += RequestBatchSize(model, request);
    }
    LogAndDelete(
        __LINE__, "reporting request statistics",
        TRITONBACKEND_ModelInstanceReportStatistics(
            instance, request, success, exec_start_ns, stats.compute_start_ns,
            stats.compute_end_ns, exec_end_ns));

    LogAndDelete(
        __LINE__, "releasing request",
        TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL));
  }

  if (total_batch_size > 0) {
    const uint64_t exec_end_ns = NowNs();
    LogAndDelete(
        __LINE__, "reporting batch statistics",
        TRITONBACKEND_ModelInstanceReportBatchStatistics(
            instance, total_batch_size, exec_start_ns, first_compute_start_ns,
            last_compute_end_ns, exec_end_ns));
  }
  return nullptr;
}

#include "response.h"

#include "errors.h"
#include "triton_library.h"

namespace tsb {
namespace {

void read_response(const TritonApi& api, TRITONSERVER_InferenceResponse* r,
                   ResponseData* out) {
  if (TRITONSERVER_Error* err = api.InferenceResponseError(r)) {
    // A new error object on each call: the caller owns it (LeakSanitizer
    // showed one leaked per error response when it was not deleted).
    out->has_error = true;
    out->error_code = api.ErrorCode(err);
    out->error_message = core_message(api, err);
    api.ErrorDelete(err);
  }
  const char* id = nullptr;
  if (api.InferenceResponseId(r, &id) == nullptr && id) out->request_id = id;
  const char* model_name = nullptr;
  int64_t model_version = -1;
  if (TRITONSERVER_Error* err =
          api.InferenceResponseModel(r, &model_name, &model_version)) {
    api.ErrorDelete(err);
  } else {
    out->model_version = model_version;
  }

  uint32_t count = 0;
  check(api.InferenceResponseParameterCount(r, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    check(api.InferenceResponseParameter(r, i, &name, &type, &value));
    ParameterValue v;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING:
        v = std::string(static_cast<const char*>(value));
        break;
      case TRITONSERVER_PARAMETER_INT:  // 64-bit, not 32 (official defect)
        v = *static_cast<const int64_t*>(value);
        break;
      case TRITONSERVER_PARAMETER_BOOL:
        v = *static_cast<const bool*>(value);
        break;
      case TRITONSERVER_PARAMETER_DOUBLE:
        v = *static_cast<const double*>(value);
        break;
      default:
        continue;  // BYTES parameters carry no size in this API
    }
    out->parameters.emplace_back(name ? name : "", std::move(v));
  }

  check(api.InferenceResponseOutputCount(r, &count));
  out->outputs.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    OutputTensor t;
    const char* name = nullptr;
    const int64_t* shape = nullptr;
    uint64_t dims = 0;
    const void* base = nullptr;
    size_t size = 0;
    TRITONSERVER_MemoryType mtype;
    int64_t mtype_id = 0;
    void* userp = nullptr;
    check(api.InferenceResponseOutput(r, i, &name, &t.datatype, &shape, &dims,
                                      &base, &size, &mtype, &mtype_id,
                                      &userp));
    t.name = name ? name : "";
    t.shape.assign(shape, shape + dims);
    t.byte_size = size;
    auto* ours = static_cast<OutputBuffer*>(userp);
    if (ours != nullptr && ours->data == base && size <= ours->size) {
      t.buffer = BufferRef::share(ours);
    } else {
      // Not allocated through us (some backends return their own buffers):
      // copied into a buffer of ours, on the same GPU or on the host.
      const bool gpu = mtype == TRITONSERVER_MEMORY_GPU;
      t.buffer = buffer_copy(base, size, mtype,
                             gpu ? mtype : TRITONSERVER_MEMORY_CPU,
                             gpu ? mtype_id : 0);
    }
    out->outputs.push_back(std::move(t));
  }
}

}  // namespace

ResponseData take_response(TRITONSERVER_InferenceResponse* response,
                           uint32_t flags) noexcept {
  ResponseData out;
  out.final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  if (response == nullptr) return out;
  const TritonApi& api = triton();
  try {
    read_response(api, response, &out);
  } catch (const TritonException& e) {
    out.outputs.clear();
    out.has_error = true;
    out.error_code = e.code();
    out.error_message = e.what();
  } catch (const std::exception& e) {
    out.outputs.clear();
    out.has_error = true;
    out.error_code = TRITONSERVER_ERROR_INTERNAL;
    out.error_message = e.what();
  } catch (...) {
    out.outputs.clear();
    out.has_error = true;
    out.error_code = TRITONSERVER_ERROR_INTERNAL;
    out.error_message = "failed to read the inference response";
  }
  ignore_error(api.InferenceResponseDelete(response));
  return out;
}

const void* host_bytes(const OutputTensor& t, BufferRef& host) {
  if (t.buffer->memory_type != TRITONSERVER_MEMORY_GPU) return t.buffer->data;
  host = buffer_copy(t.buffer->data, t.byte_size, TRITONSERVER_MEMORY_GPU, TRITONSERVER_MEMORY_CPU, 0);
  return host->data;
}

const ResponsePtr& cancelled_end() noexcept {
  static const ResponsePtr end = [] {
    auto d = std::make_shared<ResponseData>();
    d->final = true;
    d->cancelled = true;
    return ResponsePtr(std::move(d));
  }();
  return end;
}

}  // namespace tsb

#include "model_infer_request.h"

#include <string_view>
#include <vector>

#include "json_text.h"
#include "request.h"

namespace tsb {
namespace {

// Protobuf's wire types that these messages use.
constexpr uint32_t kVarint = 0, kLengthDelimited = 2;

// The field numbers of grpc_service.proto's messages.
namespace field {
// ModelInferRequest
constexpr uint32_t kModelName = 1, kModelVersion = 2, kId = 3, kParameters = 4, kInputs = 5, kOutputs = 6,
                   kRawInputContents = 7;
// ModelInferRequest.InferInputTensor
constexpr uint32_t kInputName = 1, kInputDatatype = 2, kInputShape = 3;
// ModelInferRequest.InferRequestedOutputTensor
constexpr uint32_t kOutputName = 1;
// a map entry (ModelInferRequest.ParametersEntry)
constexpr uint32_t kEntryKey = 1, kEntryValue = 2;
// InferParameter
constexpr uint32_t kBoolParam = 1;
}  // namespace field

// The request parameter a unary call may carry natively (perf_analyzer's).
constexpr std::string_view kEmptyFinalResponse = "triton_enable_empty_final_response";

// One message's fields in order. Each next() reads a field's key and its
// value: a varint (`number`) or a length-delimited span (`bytes`); false at
// the end or at anything else (another wire type, a truncated or overlong
// varint or span): `failed` tells which.
class Fields {
 public:
  Fields(const unsigned char* data, size_t size) : at_(data), end_(data + size) {}

  bool next() {
    if (at_ == end_) return false;
    uint64_t key = 0;
    if (!varint(&key) || key > UINT32_MAX || (key >> 3) == 0) return fail();
    number_ = static_cast<uint32_t>(key >> 3);
    wire_ = static_cast<uint32_t>(key & 7);
    if (wire_ == kVarint) return varint(&value_) || fail();
    if (wire_ != kLengthDelimited) return fail();
    uint64_t length = 0;
    if (!varint(&length) || length > static_cast<uint64_t>(end_ - at_)) return fail();
    bytes_ = at_;
    length_ = static_cast<size_t>(length);
    at_ += length_;
    return true;
  }

  bool failed() const { return failed_; }
  bool at_end() const { return at_ == end_; }
  uint32_t number() const { return number_; }
  bool is(uint32_t number, uint32_t wire) const { return number_ == number && wire_ == wire; }
  uint64_t value() const { return value_; }
  const unsigned char* bytes() const { return bytes_; }
  size_t length() const { return length_; }
  std::string_view text() const { return {reinterpret_cast<const char*>(bytes_), length_}; }

  // A varint of at most 10 bytes whose value fits 64 bits.
  bool varint(uint64_t* out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ == end_) return false;
      const unsigned char byte = *at_++;
      if (shift == 63 && byte > 1) return false;
      result |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if ((byte & 0x80) == 0) {
        *out = result;
        return true;
      }
    }
    return false;
  }

 private:
  bool fail() {
    failed_ = true;
    return false;
  }

  const unsigned char* at_;
  const unsigned char* const end_;
  uint32_t number_ = 0, wire_ = 0;
  uint64_t value_ = 0;
  const unsigned char* bytes_ = nullptr;
  size_t length_ = 0;
  bool failed_ = false;
};

// A proto3 string as protobuf's parser takes it (valid UTF-8), and one the
// core can take as a C string (no NUL); false otherwise.
bool plain_text(std::string_view text) {
  return text.find('\0') == std::string_view::npos && is_valid_utf8(text);
}

// A map entry of the request's parameters: triton_enable_empty_final_response
// (a bool, into `*enabled`) alone.
bool allowed_parameter(const unsigned char* data, size_t size, bool* enabled) {
  Fields entry(data, size);
  bool keyed = false, valued = false;
  while (entry.next()) {
    if (entry.is(field::kEntryKey, kLengthDelimited) && !keyed) {
      if (entry.text() != kEmptyFinalResponse) return false;
      keyed = true;
    } else if (entry.is(field::kEntryValue, kLengthDelimited) && !valued) {
      Fields value(entry.bytes(), entry.length());
      if (!value.next() || !value.is(field::kBoolParam, kVarint)) return false;
      *enabled = value.value() != 0;
      if (value.next() || value.failed()) return false;
      valued = true;
    } else {
      return false;
    }
  }
  return !entry.failed() && keyed && valued;
}

// An InferInputTensor: name, datatype and shape only.
bool plan_input(const unsigned char* data, size_t size, PlannedInput* out, const Datatype** datatype) {
  Fields input(data, size);
  std::string_view name, datatype_text;
  out->ndim = 0;
  while (input.next()) {
    if (input.is(field::kInputName, kLengthDelimited)) {
      name = input.text();
    } else if (input.is(field::kInputDatatype, kLengthDelimited)) {
      datatype_text = input.text();
    } else if (input.is(field::kInputShape, kVarint)) {  // unpacked
      if (out->ndim == kMaxDims || input.value() > uint64_t(INT64_MAX)) return false;
      out->dims[out->ndim++] = static_cast<int64_t>(input.value());
    } else if (input.is(field::kInputShape, kLengthDelimited)) {  // packed
      Fields packed(input.bytes(), input.length());
      uint64_t dim = 0;
      while (!packed.at_end()) {
        if (!packed.varint(&dim) || out->ndim == kMaxDims || dim > uint64_t(INT64_MAX)) return false;
        out->dims[out->ndim++] = static_cast<int64_t>(dim);
      }
    } else {
      return false;  // parameters, typed contents, or a field this path does not know
    }
  }
  if (input.failed() || !plain_text(name)) return false;
  *datatype = datatype_named(datatype_text);
  if (*datatype == nullptr || (*datatype)->size == 0 || (*datatype)->type == TRITONSERVER_TYPE_BF16) return false;
  out->name.assign(name);
  out->type = (*datatype)->type;
  return true;
}

// A model version string the servicer reads as this number (plain
// decimal digits below 2**63); false for anything else, which the servicer
// reads or refuses itself.
bool plain_version(std::string_view text, int64_t* out) {
  if (text.empty()) {
    *out = -1;
    return true;
  }
  if (text.size() > 19) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  if (value > uint64_t(INT64_MAX)) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

}  // namespace

bool plan_model_infer(const unsigned char* message, size_t size, ModelInferPlan* out) {
  Fields request(message, size);
  std::string_view model_name, version, id;
  std::vector<std::pair<const unsigned char*, size_t>> inputs, raws;
  while (request.next()) {
    // Every field of the message is length-delimited; a field this path
    // does not know (or one of another wire type) is declined.
    if (request.number() > field::kRawInputContents || !request.is(request.number(), kLengthDelimited)) {
      return false;
    }
    switch (request.number()) {
      case field::kModelName: model_name = request.text(); break;  // the last one, as protobuf reads it
      case field::kModelVersion: version = request.text(); break;
      case field::kId: id = request.text(); break;
      case field::kParameters:
        if (!allowed_parameter(request.bytes(), request.length(), &out->empty_final)) return false;
        break;
      case field::kInputs: inputs.emplace_back(request.bytes(), request.length()); break;
      case field::kRawInputContents: raws.emplace_back(request.bytes(), request.length()); break;
      case field::kOutputs: {
        Fields output(request.bytes(), request.length());
        std::string_view name;
        while (output.next()) {
          if (!output.is(field::kOutputName, kLengthDelimited)) return false;  // parameters, or unknown
          name = output.text();
        }
        if (output.failed() || !plain_text(name)) return false;
        out->plan.outputs.emplace_back(name);
        break;
      }
    }
  }
  if (request.failed() || inputs.size() != raws.size() || !plain_text(model_name) || !plain_text(id) ||
      !plain_version(version, &out->model_version)) {
    return false;
  }
  out->plan.inputs.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    PlannedInput& input = out->plan.inputs[i];
    const Datatype* datatype = nullptr;
    if (!plan_input(inputs[i].first, inputs[i].second, &input, &datatype)) return false;
    for (size_t j = 0; j < i; ++j) {
      if (out->plan.inputs[j].name == input.name) return false;  // the servicer refuses a repeated input
    }
    // The byte size the shape calls for must be the raw contents' size.
    uint64_t bytes = datatype->size;
    for (size_t d = 0; d < input.ndim; ++d) {
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(input.dims[d]), &bytes)) return false;
    }
    if (bytes != raws[i].second) return false;
    input.offset = static_cast<size_t>(raws[i].first - message);
    input.size = raws[i].second;
    out->plan.any_large_input |= input.size > kCopiedInputMaxBytes;
  }
  out->model_name.assign(model_name);
  out->model_version_text.assign(version);
  out->plan.has_id = !id.empty();
  out->plan.id.assign(id);
  return true;
}

}  // namespace tsb

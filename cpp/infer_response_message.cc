#include "infer_response_message.h"

#include <cstdint>
#include <cstring>
#include <variant>

#include "kserve_infer.h"

namespace tsb {
namespace {

// Protocol buffers' wire types and the message's field numbers.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2;
// ModelInferResponse
constexpr uint32_t kModelName = 1, kModelVersion = 2, kId = 3, kParameters = 4, kOutputs = 5, kRawOutput = 6;
// its InferOutputTensor
constexpr uint32_t kOutputName = 1, kOutputDatatype = 2, kOutputShape = 3;
// a map entry; InferParameter's oneof
constexpr uint32_t kEntryKey = 1, kEntryValue = 2;
constexpr uint32_t kBoolParam = 1, kInt64Param = 2, kStringParam = 3, kDoubleParam = 4;

void varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

size_t varint_size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

void tag(std::string& out, uint32_t field, uint32_t wire_type) { varint(out, (field << 3) | wire_type); }

void bytes_field(std::string& out, uint32_t field, std::string_view value) {
  tag(out, field, kLengthDelimited);
  varint(out, value.size());
  out.append(value.data(), value.size());
}

// proto3: a singular string at its default ("") is not written.
void string_field(std::string& out, uint32_t field, std::string_view value) {
  if (!value.empty()) bytes_field(out, field, value);
}

// An InferParameter: the oneof member is written whatever its value.
std::string parameter_message(const ParameterValue& value) {
  std::string out;
  if (auto* s = std::get_if<std::string>(&value)) {
    bytes_field(out, kStringParam, *s);
  } else if (auto* i = std::get_if<int64_t>(&value)) {
    tag(out, kInt64Param, kVarint);
    varint(out, static_cast<uint64_t>(*i));
  } else if (auto* b = std::get_if<bool>(&value)) {
    tag(out, kBoolParam, kVarint);
    varint(out, *b ? 1 : 0);
  } else {
    const double d = std::get<double>(value);
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    tag(out, kDoubleParam, kFixed64);
    for (int k = 0; k < 8; ++k) out.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));
  }
  return out;
}

std::string output_message(const OutputTensor& t) {
  std::string out;
  string_field(out, kOutputName, t.name);
  string_field(out, kOutputDatatype, datatype_name(t.datatype));
  if (!t.shape.empty()) {  // packed, as proto3 writes a repeated scalar
    size_t size = 0;
    for (int64_t d : t.shape) size += varint_size(static_cast<uint64_t>(d));
    tag(out, kOutputShape, kLengthDelimited);
    varint(out, size);
    for (int64_t d : t.shape) varint(out, static_cast<uint64_t>(d));
  }
  return out;
}

}  // namespace

std::optional<std::string> infer_response_message(std::string_view model_name, std::string_view request_id,
                                                  const ResponseData& data) {
  for (const auto& parameter : data.parameters) {
    if (std::holds_alternative<Bytes>(parameter.second)) return std::nullopt;
  }
  size_t payload = 0;
  for (const OutputTensor& t : data.outputs) payload += t.byte_size + 16;
  std::string out;
  out.reserve(payload + 64 + model_name.size() + request_id.size() + 32 * data.outputs.size());
  string_field(out, kModelName, model_name);
  if (data.model_version >= 0) string_field(out, kModelVersion, std::to_string(data.model_version));
  string_field(out, kId, request_id);
  for (const auto& [key, value] : data.parameters) {
    std::string entry;
    bytes_field(entry, kEntryKey, key);
    bytes_field(entry, kEntryValue, parameter_message(value));
    bytes_field(out, kParameters, entry);
  }
  for (const OutputTensor& t : data.outputs) bytes_field(out, kOutputs, output_message(t));
  for (const OutputTensor& t : data.outputs) {
    BufferRef host;
    const void* source = host_bytes(t, host);
    bytes_field(out, kRawOutput, std::string_view(static_cast<const char*>(source), t.byte_size));
  }
  return out;
}

namespace {

// ModelStreamInferResponse
constexpr uint32_t kStreamErrorMessage = 1, kStreamInferResponse = 2;

// The triton_final_response parameter's map entry, as a ModelInferResponse field.
void final_parameter(std::string& out, bool final) {
  std::string entry;
  bytes_field(entry, kEntryKey, "triton_final_response");
  bytes_field(entry, kEntryValue, parameter_message(ParameterValue(final)));
  bytes_field(out, kParameters, entry);
}

}  // namespace

std::string stream_infer_response_message(std::string infer_response, bool final) {
  // A map entry written after the response's own parameters replaces one
  // of the same key when parsed, as the servicer's assignment does.
  final_parameter(infer_response, final);
  std::string header;
  tag(header, kStreamInferResponse, kLengthDelimited);
  varint(header, infer_response.size());
  infer_response.insert(0, header);
  return infer_response;
}

std::string stream_error_message(std::string_view error, std::string_view request_id, std::string_view model_name,
                                 std::string_view model_version, bool final) {
  std::string inner;
  string_field(inner, kModelName, model_name);
  string_field(inner, kModelVersion, model_version);
  string_field(inner, kId, request_id);
  final_parameter(inner, final);
  std::string out;
  string_field(out, kStreamErrorMessage, error);
  bytes_field(out, kStreamInferResponse, inner);
  return out;
}

}  // namespace tsb

#include "kserve_infer.h"

#include <yyjson.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <variant>
#include <new>
#include <string_view>

#include "errors.h"
#include "json_text.h"
#include "request.h"
#include "response.h"
#include "response_view.h"
#include "thread_state.h"

namespace nb = nanobind;

namespace tsb {

namespace {
constexpr Datatype kDatatypes[] = {
    {"BOOL", TRITONSERVER_TYPE_BOOL, 1},     {"UINT8", TRITONSERVER_TYPE_UINT8, 1},
    {"UINT16", TRITONSERVER_TYPE_UINT16, 2}, {"UINT32", TRITONSERVER_TYPE_UINT32, 4},
    {"UINT64", TRITONSERVER_TYPE_UINT64, 8}, {"INT8", TRITONSERVER_TYPE_INT8, 1},
    {"INT16", TRITONSERVER_TYPE_INT16, 2},   {"INT32", TRITONSERVER_TYPE_INT32, 4},
    {"INT64", TRITONSERVER_TYPE_INT64, 8},   {"FP16", TRITONSERVER_TYPE_FP16, 2},
    {"FP32", TRITONSERVER_TYPE_FP32, 4},     {"FP64", TRITONSERVER_TYPE_FP64, 8},
    {"BYTES", TRITONSERVER_TYPE_BYTES, 0},   {"BF16", TRITONSERVER_TYPE_BF16, 2},
};
}  // namespace

const Datatype* datatype_named(std::string_view name) {
  for (const Datatype& d : kDatatypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string_view datatype_name(TRITONSERVER_DataType type) {
  for (const Datatype& d : kDatatypes) {
    if (d.type == type) return d.name;
  }
  return "INVALID";
}

namespace {

// TRITONSERVER_TXN_DECOUPLED of the model transaction properties.
constexpr uint32_t kDecoupled = 2;
// Outputs copied into the response body without the GIL past this size.
constexpr size_t kCopyWithoutGilBytes = 64 * 1024;

// Past this many values, a header is left to the general path: the
// json.loads it uses refuses nesting past the recursion limit on some
// Pythons (3.11: ~1000 levels; 3.13 reads 5000), which yyjson reads; the
// common request has a few dozen.
constexpr size_t kMaxHeaderValues = 900;

// obj[key] (the last, as json.loads keeps it); null when absent, and
// `*twice` set when the key occurs more than once: such a header is left
// to the general path.
yyjson_val* member(yyjson_val* object, std::string_view key, bool* twice) {
  yyjson_val* found = nullptr;
  yyjson_obj_iter it = yyjson_obj_iter_with(object);
  while (yyjson_val* name = yyjson_obj_iter_next(&it)) {
    if (std::string_view(yyjson_get_str(name), yyjson_get_len(name)) != key) continue;
    if (found != nullptr) *twice = true;
    found = yyjson_obj_iter_get_val(name);
  }
  return found;
}

// A string the core can take as a C string (codec.core_text's rule: UTF-8,
// which yyjson checks, and no NUL); false otherwise.
bool c_text(yyjson_val* value, std::string_view* out) {
  if (!yyjson_is_str(value)) return false;
  std::string_view text(yyjson_get_str(value), yyjson_get_len(value));
  if (text.find('\0') != std::string_view::npos) return false;
  *out = text;
  return true;
}

// An object holding only `key`, whose value is returned; null for anything else.
yyjson_val* only_member(yyjson_val* object, std::string_view key) {
  if (!yyjson_is_obj(object) || yyjson_obj_size(object) != 1) return nullptr;
  bool twice = false;
  return member(object, key, &twice);
}

// An integer (json.loads' int: no fraction, no exponent) in int64's range.
bool int64_of(yyjson_val* value, int64_t* out) {
  if (yyjson_is_sint(value)) {
    *out = yyjson_get_sint(value);
    return true;
  }
  if (yyjson_is_uint(value) && yyjson_get_uint(value) <= uint64_t(INT64_MAX)) {
    *out = static_cast<int64_t>(yyjson_get_uint(value));
    return true;
  }
  return false;
}

// Whether `size` bytes of BYTES data hold exactly `count` elements (each a
// 4-byte little-endian length and its bytes), as codec._from_binary
// requires.
bool bytes_elements_fit(const unsigned char* data, size_t size, uint64_t count) {
  size_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (size - at < 4) return false;
    const uint32_t length = uint32_t(data[at]) | uint32_t(data[at + 1]) << 8 |
                            uint32_t(data[at + 2]) << 16 | uint32_t(data[at + 3]) << 24;
    at += 4;
    if (size - at < length) return false;
    at += length;
  }
  return at == size;
}

// One input entry, planned; false when it is not a valid binary tensor.
bool plan_input(yyjson_val* entry, const unsigned char* binary, size_t binary_size,
                size_t offset, PlannedInput* out) {
  if (!yyjson_is_obj(entry)) return false;
  bool twice = false;
  std::string_view name, datatype_text;
  if (!c_text(member(entry, "name", &twice), &name) || name.empty()) return false;
  if (!c_text(member(entry, "datatype", &twice), &datatype_text)) return false;
  const Datatype* datatype = datatype_named(datatype_text);
  if (datatype == nullptr) return false;
  yyjson_val* shape = member(entry, "shape", &twice);
  if (!yyjson_is_arr(shape)) return false;
  const size_t ndim = yyjson_arr_size(shape);
  if (ndim > kMaxDims) return false;
  // The element count; a zero dimension (an empty tensor) or one the
  // general path might refuse as too large is left to it.
  uint64_t count = 1;
  size_t d = 0;
  yyjson_arr_iter dims = yyjson_arr_iter_with(shape);
  while (yyjson_val* dim = yyjson_arr_iter_next(&dims)) {
    int64_t value = 0;
    if (!int64_of(dim, &value) || value <= 0) return false;
    out->dims[d++] = value;
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(value), &count)) return false;
  }
  if (count > (uint64_t(1) << 59)) return false;  // x 8 bytes: below 2**63
  int64_t size = 0;
  if (!int64_of(only_member(member(entry, "parameters", &twice), "binary_data_size"), &size) ||
      size <= 0 || static_cast<uint64_t>(size) > binary_size - offset) {
    return false;
  }
  const size_t byte_size = static_cast<size_t>(size);
  if (datatype->size != 0 ? count * datatype->size != byte_size
                          : !bytes_elements_fit(binary + offset, byte_size, count)) {
    return false;
  }
  if (twice) return false;
  out->name.assign(name);
  out->type = datatype->type;
  out->ndim = ndim;
  out->offset = offset;
  out->size = byte_size;
  return true;
}

// The request of the JSON header `header`, planned; false when this path
// does not cover it (or the header is not JSON that json.loads reads as
// one object). Needs no GIL.
bool plan_request(const char* header, size_t header_length, const unsigned char* binary,
                  size_t binary_size, Plan* plan) {
  struct Doc {
    yyjson_doc* doc;
    ~Doc() { yyjson_doc_free(doc); }
  } parsed{yyjson_read(header, header_length, 0)};
  if (parsed.doc == nullptr || yyjson_doc_get_val_count(parsed.doc) > kMaxHeaderValues) return false;
  yyjson_val* document = yyjson_doc_get_root(parsed.doc);
  if (!yyjson_is_obj(document)) return false;
  bool twice = false;
  if (yyjson_val* id = member(document, "id", &twice); id != nullptr && !yyjson_is_null(id)) {
    std::string_view text;
    if (!c_text(id, &text)) return false;
    plan->has_id = true;
    plan->id.assign(text);
  }
  // Request parameters: binary_data_output alone (a boolean), if any.
  bool all_binary = false;
  if (yyjson_val* parameters = member(document, "parameters", &twice);
      parameters != nullptr && !yyjson_is_null(parameters)) {
    if (!yyjson_is_obj(parameters)) return false;
    if (yyjson_obj_size(parameters) != 0) {
      yyjson_val* value = only_member(parameters, "binary_data_output");
      if (!yyjson_is_bool(value)) return false;
      all_binary = yyjson_get_bool(value);
    }
  }
  yyjson_val* inputs = member(document, "inputs", &twice);
  if (!yyjson_is_arr(inputs) || yyjson_arr_size(inputs) == 0) return false;
  plan->inputs.resize(yyjson_arr_size(inputs));
  size_t offset = 0, i = 0;
  yyjson_arr_iter entries = yyjson_arr_iter_with(inputs);
  while (yyjson_val* entry = yyjson_arr_iter_next(&entries)) {
    PlannedInput& input = plan->inputs[i];
    if (!plan_input(entry, binary, binary_size, offset, &input)) return false;
    for (size_t j = 0; j < i; ++j) {
      if (plan->inputs[j].name == input.name) return false;
    }
    offset += input.size;
    plan->any_large_input |= input.size > kCopiedInputMaxBytes;
    ++i;
  }
  if (offset != binary_size) return false;
  // Outputs: each asked as binary data itself (its own binary_data wins
  // over binary_data_output), or all, by binary_data_output, when none is
  // named.
  yyjson_val* outputs = member(document, "outputs", &twice);
  if (twice) return false;
  if (outputs == nullptr || yyjson_is_null(outputs)) return all_binary;
  if (!yyjson_is_arr(outputs)) return false;
  if (yyjson_arr_size(outputs) == 0) return all_binary;
  plan->outputs.reserve(yyjson_arr_size(outputs));
  yyjson_arr_iter asked = yyjson_arr_iter_with(outputs);
  while (yyjson_val* entry = yyjson_arr_iter_next(&asked)) {
    std::string_view name;
    if (!yyjson_is_obj(entry) || !c_text(member(entry, "name", &twice), &name)) return false;
    yyjson_val* parameters = member(entry, "parameters", &twice);
    bool binary_data = false;
    if (parameters != nullptr && !yyjson_is_null(parameters)) {
      if (!yyjson_is_obj(parameters)) return false;
      if (yyjson_obj_size(parameters) != 0) {
        yyjson_val* value = only_member(parameters, "binary_data");
        if (!yyjson_is_bool(value)) return false;
        binary_data = yyjson_get_bool(value);
      }
    }
    if (twice || !binary_data) return false;
    for (const std::string& seen : plan->outputs) {
      if (seen == name) return false;
    }
    plan->outputs.emplace_back(name);
  }
  return true;  // `twice` was checked after each lookup above
}

// The route's parameters as (name, JSON text of the value); false when one
// is not a str, int, float or bool (json.dumps then decides).
bool plan_route_parameters(PyObject* parameters,
                           std::vector<std::pair<std::string, std::string>>* out) {
  if (parameters == nullptr || parameters == Py_None) return true;
  if (!PyDict_Check(parameters)) return false;
  Py_ssize_t position = 0;
  PyObject *key, *value;
  while (PyDict_Next(parameters, &position, &key, &value)) {
    if (!PyUnicode_CheckExact(key)) return false;
    Py_ssize_t size = 0;
    const char* name = PyUnicode_AsUTF8AndSize(key, &size);
    if (name == nullptr) {
      PyErr_Clear();
      return false;
    }
    std::string text;
    if (PyBool_Check(value)) {
      text = value == Py_True ? "true" : "false";
    } else if (PyLong_CheckExact(value)) {
      int overflow = 0;
      const long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow != 0) return false;
      append_json_int(text, number);
    } else if (PyFloat_CheckExact(value)) {
      append_json_double(text, PyFloat_AsDouble(value));
    } else if (PyUnicode_CheckExact(value)) {
      Py_ssize_t length = 0;
      const char* utf8 = PyUnicode_AsUTF8AndSize(value, &length);
      if (utf8 == nullptr) {
        PyErr_Clear();
        return false;
      }
      append_json_string(text, std::string_view(utf8, static_cast<size_t>(length)));
    } else {
      return false;
    }
    out->emplace_back(std::string(name, static_cast<size_t>(size)), std::move(text));
  }
  return true;
}

// A response parameter as JSON text.
std::string parameter_json(const ParameterValue& value) {
  std::string text;
  if (auto* s = std::get_if<std::string>(&value)) {
    // As to_python (response_view.cc) reads it: up to a NUL.
    append_json_string(text, std::string_view(s->c_str()));
  } else if (auto* i = std::get_if<int64_t>(&value)) {
    append_json_int(text, *i);
  } else if (auto* b = std::get_if<bool>(&value)) {
    text = *b ? "true" : "false";
  } else if (auto* d = std::get_if<double>(&value)) {
    append_json_double(text, *d);
  } else {
    text = "null";  // BYTES parameters are not read (response.cc)
  }
  return text;
}

// Py_buffer, released on scope exit.
struct BufferView {
  Py_buffer view{};
  bool held = false;
  ~BufferView() {
    if (held) PyBuffer_Release(&view);
  }
};

}  // namespace

KServeInferStream::KServeInferStream(
    nb::object model_, nb::object request_, nb::object loop_, nb::object waiters_,
    std::string model_name_, std::string request_id_,
    std::vector<std::pair<std::string, std::string>> route_parameters_)
    : AsyncResponseStream(std::move(model_), std::move(request_), nb::none(), true,
                          std::move(loop_), std::move(waiters_)),
      model_name(std::move(model_name_)),
      request_id(std::move(request_id_)),
      route_parameters(std::move(route_parameters_)) {}

namespace {

// codec.encode_response's JSON header of `data` (needs the GIL only for a
// float parameter: json.dumps' float text is Python's own).
std::string response_json_header(const std::string& model_name, const std::string& request_id,
                                  const std::vector<std::pair<std::string, std::string>>& route_parameters,
                                  const ResponseData& data) {
  // codec.encode_response's document, keys in its order, written with
  // separators (",", ":").
  std::string out;
  out.reserve(128 + 96 * data.outputs.size());
  out += "{\"model_name\":";
  append_json_string(out, model_name);
  if (data.model_version >= 0) {
    out += ",\"model_version\":\"";
    append_json_int(out, data.model_version);
    out += '"';
  }
  if (!request_id.empty()) {
    out += ",\"id\":";
    append_json_string(out, request_id);
  }
  if (!data.parameters.empty() || !route_parameters.empty()) {
    // {**response.parameters, **route_parameters}: a later value replaces
    // an earlier one in its first place.
    std::vector<std::pair<std::string_view, std::string>> merged;
    const auto put = [&merged](std::string_view name, std::string text) {
      for (auto& entry : merged) {
        if (entry.first == name) {
          entry.second = std::move(text);
          return;
        }
      }
      merged.emplace_back(name, std::move(text));
    };
    for (const auto& [name, value] : data.parameters) {
      put(std::string_view(name.c_str()), parameter_json(value));
    }
    for (const auto& [name, text] : route_parameters) put(name, text);
    out += ",\"parameters\":{";
    for (size_t i = 0; i < merged.size(); ++i) {
      if (i != 0) out += ',';
      append_json_string(out, merged[i].first);
      out += ':';
      out += merged[i].second;
    }
    out += '}';
  }
  out += ",\"outputs\":[";
  for (size_t i = 0; i < data.outputs.size(); ++i) {
    const OutputTensor& t = data.outputs[i];
    if (i != 0) out += ',';
    out += "{\"name\":";
    append_json_string(out, t.name);
    out += ",\"datatype\":\"";
    out += datatype_name(t.datatype);
    out += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d != 0) out += ',';
      append_json_int(out, t.shape[d]);
    }
    out += "],\"parameters\":{\"binary_data_size\":";
    append_json_int(out, static_cast<int64_t>(t.byte_size));
    out += "}}";
  }
  out += "]}";
  return out;
}

// The whole body: `header`, then the outputs' bytes (GPU ones copied to
// the host first), into `start` (header.size() + outputs' sizes bytes).
void fill_body(char* start, const std::string& header, const ResponseData& data) {
  char* at = start;
  std::memcpy(at, header.data(), header.size());
  at += header.size();
  for (const OutputTensor& t : data.outputs) {
    BufferRef host;
    const void* source = host_bytes(t, host);
    if (t.byte_size != 0) std::memcpy(at, source, t.byte_size);
    at += t.byte_size;
  }
}

}  // namespace

std::string KServeInferStream::json_header(const ResponseData& data) const {
  return response_json_header(model_name, request_id, route_parameters, data);
}

nb::object KServeInferStream::deliver(const ResponseData& taken) {
  const bool ended = cancelled || taken.cancelled;
  const ResponseData& data = ended ? *cancelled_end() : taken;
  complete = data.final;
  raise_if_error(response_error(data, ended));
  if (data.outputs.empty() && !data.final) return nb::none();
  const std::string header = json_header(data);
  if (data.outputs.empty()) {
    return nb::make_tuple(nb::bytes(header.data(), header.size()), nb::none());
  }
  size_t total = header.size();
  bool on_gpu = false;
  for (const OutputTensor& t : data.outputs) {
    total += t.byte_size;
    on_gpu |= t.buffer->memory_type == TRITONSERVER_MEMORY_GPU;
  }
  PyObject* raw = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total));
  if (raw == nullptr) throw nb::python_error();
  nb::object body = nb::steal(raw);
  char* const start = PyBytes_AsString(raw);
  const auto fill = [&] { fill_body(start, header, data); };
  if (on_gpu || total > kCopyWithoutGilBytes) {
    // `body` is not shared yet: it is filled without the GIL.
    GilRelease release;
    fill();
  } else {
    fill();
  }
  return nb::make_tuple(std::move(body), nb::int_(header.size()));
}

Built build_planned(Server& server, const std::string& model_name, int64_t model_version, Plan& plan,
                    const unsigned char* binary, size_t binary_size, nb::handle body) {
  Built built;
  nb::object owner = nb::none();
  if (plan.any_large_input) {
    if (body.is_valid() && PyBytes_CheckExact(body.ptr())) {
      owner = nb::borrow(body);
    } else {
      PyObject* copy = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(binary),
                                                 static_cast<Py_ssize_t>(binary_size));
      if (copy == nullptr) throw nb::python_error();
      owner = nb::steal(copy);
      binary = reinterpret_cast<const unsigned char*>(PyBytes_AsString(copy));
    }
  }
  nb::object request_object = nb::inst_alloc(nb::type<Request>());
  try {
    new (nb::inst_ptr<Request>(request_object))
        Request(server.handle(), server.inflight(), model_name, model_version);
  } catch (const TritonException&) {
    return built;  // e.g. the model unloaded meanwhile: the general path says so
  }
  nb::inst_mark_ready(request_object);
  Request& request = *nb::inst_ptr<Request>(request_object);
  try {
    if (plan.has_id) request.set_id(plan.id);
    for (const PlannedInput& input : plan.inputs) {
      request.add_input_dims(input.name, input.type, input.dims, input.ndim,
                             reinterpret_cast<uintptr_t>(binary + input.offset), input.size,
                             TRITONSERVER_MEMORY_CPU, 0, owner);
    }
    for (const std::string& name : plan.outputs) request.add_requested_output(name);
  } catch (...) {
    request.discard_from_python();
    throw;
  }
  built.request = std::move(request_object);
  if (plan.has_id) built.id = std::move(plan.id);
  return built;
}

std::optional<bool> model_decoupled(Server& server, const std::string& model_name, int64_t model_version) {
  try {
    return (server.model_transaction_properties(model_name, model_version) & kDecoupled) != 0;
  } catch (const TritonException&) {
    return std::nullopt;  // not one the core finds: the general path says so
  }
}

bool natively_servable(Server& server, const std::string& model_name, int64_t model_version) {
  const std::optional<bool> decoupled = model_decoupled(server, model_name, model_version);
  return decoupled.has_value() && !*decoupled;
}

namespace {

// A checked, built, not yet submitted request (`request` None: not one
// this path covers, nothing was sent to the core).
// status_of (routes.py) of a core error code.
int http_status_of(TRITONSERVER_Error_Code code) {
  switch (code) {
    case TRITONSERVER_ERROR_NOT_FOUND: return 404;
    case TRITONSERVER_ERROR_UNAVAILABLE: return 503;
    case TRITONSERVER_ERROR_UNSUPPORTED: return 501;
    case TRITONSERVER_ERROR_INTERNAL: return 500;
    default: return 400;
  }
}

// The answer (AnswerOnceSink) of a request of kserve_infer_reply becomes
// the HTTP reply.
class ReplySink final : public AnswerOnceSink {
 public:
  ReplySink(std::string model_name, std::string request_id,
            std::vector<std::pair<std::string, std::string>> route, KServeReplyWriter write)
      : model_name_(std::move(model_name)), request_id_(std::move(request_id)),
        route_(std::move(route)), write_(std::move(write)) {}

 protected:
  void answer(const ResponseData& data) noexcept override {
    try {
      if (data.has_error) {
        std::string body = "{\"error\": ";
        append_json_string(body, data.error_message);
        body += '}';
        write_(http_status_of(data.error_code), std::move(body), -1);
        return;
      }
      bool needs_gil = false;
      for (const auto& parameter : data.parameters) {
        needs_gil |= std::holds_alternative<double>(parameter.second);
      }
      std::string header;
      if (needs_gil) {
        ThreadGil gil;
        header = response_json_header(model_name_, request_id_, route_, data);
      } else {
        header = response_json_header(model_name_, request_id_, route_, data);
      }
      size_t total = header.size();
      for (const OutputTensor& t : data.outputs) total += t.byte_size;
      if (total == header.size()) {  // no binary data follows (empty outputs): JSON, as the binary
        write_(200, std::move(header), -1);
        return;
      }
      std::string body(total, '\0');
      fill_body(body.data(), header, data);
      const int64_t header_length = static_cast<int64_t>(header.size());
      write_(200, std::move(body), header_length);
    } catch (const std::exception& error) {
      std::string body = "{\"error\": ";
      append_json_string(body, std::string("internal error writing the infer reply: ") + error.what());
      body += '}';
      write_(500, std::move(body), -1);
    }
  }

 private:
  const std::string model_name_, request_id_;
  const std::vector<std::pair<std::string, std::string>> route_;
  const KServeReplyWriter write_;
};

}  // namespace

nb::object kserve_infer(Server& server, nb::handle model, const std::string& model_name,
                        int64_t model_version, nb::handle body, size_t header_length,
                        nb::handle route_parameters, nb::handle loop, nb::handle waiters) {
  AsyncioWaiters& loop_waiters = nb::cast<AsyncioWaiters&>(waiters);
  BufferView whole;
  if (PyObject_GetBuffer(body.ptr(), &whole.view, PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    return nb::none();
  }
  whole.held = true;
  const size_t body_size = static_cast<size_t>(whole.view.len);
  if (header_length > body_size) return nb::none();
  const auto* start = static_cast<const unsigned char*>(whole.view.buf);
  Plan plan;
  std::vector<std::pair<std::string, std::string>> route;
  if (!plan_request(reinterpret_cast<const char*>(start), header_length, start + header_length,
                    body_size - header_length, &plan) ||
      !plan_route_parameters(route_parameters.ptr(), &route)) {
    return nb::none();
  }
  bool servable;
  {
    GilRelease release;
    servable = natively_servable(server, model_name, model_version);
  }
  if (!servable) return nb::none();  // a decoupled model, or one the core cannot find: the general path words it
  Built built = build_planned(server, model_name, model_version, plan, start + header_length,
                              body_size - header_length, body);
  if (built.request.is_none()) return nb::none();
  Request& request = *nb::inst_ptr<Request>(built.request);
  try {
    request.submit_from_python(loop_waiters.notifier());
  } catch (...) {
    request.discard_from_python();
    throw;
  }
  nb::object stream = nb::inst_alloc(nb::type<KServeInferStream>());
  new (nb::inst_ptr<KServeInferStream>(stream)) KServeInferStream(
      nb::borrow(model), std::move(built.request), nb::borrow(loop), nb::borrow(waiters),
      model_name, std::move(built.id), std::move(route));
  nb::inst_mark_ready(stream);
  return stream;
}

bool kserve_infer_reply(Server& server, const std::string& model_name, int64_t model_version,
                        const char* body, size_t body_size, size_t header_length,
                        KServeReplyWriter write, std::function<void()>* cancel) {
  if (header_length > body_size) return false;
  const auto* binary = reinterpret_cast<const unsigned char*>(body) + header_length;
  const size_t binary_size = body_size - header_length;
  Plan plan;
  if (!plan_request(body, header_length, binary, binary_size, &plan) ||
      !natively_servable(server, model_name, model_version)) {
    return false;
  }
  GilAcquire gil;
  try {
    Built built = build_planned(server, model_name, model_version, plan, binary, binary_size, nb::handle());
    if (built.request.is_none()) return false;
    Request& request = *nb::inst_ptr<Request>(built.request);
    try {
      request.set_response_sink(std::make_shared<ReplySink>(model_name, std::move(built.id),
                                                            std::vector<std::pair<std::string, std::string>>(),
                                                            std::move(write)));
      request.submit_from_python(nullptr);
      *cancel = request.canceller();
    } catch (...) {
      // The core refused it: the general path words the refusal.
      request.discard_from_python();
      throw;
    }
    return true;
  } catch (nb::python_error& error) {
    error.discard_as_unraisable("the native KServe infer path");
  } catch (const std::exception&) {
  }
  return false;  // nothing submitted: the general path answers
}

}  // namespace tsb

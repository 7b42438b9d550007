// JSON text in native code, the one place that knows its syntax: written
// exactly as Python's json.dumps writes it (ensure_ascii, the default), for
// output compared byte for byte with what the package's Python writes (the
// KServe infer response, kserve_infer.cc); and read where Python's json
// cannot be used (the core's model index on the thread that stops a server,
// model_index.cc: it runs without the GIL and may outlive the interpreter).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tsb {

// `utf8` as a JSON string literal (quotes included): `"` `\` and the
// control characters escaped as json.dumps does (\n, \r, \t, \b, \f, else
// \u00XX), and every character outside printable ASCII as \uXXXX (lower
// case hex; a surrogate pair above U+FFFF). A byte that is not valid UTF-8
// is written as U+FFFD.
void append_json_string(std::string& out, std::string_view utf8);

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what protobuf requires of a proto3 string, read
// by model_infer_request.cc with this module's one UTF-8 decoder.
bool is_valid_utf8(std::string_view text);

// A float as json.dumps writes one: repr() (shortest round trip, ".0"
// added to whole numbers), NaN, Infinity or -Infinity. Needs the GIL
// (Python's own formatter).
void append_json_double(std::string& out, double value);

// An int64 in decimal.
void append_json_int(std::string& out, int64_t value);

// An object of the array read_json_string_objects() reads: its keys and
// their string values, decoded (escapes and \uXXXX, surrogate pairs
// included, as UTF-8), in their order.
using JsonStringObject = std::vector<std::pair<std::string, std::string>>;

// `json` read as an array of flat objects whose values are all strings
// (the core's model index: [{"name":"a","version":"1","state":"READY"}]).
// Reading stops at anything else, keeping the objects read so far. Needs
// no GIL.
std::vector<JsonStringObject> read_json_string_objects(std::string_view json);

}  // namespace tsb

// JSON text exactly as Python's json.dumps writes it (ensure_ascii, the
// default): for native code whose output is compared byte for byte with
// what the package's Python writes (the KServe infer response,
// kserve_infer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tsb {

// `utf8` as a JSON string literal (quotes included): `"` `\` and the
// control characters escaped as json.dumps does (\n, \r, \t, \b, \f, else
// \u00XX), and every character outside printable ASCII as \uXXXX (lower
// case hex; a surrogate pair above U+FFFF). A byte that is not valid UTF-8
// is written as U+FFFD.
void append_json_string(std::string& out, std::string_view utf8);

// A float as json.dumps writes one: repr() (shortest round trip, ".0"
// added to whole numbers), NaN, Infinity or -Infinity. Needs the GIL
// (Python's own formatter).
void append_json_double(std::string& out, double value);

// An int64 in decimal.
void append_json_int(std::string& out, int64_t value);

}  // namespace tsb

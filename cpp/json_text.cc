#include "json_text.h"

#include <Python.h>

#include <charconv>
#include <cmath>
#include <new>

namespace tsb {
namespace {

void append_u_escape(std::string& out, uint32_t unit) {
  static constexpr char kHex[] = "0123456789abcdef";
  const char text[] = {'\\', 'u', kHex[(unit >> 12) & 0xF], kHex[(unit >> 8) & 0xF],
                       kHex[(unit >> 4) & 0xF], kHex[unit & 0xF]};
  out.append(text, sizeof(text));
}

// The code point starting at s[*i] (advancing *i past it); U+FFFD for an
// invalid sequence (one byte consumed).
uint32_t decode_utf8(std::string_view s, size_t* i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(*i);
  size_t length = 0;
  uint32_t cp = 0, min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07, min = 0x10000;
  }
  if (length == 0 || *i + length > s.size()) {
    ++*i;
    return 0xFFFD;
  }
  for (size_t k = 1; k < length; ++k) {
    const unsigned char c = byte(*i + k);
    if ((c & 0xC0) != 0x80) {
      ++*i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++*i;
    return 0xFFFD;
  }
  *i += length;
  return cp;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    // A run of characters written as they are.
    size_t run = i;
    while (run < s.size()) {
      const unsigned char c = static_cast<unsigned char>(s[run]);
      if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') break;
      ++run;
    }
    out.append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default: append_u_escape(out, c); break;  // other controls, DEL
      }
      continue;
    }
    uint32_t cp = decode_utf8(s, &i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      append_u_escape(out, 0xD800 | (cp >> 10));
      append_u_escape(out, 0xDC00 | (cp & 0x3FF));
    } else {
      append_u_escape(out, cp);
    }
  }
  out.push_back('"');
}

void append_json_double(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    char* text = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, nullptr);
    if (text == nullptr) {  // out of memory: Python's error is set
      PyErr_Clear();
      throw std::bad_alloc();
    }
    out += text;
    PyMem_Free(text);
  }
}

void append_json_int(std::string& out, int64_t value) {
  char text[24];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  out.append(text, static_cast<size_t>(end - text));
}

}  // namespace tsb

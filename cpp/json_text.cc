#include "json_text.h"

#include <Python.h>

#include <charconv>
#include <cmath>
#include <new>
#include <utility>

namespace tsb {
namespace {

// JSON's two-character escapes, as json.dumps writes them: the character
// and the letter after the backslash (a reader also takes "\/" for '/').
constexpr std::pair<char, char> kShortEscapes[] = {
    {'"', '"'}, {'\\', '\\'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}, {'\b', 'b'}, {'\f', 'f'}};

// The letter that escapes `c`, or 0 when it has none.
char escape_letter(char c) {
  for (const auto& [character, letter] : kShortEscapes) {
    if (character == c) return letter;
  }
  return 0;
}

// The character that `letter` escapes, or 0 when it is no escape.
char escaped_character(char letter) {
  for (const auto& [character, escape] : kShortEscapes) {
    if (escape == letter) return character;
  }
  return letter == '/' ? '/' : 0;
}

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

// Appends code point `cp` to `out` as UTF-8.
void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Four hex digits at json[i..i+4), or -1.
int32_t hex4(std::string_view json, size_t i) {
  if (i + 4 > json.size()) return -1;
  int32_t value = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = json[k];
    value <<= 4;
    if (c >= '0' && c <= '9') value |= c - '0';
    else if (c >= 'a' && c <= 'f') value |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') value |= c - 'A' + 10;
    else return -1;
  }
  return value;
}

// The JSON string starting at the quote json[i], decoded into `out`; `i`
// ends past its closing quote. False when it is malformed.
bool read_string(std::string_view json, size_t& i, std::string& out) {
  out.clear();
  for (++i; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '"') {
      ++i;
      return true;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= json.size()) return false;
    if (json[i] != 'u') {
      const char character = escaped_character(json[i]);
      if (character == 0) return false;
      out += character;
      continue;
    }
    int32_t cp = hex4(json, i + 1);
    if (cp < 0) return false;
    i += 4;
    if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < json.size() &&
        json[i + 1] == '\\' && json[i + 2] == 'u') {
      const int32_t low = hex4(json, i + 3);
      if (low >= 0xDC00 && low < 0xE000) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        i += 6;
      }
    }
    append_utf8(out, static_cast<uint32_t>(cp));
  }
  return false;
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
      const char letter = escape_letter(static_cast<char>(c));
      if (letter != 0) {
        out += '\\';
        out += letter;
      } else {
        append_u_escape(out, c);  // other controls, DEL
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

bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t at = i;
    // An invalid sequence decodes as U+FFFD consuming one byte; a real
    // U+FFFD consumes three.
    if (decode_utf8(text, &i) == 0xFFFD && i == at + 1) return false;
  }
  return true;
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

std::vector<JsonStringObject> read_json_string_objects(std::string_view json) {
  std::vector<JsonStringObject> objects;
  JsonStringObject object;
  std::string key, value;
  bool in_object = false;
  size_t i = 0;
  while (i < json.size()) {
    const char c = json[i];
    if (c == '{') {
      object.clear();
      object.reserve(4);  // the index's objects have 3 keys
      in_object = true;
      ++i;
    } else if (c == '}') {
      if (in_object) objects.push_back(std::move(object));
      object.clear();
      in_object = false;
      ++i;
    } else if (c == '"' && in_object) {
      // A key, a colon, and its string value.
      if (!read_string(json, i, key)) break;
      while (i < json.size() && (json[i] == ' ' || json[i] == ':')) ++i;
      if (i >= json.size() || json[i] != '"' || !read_string(json, i, value)) break;
      object.emplace_back(std::move(key), std::move(value));
    } else if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n') {
      ++i;
    } else {
      break;  // not that shape
    }
  }
  return objects;
}

}  // namespace tsb

#include "model_index.h"

#include <cstdint>

namespace tsb {
namespace {

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
int32_t hex4(const std::string& json, size_t i) {
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
bool read_string(const std::string& json, size_t& i, std::string& out) {
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
    switch (json[i]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
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
        break;
      }
      default:
        return false;
    }
  }
  return false;
}

}  // namespace

std::vector<IndexEntry> parse_model_index(const std::string& json) {
  std::vector<IndexEntry> entries;
  IndexEntry entry;
  std::string key, value;
  bool in_object = false;
  size_t i = 0;
  while (i < json.size()) {
    const char c = json[i];
    if (c == '{') {
      entry = IndexEntry();
      in_object = true;
      ++i;
    } else if (c == '}') {
      if (in_object) entries.push_back(std::move(entry));
      in_object = false;
      ++i;
    } else if (c == '"' && in_object) {
      // A key, a colon, and its string value.
      if (!read_string(json, i, key)) break;
      while (i < json.size() && (json[i] == ' ' || json[i] == ':')) ++i;
      if (i >= json.size() || json[i] != '"' || !read_string(json, i, value)) break;
      if (key == "name") entry.name = std::move(value);
      else if (key == "state") entry.state = std::move(value);
    } else if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n') {
      ++i;
    } else {
      break;  // not the shape the index has
    }
  }
  return entries;
}

}  // namespace tsb

#include "model_index.h"

#include <algorithm>
#include <cstdint>
#include <thread>

#include "triton_library.h"

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

// The core's model index, read directly (the handle is closed while the
// server stops); empty on an error.
std::vector<IndexEntry> read_index(TRITONSERVER_Server* server,
                                   uint32_t flags) {
  const TritonApi& api = triton();
  TRITONSERVER_Message* message = nullptr;
  TRITONSERVER_Error* err = api.ServerModelIndex(server, flags, &message);
  if (err != nullptr) {
    api.ErrorDelete(err);
    return {};
  }
  const char* base = nullptr;
  size_t size = 0;
  std::vector<IndexEntry> entries;
  err = api.MessageSerializeToJson(message, &base, &size);
  if (err == nullptr) {
    entries = parse_model_index(std::string(base, size));
  } else {
    api.ErrorDelete(err);
  }
  api.MessageDelete(message);
  return entries;
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

// Unloads the ready models and waits, until `deadline`, for them to be
// unloaded. Why: the core's stop (InferenceServer::Stop) unloads every
// model and then checks once a second whether they are gone; a model is
// destroyed on a thread of its own, so the first check always finds it
// still unloading and the stop sleeps a whole second (two with the python
// backend's stub). Unloaded here, polled in milliseconds, the models are
// gone when ServerStop first looks. Only with model_control_mode EXPLICIT:
// the core refuses unloads in the other modes (UNAVAILABLE), and their
// stop takes the core's second. Never throws (the stop thread's body).
void unload_models_first(
    TRITONSERVER_Server* server,
    std::chrono::steady_clock::time_point deadline) noexcept {
  const TritonApi& api = triton();
  try {
    std::vector<std::string> unloading;
    for (IndexEntry& entry : read_index(server, kIndexReadyOnly)) {
      TRITONSERVER_Error* err = api.ServerUnloadModel(server, entry.name.c_str());
      if (err == nullptr) {
        unloading.push_back(std::move(entry.name));
        continue;
      }
      const TRITONSERVER_Error_Code code = api.ErrorCode(err);
      api.ErrorDelete(err);
      if (code == TRITONSERVER_ERROR_UNAVAILABLE) return;  // not EXPLICIT
    }
    auto pause = std::chrono::milliseconds(1);
    while (!unloading.empty() && std::chrono::steady_clock::now() < deadline) {
      bool gone = true;
      for (const IndexEntry& entry : read_index(server, 0)) {
        if ((entry.state == "READY" || entry.state == "UNLOADING") &&
            std::find(unloading.begin(), unloading.end(), entry.name) !=
                unloading.end()) {
          gone = false;
          break;
        }
      }
      if (gone) return;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  } catch (...) {  // out of memory: the core's stop does it all
  }
}

}  // namespace tsb

#include "model_index.h"

#include <algorithm>
#include <cstdint>
#include <thread>

#include "json_text.h"
#include "triton_library.h"

namespace tsb {
namespace {

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
  for (JsonStringObject& object : read_json_string_objects(json)) {
    IndexEntry entry;
    for (auto& [key, value] : object) {
      if (key == "name") entry.name = std::move(value);
      else if (key == "state") entry.state = std::move(value);
    }
    entries.push_back(std::move(entry));
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

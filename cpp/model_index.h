// The core's model index (TRITONSERVER_ServerModelIndex) read natively,
// and a stop's first step built on it: the ready models unloaded first.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "triton_api.h"

namespace tsb {

// TRITONSERVER_INDEX_FLAG_READY: only the models that are ready.
constexpr unsigned int kIndexReadyOnly = 1;

// One model version of the index: its name and state ("READY",
// "UNLOADING", ...; empty for a model of the repository never loaded).
struct IndexEntry {
  std::string name;
  std::string state;
};

// The entries of the index's JSON: an array of flat objects whose values
// are strings ({"name":"a","version":"1","state":"READY"}). Reading stops at
// anything else, keeping the entries read so far.
std::vector<IndexEntry> parse_model_index(const std::string& json);

// Unloads the server's ready models and waits, until `deadline`, for them
// to be gone (a stop's first step; see model_index.cc). Never throws.
void unload_models_first(
    TRITONSERVER_Server* server,
    std::chrono::steady_clock::time_point deadline) noexcept;

}  // namespace tsb

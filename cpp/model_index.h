// The core's model index (TRITONSERVER_ServerModelIndex) read natively:
// what a server's stop needs to know of its models without Python.
#pragma once
#include <string>
#include <vector>

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

}  // namespace tsb

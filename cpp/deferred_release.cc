#include "deferred_release.h"

#include <mutex>

namespace tsb {
namespace {

std::mutex g_mutex;
// Heap-allocated and never freed: parked references must not be released by
// a static destructor after the interpreter is gone.
auto* g_parked = new std::vector<nanobind::object>();

}  // namespace

void defer_release(std::vector<nanobind::object>&& objects) noexcept {
  if (objects.empty()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& o : objects) g_parked->push_back(std::move(o));  // steals refs
  objects.clear();  // only moved-from (null) handles remain
}

void drain_deferred() {
  std::vector<nanobind::object> doomed;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_parked->empty()) return;
    doomed.swap(*g_parked);
  }
  // `doomed` goes out of scope here, with the GIL held by our caller.
}

}  // namespace tsb

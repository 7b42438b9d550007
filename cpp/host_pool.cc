#include "host_pool.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tsb {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kPooledMinimum = size_t(1) << 20;  // 1 MiB
constexpr size_t kClassGranularity = size_t(1) << 20;
constexpr size_t kMaxCachedBytes = size_t(256) << 20;

struct Pool {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free_blocks;
  size_t cached = 0;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: frees may come at exit
  return *p;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

void* host_alloc(size_t size, size_t* capacity) noexcept {
  if (size < kPooledMinimum) {
    *capacity = round_up(size == 0 ? 1 : size, kAlignment);
    return std::aligned_alloc(kAlignment, *capacity);
  }
  *capacity = round_up(size, kClassGranularity);
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    auto it = p.free_blocks.find(*capacity);
    if (it != p.free_blocks.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      p.cached -= *capacity;
      return block;
    }
  }
  return std::aligned_alloc(kAlignment, *capacity);
}

void host_free(void* block, size_t capacity) noexcept {
  if (block == nullptr) return;
  if (capacity >= kPooledMinimum) {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    if (p.cached + capacity <= kMaxCachedBytes) {
      try {
        p.free_blocks[capacity].push_back(block);
        p.cached += capacity;
        return;
      } catch (...) {
        // No room for the bookkeeping: fall through and free it.
      }
    }
  }
  std::free(block);
}

size_t host_pool_cached_bytes() noexcept {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.cached;
}

void host_pool_trim() noexcept {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  for (auto& [capacity, blocks] : p.free_blocks) {
    for (void* block : blocks) std::free(block);
  }
  p.free_blocks.clear();
  p.cached = 0;
}

}  // namespace tsb

#include "spin_wait.h"

#include <pthread.h>

namespace tsb {
namespace {

std::atomic<int> g_waiting{0};

// Only the forking thread goes on in a child, and it is not waiting.
void reset_in_child() { g_waiting.store(0, std::memory_order_relaxed); }
[[maybe_unused]] const int g_atfork_installed =
    pthread_atfork(nullptr, nullptr, reset_in_child);

}  // namespace

std::atomic<int>& SpinWait::waiting() noexcept { return g_waiting; }

}  // namespace tsb

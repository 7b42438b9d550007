#include "fork.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>

namespace tsb {
namespace {

std::atomic<uint64_t> g_generation{0};
std::atomic<bool> g_watching{false};

// Runs at exit() in a child, before the exit handlers registered earlier
// (those of libtritonserver among them: exit handlers run in reverse
// order), once Python has finalized.
void end_child(int status, void*) {
  fflush(nullptr);
  _exit(status);
}

}  // namespace

// Only an atomic increment: this also runs in the children that native
// code forks and execs at once (the python backend's stubs).
void fork_after_fork_in_child() noexcept { g_generation.fetch_add(1); }

const char* const kForkedMessage =
    "this server was created by the parent of this process, before fork(): "
    "a child process cannot use it (the core's threads stayed in the "
    "parent); create a new Server in the child, or start child processes "
    "with the 'spawn' or 'forkserver' method of multiprocessing";

uint64_t fork_generation() noexcept { return g_generation.load(); }

void watch_forks() noexcept { g_watching.store(true); }

void end_child_at_exit() noexcept {
  if (!g_watching.load() || fork_generation() == 0) return;
  // glibc's on_exit() passes exit()'s status on, which atexit() would not.
  on_exit(end_child, nullptr);
}

}  // namespace tsb

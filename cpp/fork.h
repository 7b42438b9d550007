// fork(): what a child process may do with what it inherited from its
// parent. The core's threads (model instances, the metrics poller, our
// background stops) stay in the parent; the child has their memory, with
// locks possibly held, and none of the threads. So, in a child:
//   - a server (and every request) of the parent is unusable: each use
//     raises UNAVAILABLE at once, naming fork(), instead of waiting forever
//     for a thread that is not there; stopping or dropping one does nothing
//     (it is the parent's to stop), leaking its memory in the child;
//   - when its parent had created a server, a child forked by Python ends
//     with _exit() right after Python finalized (the exit status kept,
//     stdio flushed): the core's static destructors would join threads
//     that do not exist in the child (std::system_error -> SIGABRT).
#pragma once

#include <cstdint>

namespace tsb {

// How many fork()s separate this process from the one that started the
// watch (0 in that process). Lock-free: safe in a child whatever locks the
// parent's threads held.
uint64_t fork_generation() noexcept;

// True when `generation` (a fork_generation() taken earlier) belongs to a
// parent of this process.
inline bool inherited_from_parent(uint64_t generation) noexcept {
  return generation != fork_generation();
}

// Records that this process created a server (a child of it then ends
// with _exit(), below); call when a server is created.
void watch_forks() noexcept;

// fork() hook (fork_hooks.cc): counts the generation in a child.
void fork_after_fork_in_child() noexcept;

// In a child of fork() of a process that watched forks: makes exit() end
// the process with _exit() as described above. Called from Python's
// after-fork hook (os.register_at_fork), so only for Python's os.fork(), not
// for the children that native code forks and execs at once.
void end_child_at_exit() noexcept;

// The message of the UNAVAILABLE error raised in a child.
extern const char* const kForkedMessage;

}  // namespace tsb

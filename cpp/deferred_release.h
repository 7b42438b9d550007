// The one path by which Python references are dropped from threads that do
// not hold the GIL (Triton's callback threads): they are parked here and
// released the next time Python code calls into this module, or, at the
// latest, by the releaser thread shortly after they were parked (so that a
// program that only idles, or waits elsewhere, does not keep them).
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

namespace tsb {

// Whether this thread holds the GIL (false before the interpreter starts or
// after it finalized). Decides between dropping a reference now and
// parking it here.
bool holds_gil() noexcept;

// fork() hooks (fork_hooks.cc): the lock is held across the fork (so the
// child's copy of the parked references is consistent), and the child
// starts from a fresh state holding the same parked references and no
// releaser thread.
void deferred_release_before_fork() noexcept;
void deferred_release_after_fork_in_parent() noexcept;
void deferred_release_after_fork_in_child() noexcept;

// Takes ownership of `objects` without touching their reference counts.
void defer_release(std::vector<nanobind::object>&& objects) noexcept;

// The releaser runs on a thread that Python starts (threading.Thread, from
// Server.start()): Python makes that thread's state while it holds the GIL,
// so the releaser never makes one itself (a thread state made without the
// GIL races with tracemalloc.stop(): docs/design.md, "Native threads and
// the GIL"). claim_releaser_start() is true once per needed start (none
// running, none starting, not stopping); run_releaser() is that thread's
// body: it returns when stop_deferred_releaser() runs. Until it runs,
// parked references wait for the next drain in Python.
bool claim_releaser_start() noexcept;
void run_releaser();

// Drops every parked reference. Call with the GIL held.
void drain_deferred();

#ifdef TRITONSERVER_TESTING
// How many times defer_release() woke the releaser thread (test build
// only): the wake-ups a thread parking references pays for.
unsigned long long deferred_release_wakes() noexcept;
#endif

// Stops the releaser thread for good and drops what is parked. Call with
// the GIL held, before the interpreter finalizes (the atexit hook of
// tritonserver._api._server, which then joins the releaser's thread): after
// this, parked references wait for the next drain_deferred(), if any.
void stop_deferred_releaser();

}  // namespace tsb

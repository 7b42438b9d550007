// The GIL for native threads (threads Python did not start) that run Python:
// each keeps one Python thread state for its whole life, instead of a new
// one per PyGILState_Ensure, made for it by the state maker (below), a
// thread Python started, while that holds the GIL. Making a thread state
// allocates through the raw allocator; without the GIL, under an allocator
// hook (tracemalloc, memory profilers), that races with the hook being
// removed (tracemalloc.stop() frees buffers a waiting hook then uses:
// SIGSEGV), and every model load brings new core threads. For the core's
// threads, which the package cannot start from Python: the log callback,
// and the in-process python backend (python_backend/python_backend.cc: the core's model
// threads). A thread the package starts itself is started by Python
// instead (deferred_release.h); nanobind's gil_scoped_acquire inside such
// a scope finds the same thread state.
#pragma once

#include <Python.h>

#include <optional>

namespace tsb {

// Finalization and threads other than the one that finalizes: CPython
// 3.10-3.13 end a thread that takes the GIL once finalization has begun
// with pthread_exit, whose unwinding through frames that cannot unwind (the
// package's noexcept functions, nanobind's dispatch, the core's own) ends
// the process in std::terminate (SIGABRT, "terminate called without an
// active exception"). Every place where such a thread takes the GIL back
// catches that unwinding and parks the thread instead, for good, as
// CPython 3.14 does itself: the process then ends around it.
[[noreturn]] void park_forever() noexcept;

// Takes the GIL back with `state` (PyEval_RestoreThread), or parks this
// thread if finalization ended it.
void restore_thread(PyThreadState* state) noexcept;

// Lets the GIL go for its scope, and takes it back by restore_thread: the
// package's gil_scoped_release (for nb::call_guard too).
class GilRelease {
 public:
  GilRelease() noexcept : saved_(PyEval_SaveThread()) {}
  ~GilRelease() { restore_thread(saved_); }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* saved_;
};

// Holds the GIL for its scope on a thread Python started (it has its own
// thread state): PyGILState_Ensure, parking if finalization ended the
// thread.
class GilAcquire {
 public:
  GilAcquire() noexcept;
  ~GilAcquire() { PyGILState_Release(state_); }
  GilAcquire(const GilAcquire&) = delete;
  GilAcquire& operator=(const GilAcquire&) = delete;

 private:
  PyGILState_STATE state_;
};

// Holds the GIL for its scope, with this thread's persistent thread state.
// Nests, and works on a thread that already holds the GIL. Parks the
// thread if finalization ended it (park_forever).
class ThreadGil {
 public:
  ThreadGil() noexcept;
  ~ThreadGil();
  ThreadGil(const ThreadGil&) = delete;
  ThreadGil& operator=(const ThreadGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Holds the GIL for its scope on any thread: a thread Python knows (it
// has its own thread state: one that submitted or cancelled, answered at
// once) by GilAcquire, another (Triton's) by ThreadGil.
class AnyThreadGil {
 public:
  AnyThreadGil() noexcept {
    if (PyGILState_GetThisThreadState() != nullptr) {
      python_.emplace();
    } else {
      native_.emplace();
    }
  }
  AnyThreadGil(const AnyThreadGil&) = delete;
  AnyThreadGil& operator=(const AnyThreadGil&) = delete;

 private:
  std::optional<ThreadGil> native_;
  std::optional<GilAcquire> python_;
};

// The state maker: a thread that Python starts (threading.Thread, before
// a server starts: tritonserver._api._server) and that makes, holding the
// GIL, the thread state each native thread keeps (ThreadGil), so that no
// native thread makes one without the GIL (see ThreadGil). Without it
// (not started yet, or stopped at exit) a native thread makes its own.
// claim_state_maker_start() is true once per needed start;
// run_state_maker() is its body (called with the GIL held), returning
// after stop_state_maker() (at interpreter exit, GIL held). After fork()
// the child has none until it is started again.
bool claim_state_maker_start() noexcept;
void run_state_maker();
void stop_state_maker() noexcept;
void state_maker_after_fork_in_child() noexcept;

// Once the core's threads may run Python while they hold the core's locks
// (a log callback is installed: the core logs under its locks), a thread
// that holds the GIL must let it go before any core call that may take
// those locks, even a call that waits for nothing else (request.cc).
void note_python_under_core_locks() noexcept;
bool python_under_core_locks() noexcept;

// Whether the interpreter can still be entered from a native thread (it is
// initialized and not finalizing).
bool python_usable() noexcept;

}  // namespace tsb

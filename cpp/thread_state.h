// The GIL for native threads (threads Python did not start) that run Python:
// each keeps one Python thread state for its whole life, made at its first
// acquisition and deleted when the thread ends, instead of a new one per
// PyGILState_Ensure. Making a thread state allocates through the raw
// allocator without the GIL: under an allocator hook (tracemalloc, memory
// profilers) that races with the hook being removed (tracemalloc.stop()
// frees buffers a waiting hook then uses: SIGSEGV), so it happens once per
// thread, not once per call. For the core's threads, which the package
// cannot start from Python: the log callback, and the entry points of the
// in-process python backend library (cpp/python_backend_shim.cc: the core's
// model-instance threads). A thread the package starts itself is started
// by Python instead (deferred_release.h);
// nanobind's gil_scoped_acquire inside such a scope finds the same thread
// state.
#pragma once

#include <Python.h>

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

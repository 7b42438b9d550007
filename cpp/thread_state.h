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

// Holds the GIL for its scope, with this thread's persistent thread state.
// Nests, and works on a thread that already holds the GIL.
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

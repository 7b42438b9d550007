// The GIL for native threads (threads Python did not start) that run Python:
// each keeps one Python thread state for its whole life, made at its first
// acquisition and deleted when the thread ends, instead of a new one per
// PyGILState_Ensure. Making a thread state allocates through the raw
// allocator without the GIL: under an allocator hook (tracemalloc, memory
// profilers) that races with the hook being removed (tracemalloc.stop()
// frees buffers a waiting hook then uses: SIGSEGV), so it happens once per
// thread, not once per wake-up. Used by the deferred releaser and the core's
// log callback, and the entry points of the in-process python backend
// library (cpp/python_backend_shim.cc: the core's model-instance threads);
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

// Deletes this thread's kept thread state now (it is made again by a later
// ThreadGil). Call without the GIL, before a thread the package owns ends
// while the interpreter may be about to finalize; threads that are not the
// package's leave it to their end.
void forget_thread_state() noexcept;

// Whether the interpreter can still be entered from a native thread (it is
// initialized and not finalizing).
bool python_usable() noexcept;

}  // namespace tsb

#include "thread_state.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>

namespace tsb {
namespace {

// The one PyGILState count a native thread keeps for its life: while it is
// held, PyGILState_Release never deletes the thread's state. At the thread's
// end the count is given back, deleting the state, if the interpreter can
// still be entered; otherwise the state is left to the interpreter's own
// clean-up at finalization.
struct KeptState {
  bool made = false;
  void forget() noexcept {
    if (!made || !python_usable()) return;
    made = false;
    PyGILState_STATE state = PyGILState_Ensure();  // the GIL, same state
    PyGILState_Release(PyGILState_LOCKED);  // that count; the GIL stays
    PyGILState_Release(state);  // the kept count: the state is deleted
  }
  ~KeptState() { forget(); }
};
thread_local KeptState t_kept;

// Set once Python may run under the core's locks (log callback installed).
std::atomic<bool> g_python_under_core_locks{false};

}  // namespace

void park_forever() noexcept {
  for (;;) pause();
}

void restore_thread(PyThreadState* state) noexcept {
  try {
    PyEval_RestoreThread(state);
  } catch (abi::__forced_unwind&) {  // finalization ended this thread
    park_forever();
  }
}

GilAcquire::GilAcquire() noexcept {
  try {
    state_ = PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park_forever();
  }
}

ThreadGil::ThreadGil() noexcept {
  try {
    if (!t_kept.made) {
      t_kept.made = true;
      // The kept count; if it took the GIL, let it go: the Ensure below
      // takes it again like every later acquisition on this thread.
      if (PyGILState_Ensure() == PyGILState_UNLOCKED) PyEval_SaveThread();
    }
    state_ = PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park_forever();
  }
}

ThreadGil::~ThreadGil() { PyGILState_Release(state_); }

void note_python_under_core_locks() noexcept {
  g_python_under_core_locks.store(true);
}

bool python_under_core_locks() noexcept {
  return g_python_under_core_locks.load();
}

bool python_usable() noexcept {
  if (!Py_IsInitialized()) return false;
  // Py_IsFinalizing from 3.13, _Py_IsFinalizing before (neither in the
  // limited API before 3.13): looked up once by name.
  using Check = int (*)();
  static const Check finalizing = [] {
    void* f = dlsym(RTLD_DEFAULT, "Py_IsFinalizing");
    if (f == nullptr) f = dlsym(RTLD_DEFAULT, "_Py_IsFinalizing");
    return reinterpret_cast<Check>(f);
  }();
  return finalizing == nullptr || finalizing() == 0;
}

}  // namespace tsb

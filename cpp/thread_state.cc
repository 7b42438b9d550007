#include "thread_state.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

namespace tsb {
namespace {

// A native thread's request for a thread state, on its own stack.
struct StateRequest {
  PyThreadState* state = nullptr;  // nullptr: the maker stopped first
  bool answered = false;
};

// The state maker: a thread Python started (run_state_maker) that makes
// thread states for native threads while it holds the GIL. Requests wait
// on `made` until answered.
struct StateMaker {
  std::mutex mutex;
  std::condition_variable wake;  // a request, or stop
  std::condition_variable made;  // a request answered, or the maker runs
  std::deque<StateRequest*> requests;
  bool starting = false;
  bool running = false;
  bool stopping = false;
};
// Never freed: native threads may ask until the process ends. Replaced
// (the old one leaked) in a forked child, where no other thread exists.
StateMaker* g_maker = new StateMaker();

// A thread state made by the maker, or nullptr when none runs. Blocks
// without the GIL until it is made.
PyThreadState* made_thread_state() noexcept {
  try {
    StateMaker* m = g_maker;
    std::unique_lock<std::mutex> lock(m->mutex);
    // Claimed but not yet running (its threading.Thread just started): a
    // little while, not for good (a thread that failed to start).
    m->made.wait_for(lock, std::chrono::seconds(5),
                     [m] { return m->running || !m->starting; });
    if (!m->running || m->stopping) return nullptr;
    StateRequest request;
    m->requests.push_back(&request);
    m->wake.notify_one();
    m->made.wait(lock, [&] { return request.answered; });
    return request.state;
  } catch (...) {  // no memory for the request
    return nullptr;
  }
}

// Binds `state` (made by another thread) to this thread for the
// PyGILState API, where CPython does not do it when the state is first
// restored on this thread: 3.10 and 3.11 (what their _thread module does
// for the threads it starts). 3.12 and newer bind it in
// PyEval_RestoreThread.
void bind_to_this_thread(PyThreadState* state) noexcept {
  using Bind = void (*)(PyThreadState*);
  static const Bind bind = [] {
    const char* version = Py_GetVersion();  // "3.11.7 (main, ..."
    if (std::strncmp(version, "3.11.", 5) == 0) {
      return reinterpret_cast<Bind>(dlsym(RTLD_DEFAULT, "_PyThreadState_SetCurrent"));
    }
    if (std::strncmp(version, "3.10.", 5) == 0) {
      return reinterpret_cast<Bind>(dlsym(RTLD_DEFAULT, "_PyThreadState_Init"));
    }
    return static_cast<Bind>(nullptr);
  }();
  if (bind != nullptr) bind(state);
}

// Deletes `state`, this thread's current one (the GIL held), and lets the
// GIL go (PyThreadState_DeleteCurrent is outside the limited API).
void give_back(PyThreadState* state) noexcept {
  PyThreadState_Clear(state);
  PyEval_SaveThread();
  PyThreadState_Delete(state);
}

// PyGILState_Ensure, or parks this thread if finalization ended it (the
// unwinding must not cross this noexcept frame, nor its callers').
PyGILState_STATE ensure_or_park() noexcept {
  try {
    return PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park_forever();
  }
}

// This thread's own thread state for its life: one made under the GIL by
// the state maker when it runs (making one here, without the GIL, would
// allocate through the raw allocator, which under tracemalloc races with
// tracemalloc.stop(): SIGSEGV), else made by PyGILState_Ensure. Either way
// this holds one PyGILState count on it, so that PyGILState_Release never
// deletes it. At the thread's end it is deleted, if the interpreter can
// still be entered; otherwise it is left to the interpreter's own clean-up.
struct KeptState {
  bool made = false;
  PyThreadState* adopted = nullptr;  // made by the state maker

  void make() noexcept {
    made = true;
    if (PyThreadState* state = made_thread_state()) {
      bind_to_this_thread(state);
      restore_thread(state);  // the GIL
      if (PyGILState_GetThisThreadState() == state) {
        adopted = state;
        ensure_or_park();  // the kept count (the GIL is held: LOCKED)
        PyEval_SaveThread();
        return;
      }
      // Not bound to this thread (an unknown CPython): not usable with
      // PyGILState_Ensure here. Given back; made below instead.
      give_back(state);
    }
    // The kept count; if it took the GIL, let it go: the caller's Ensure
    // takes it again like every later acquisition on this thread.
    if (ensure_or_park() == PyGILState_UNLOCKED) PyEval_SaveThread();
  }

  void forget() noexcept {
    if (!made || !python_usable()) return;
    made = false;
    if (adopted != nullptr) {
      restore_thread(adopted);
      give_back(adopted);
      adopted = nullptr;
      return;
    }
    PyGILState_STATE state = ensure_or_park();  // the GIL, same state
    PyGILState_Release(PyGILState_LOCKED);  // that count; the GIL stays
    PyGILState_Release(state);  // the kept count: the state is deleted
  }
  ~KeptState() { forget(); }
};
thread_local KeptState t_kept;

// Set once Python may run under the core's locks (log callback installed).
std::atomic<bool> g_python_under_core_locks{false};

}  // namespace

bool claim_state_maker_start() noexcept {
  StateMaker* m = g_maker;
  std::lock_guard<std::mutex> lock(m->mutex);
  if (m->running || m->starting || m->stopping) return false;
  m->starting = true;
  return true;
}

void run_state_maker() {
  StateMaker* m = g_maker;
  {
    std::lock_guard<std::mutex> lock(m->mutex);
    m->starting = false;
    if (m->running || m->stopping) return;
    m->running = true;
    m->made.notify_all();  // requests made while it started
  }
  pthread_setname_np(pthread_self(), "tsb-states");
  PyInterpreterState* interpreter = PyInterpreterState_Get();
  GilRelease release;  // waits without the GIL
  std::unique_lock<std::mutex> lock(m->mutex);
  for (;;) {
    m->wake.wait(lock, [m] { return m->stopping || !m->requests.empty(); });
    if (m->stopping) break;
    std::deque<StateRequest*> batch;
    batch.swap(m->requests);
    lock.unlock();
    {
      GilAcquire gil;
      for (StateRequest* request : batch) {
        request->state = PyThreadState_New(interpreter);
      }
    }
    lock.lock();
    for (StateRequest* request : batch) request->answered = true;
    m->made.notify_all();
  }
  for (StateRequest* request : m->requests) request->answered = true;  // none
  m->requests.clear();
  m->running = false;
  m->made.notify_all();
}

void stop_state_maker() noexcept {
  GilRelease release;  // the maker may wait for the GIL
  StateMaker* m = g_maker;
  std::unique_lock<std::mutex> lock(m->mutex);
  m->stopping = true;
  m->wake.notify_all();
  m->made.wait_for(lock, std::chrono::seconds(5), [m] { return !m->running; });
}

void state_maker_after_fork_in_child() noexcept {
  StateMaker* old = g_maker;
  auto* fresh = new StateMaker();
  fresh->stopping = old->stopping;
  g_maker = fresh;  // `old` (its mutex perhaps held by a gone thread) leaks
}

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

GilAcquire::GilAcquire() noexcept : state_(ensure_or_park()) {}

ThreadGil::ThreadGil() noexcept {
  if (!t_kept.made) t_kept.make();
  state_ = ensure_or_park();
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

#include "deferred_release.h"
#include "thread_state.h"

#include <dlfcn.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tsb {
namespace {

// How long parked references wait for Python's own drains (at the next
// submit or response wait, which cost nothing extra) before the releaser
// thread takes the GIL to drop them. Bounds how long an input outlives its
// request in a program that does nothing more.
constexpr auto kGrace = std::chrono::milliseconds(20);

struct State {
  std::mutex mutex;
  std::condition_variable wake;    // something parked, or stopping
  std::condition_variable exited;  // the releaser thread has ended
  std::vector<nanobind::object> parked;
  bool starting = false;  // a Python thread was started to run it
  bool running = false;   // a releaser thread exists in this process
  bool idle = false;      // the releaser waits for a first parked reference
  bool stopping = false;  // the interpreter is about to finalize
  unsigned long long wakes = 0;  // releaser wake-ups asked by defer_release
};

// Heap-allocated and never freed: parked references must not be released by
// a static destructor after the interpreter is gone. Replaced (the old one
// leaked) only in a forked child, where no other thread exists.
State* g_state = new State();

// fork(): only the forking thread goes on in the child. The state is locked
// across the fork (so the child's copy of `parked` is consistent), and the
// child starts from a fresh state holding the same parked references and no
// releaser thread (one is started on the next park).
}  // namespace

void deferred_release_before_fork() noexcept { g_state->mutex.lock(); }
void deferred_release_after_fork_in_parent() noexcept {
  g_state->mutex.unlock();
}
void deferred_release_after_fork_in_child() noexcept {
  State* old = g_state;
  auto* fresh = new State();
  fresh->parked.swap(old->parked);
  fresh->stopping = old->stopping;
  g_state = fresh;  // `old` (its mutex held by the parent's thread) leaks
}

bool holds_gil() noexcept {
  if (!Py_IsInitialized()) return false;
#ifdef Py_LIMITED_API
  // PyGILState_Check() is outside the limited API (abi3 wheels), though
  // every CPython since 3.4 exports it: looked up once by name. Without it,
  // the answer is "no": references are then parked, never dropped unsafely.
  using Check = int (*)();
  static const Check check =
      reinterpret_cast<Check>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
  return check != nullptr && check() != 0;
#else
  return PyGILState_Check() != 0;
#endif
}

void defer_release(std::vector<nanobind::object>&& objects) noexcept {
  if (objects.empty()) return;
  State* s = g_state;
  std::lock_guard<std::mutex> lock(s->mutex);
  for (auto& o : objects) s->parked.push_back(std::move(o));  // steals refs
  objects.clear();  // only moved-from (null) handles remain
  // Without a releaser (none started yet, or stopping) the references wait
  // for the next drain in Python.
  if (s->running && s->idle) {
    // Only a releaser waiting for its first reference needs waking: during
    // its grace it wakes by itself, and waking it for every request's
    // inputs would cost a futex call and a context switch per request.
    s->idle = false;
    ++s->wakes;
    s->wake.notify_one();
  }
}

#ifdef TRITONSERVER_TESTING
unsigned long long deferred_release_wakes() noexcept {
  State* s = g_state;
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->wakes;
}
#endif

bool claim_releaser_start() noexcept {
  State* s = g_state;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->running || s->starting || s->stopping) return false;
  s->starting = true;
  return true;
}

void run_releaser() {
  State* s = g_state;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->starting = false;
    if (s->running || s->stopping) return;
    s->running = true;
  }
  pthread_setname_np(pthread_self(), "tsb-releaser");  // seen in ps, gdb, /proc
  GilRelease release;  // waits without the GIL
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    // Asleep until defer_release clears `idle` (or stopping). Once woken,
    // the releaser waits out its grace even if a drain in Python took the
    // references first: sleeping again at once would have every request
    // park into a fresh wake-up whenever this thread is slow to run (seen
    // on a loaded machine: a wake per ~7 requests).
    if (!s->stopping && s->parked.empty()) {
      s->idle = true;
      s->wake.wait(lock, [s] { return s->stopping || !s->idle; });
    }
    s->idle = false;
    if (s->stopping) break;
    s->wake.wait_for(lock, kGrace, [s] { return s->stopping; });
    if (s->stopping) break;
    if (s->parked.empty()) continue;  // a drain in Python took them
    lock.unlock();
    {
      // This Python thread's own state (PyGILState_Ensure allocates
      // nothing here).
      GilAcquire gil;
      std::vector<nanobind::object> doomed;
      {
        std::lock_guard<std::mutex> relock(s->mutex);
        doomed.swap(s->parked);
      }
      // `doomed` is released here, with the GIL.
    }
    lock.lock();
  }
  s->running = false;
  s->exited.notify_all();
}

void drain_deferred() {
  std::vector<nanobind::object> doomed;
  {
    State* s = g_state;
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->parked.empty()) return;
    doomed.swap(s->parked);
  }
  // `doomed` goes out of scope here, with the GIL held by our caller.
}

void stop_deferred_releaser() {
  {
    GilRelease release;  // the releaser may wait for it
    State* s = g_state;
    std::unique_lock<std::mutex> lock(s->mutex);
    s->stopping = true;
    s->wake.notify_all();
    // Bounded: a finalizer run by the releaser could block on anything.
    s->exited.wait_for(lock, std::chrono::seconds(5),
                       [s] { return !s->running; });
  }
  drain_deferred();
}

}  // namespace tsb

// A short, bounded poll before a waiter sleeps, and the sleep itself
// (wait_until_ready(), a condition-variable wait with an optional limit).
//
// A thread that sleeps on a condition variable pays for its wake-up: the
// notifier's futex syscall, the scheduler, and, where the waiter's core went
// idle, an inter-processor interrupt (on a virtual machine, a halted vCPU
// that the hypervisor must reschedule: tens of microseconds). A small
// request to a fast model completes sooner than that, so the sync waiter
// first polls, with the GIL released, for up to kSpinLimit; only a wait that
// outlasts the poll sleeps.
//
// Two bounds keep the poll from wasting a core:
// - per thread: after kMissesToBackOff waits in a row outlasted the poll (a
//   slow model), the thread polls only on every kProbeEvery-th wait until a
//   poll succeeds again, so slow models cost at most
//   kSpinLimit / kProbeEvery of polling per wait;
// - per process: threads poll only while no more threads are waiting
//   (polling or asleep) than one fewer than the processors this process may
//   use (its CPU affinity and cgroup CPU quota, not the machine's count; at
//   least one), and a poll stops as soon as more start waiting. Their
//   responses then need the processors: Triton's threads produce them and
//   each woken waiter must run, which a polling thread would hold up.
//
// TRITONSERVER_SPIN_WAIT=0 in the environment (read once, at the first
// wait) turns polling off: every wait sleeps at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace tsb {

// fork() hook (fork_hooks.cc): a child starts with no thread waiting.
void spin_wait_after_fork_in_child() noexcept;

// Waits on `cv` until `ready()` or `timeout_s` passes (forever when
// negative); true when ready.
template <typename Ready>
bool wait_until_ready(std::unique_lock<std::mutex>& lock,
                      std::condition_variable& cv, double timeout_s,
                      Ready ready) {
  if (timeout_s < 0) {
    cv.wait(lock, ready);
    return true;
  }
  return cv.wait_for(lock, std::chrono::duration<double>(timeout_s), ready);
}

// One processor hint inside a busy-wait loop (lets a sibling hyperthread
// run); a no-op where the architecture has none.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// One thread's blocking wait, from its start to its end (polling, then
// sleeping): constructed by the waiter before it polls, destroyed when it
// has its result.
class SpinWait {
 public:
  static constexpr std::chrono::microseconds kSpinLimit{200};
  static constexpr uint32_t kMissesToBackOff = 8;
  static constexpr uint32_t kProbeEvery = 16;

  SpinWait() noexcept { waiting().fetch_add(1, std::memory_order_relaxed); }
  ~SpinWait() { waiting().fetch_sub(1, std::memory_order_relaxed); }
  SpinWait(const SpinWait&) = delete;
  SpinWait& operator=(const SpinWait&) = delete;

  // Polls `ready()` for at most kSpinLimit (less when `timeout_s` is
  // shorter; negative means no limit) when this thread's recent waits make
  // it worthwhile and no more threads wait than processors can spare; stops
  // early when more start waiting. True when `ready()` is true by the end.
  template <typename Ready>
  bool poll(Ready ready, double timeout_s) const noexcept {
    Recent& recent = this_thread();
    if (crowded() || (recent.misses >= kMissesToBackOff &&
                      ++recent.skipped % kProbeEvery != 0)) {
      return ready();
    }
    using Clock = std::chrono::steady_clock;
    auto limit = std::chrono::duration_cast<Clock::duration>(kSpinLimit);
    if (timeout_s >= 0 && timeout_s < 1e-6 * kSpinLimit.count()) {
      limit = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(timeout_s));
    }
    const auto deadline = Clock::now() + limit;
    do {
      if (ready()) {
        recent = Recent{};
        return true;
      }
      for (int i = 0; i < 16; ++i) cpu_relax();
    } while (Clock::now() < deadline && !crowded());
    if (ready()) return true;
    if (!crowded()) ++recent.misses;  // cut short by other waiters: no miss
    return false;
  }

 private:
  struct Recent {
    uint32_t misses = 0;   // waits in a row that outlasted the poll
    uint32_t skipped = 0;  // waits since this thread backed off
  };
  static Recent& this_thread() noexcept {
    thread_local Recent recent;
    return recent;
  }
  // Threads in a blocking wait in this process (spin_wait.cc; a child of
  // fork() starts from zero: the parent's waiting threads are not in it).
  static std::atomic<int>& waiting() noexcept;
  // More threads wait than leave a processor to the threads that do the
  // work (Triton's, the GIL's holder): polling would take it from them.
  static bool crowded() noexcept {
    static const int most = pollers_allowed();
    return waiting().load(std::memory_order_relaxed) > most;
  }

 public:
  // Threads in a blocking wait now (a testing hook: a test acts once a
  // thread waits).
  static int waiting_now() noexcept {
    return waiting().load(std::memory_order_relaxed);
  }
  // How many threads may poll at once: one fewer than the processors this
  // process may use (at least one), or 0 when TRITONSERVER_SPIN_WAIT=0.
  static int pollers_allowed() noexcept;
  // The processors this process may run on: its affinity mask, capped by a
  // cgroup CPU quota; the machine's count when neither can be read.
  static int usable_cpus() noexcept;
};

}  // namespace tsb

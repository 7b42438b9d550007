// A short, bounded poll before a waiter sleeps.
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
// - per process: at most one thread fewer than the machine has processors
//   polls at a time (at least one); the others sleep at once, leaving the
//   processors to the threads that do the work (Triton's, and the thread
//   holding the GIL).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

namespace tsb {

// One processor hint inside a busy-wait loop (lets a sibling hyperthread
// run); a no-op where the architecture has none.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class SpinWait {
 public:
  static constexpr std::chrono::microseconds kSpinLimit{200};
  static constexpr uint32_t kMissesToBackOff = 8;
  static constexpr uint32_t kProbeEvery = 16;

  // Polls `ready()` for at most kSpinLimit (less when `timeout_s` is
  // shorter; negative means no limit) when this thread's recent waits make
  // it worthwhile and a processor is free for it. True when `ready()` is
  // true by the end.
  template <typename Ready>
  static bool poll(Ready ready, double timeout_s) noexcept {
    Recent& recent = this_thread();
    if (recent.misses >= kMissesToBackOff &&
        ++recent.skipped % kProbeEvery != 0) {
      return ready();
    }
    Slot slot;
    if (!slot.taken) return ready();
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
    } while (Clock::now() < deadline);
    if (ready()) return true;
    ++recent.misses;
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

  // One of the process's polling slots, for the scope of one poll.
  struct Slot {
    static std::atomic<int>& polling() noexcept {
      static std::atomic<int> count{0};
      return count;
    }
    static int limit() noexcept {
      static const int n = [] {
        const int cpus = static_cast<int>(std::thread::hardware_concurrency());
        return cpus > 2 ? cpus - 1 : 1;
      }();
      return n;
    }
    Slot() : taken(polling().fetch_add(1) < limit()) {
      if (!taken) polling().fetch_sub(1);
    }
    ~Slot() {
      if (taken) polling().fetch_sub(1);
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    const bool taken;
  };
};

}  // namespace tsb

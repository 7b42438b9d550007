#include "spin_wait.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace tsb {
namespace {

std::atomic<int> g_waiting{0};


// The processors a cgroup CPU quota allows (rounded up), or 0 for none:
// cgroup v2's cpu.max ("QUOTA PERIOD" or "max PERIOD"), else v1's pair.
int quota_cpus() noexcept {
  long long quota = -1, period = 0;
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    char q[32] = {0};
    if (std::fscanf(f, "%31s %lld", q, &period) == 2 && std::strcmp(q, "max") != 0) {
      quota = std::atoll(q);
    }
    std::fclose(f);
  } else {
    FILE* fq = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
    FILE* fp = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    if (fq && fp && (std::fscanf(fq, "%lld", &quota) != 1 || std::fscanf(fp, "%lld", &period) != 1)) {
      quota = -1;
    }
    if (fq) std::fclose(fq);
    if (fp) std::fclose(fp);
  }
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<int>((quota + period - 1) / period);
}

}  // namespace

// Only the forking thread goes on in a child, and it is not waiting.
void spin_wait_after_fork_in_child() noexcept {
  g_waiting.store(0, std::memory_order_relaxed);
}

int SpinWait::usable_cpus() noexcept {
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = static_cast<int>(std::thread::hardware_concurrency());
  const int quota = quota_cpus();
  if (quota > 0 && quota < cpus) cpus = quota;
  return cpus > 0 ? cpus : 1;
}

std::atomic<int>& SpinWait::waiting() noexcept { return g_waiting; }

int SpinWait::pollers_allowed() noexcept {
  const char* setting = std::getenv("TRITONSERVER_SPIN_WAIT");
  if (setting != nullptr && std::strcmp(setting, "0") == 0) return 0;
  const int cpus = usable_cpus();
  return cpus > 2 ? cpus - 1 : 1;
}

}  // namespace tsb

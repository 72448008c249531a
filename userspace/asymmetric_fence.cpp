// asymmetric_fence.cpp -- membarrier(2) registration and the heavy side
// of the asymmetric [N1] barrier (see asymmetric_fence.hpp).
#include "asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

#include "env_choice.hpp"

namespace parkway::detail {

namespace {

long membarrier(int cmd) noexcept { return syscall(SYS_membarrier, cmd, 0u, 0); }

bool try_enable() noexcept {
  if (env_choice("PARKWAY_MEMBARRIER", {"0", "1"}, "membarrier is used where the kernel has it") == 0) return false;
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) || !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
    return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

}  // namespace

bool init_asymmetric_fence() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { g_asymmetric_fence.store(try_enable(), std::memory_order_relaxed); });
  return asymmetric_fence_on();
}

namespace {
// The registration costs a process that has one thread a few microseconds;
// one that has more waits for an RCU grace period (the kernel's
// sync_runqueues_membarrier_state): 8-21 ms on an idle two-CPU host, and
// seconds on one loaded with other work. So it is made when the library
// loads, while the process normally has one thread, and the first Runtime
// finds it done. (The trace recorder, which starts a thread at load too,
// calls init_asymmetric_fence before it does.)
struct RegisterAtLoad {
  RegisterAtLoad() noexcept { (void)init_asymmetric_fence(); }
};
__attribute__((init_priority(101))) const RegisterAtLoad g_register_at_load;
}  // namespace

bool heavy_fence() noexcept {
  if (!asymmetric_fence_on()) return true;  // the light sides fence themselves
  if (g_heavy_fence_fails_for_test.load(std::memory_order_relaxed)) [[unlikely]] {
    errno = ENOMEM;
    return false;
  }
  return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

}  // namespace parkway::detail

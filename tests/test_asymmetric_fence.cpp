// test_asymmetric_fence.cpp -- the asymmetric [N1] barrier
// (userspace/asymmetric_fence.hpp): which mode a runtime runs in, and a
// store-buffering litmus test of the barrier pair itself.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/syscall.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "asymmetric_fence.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {

using parkway::detail::asymmetric_fence_on;

// Creating a runtime decides the mode: membarrier when the kernel has it
// and PARKWAY_MEMBARRIER=0 is not set (this suite also runs with it set).
TEST(AsymmetricFence, ModeFollowsKernelAndEnvironment) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const char* e = std::getenv("PARKWAY_MEMBARRIER");
  const bool off_by_env = e && std::strcmp(e, "0") == 0;
  const long cmds = syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0u, 0);
  const bool kernel_has = cmds > 0 && (cmds & 8) && (cmds & 16);  // PRIVATE_EXPEDITED, its REGISTER
  std::printf("membarrier commands 0x%lx, PARKWAY_MEMBARRIER=%s: asymmetric %s\n", cmds, e ? e : "(unset)",
              asymmetric_fence_on() ? "on" : "off");
  EXPECT_EQ(asymmetric_fence_on(), kernel_has && !off_by_env);
  EXPECT_EQ(rt.run([] { return 7; }), 7);
}

// The registration is made when the library loads, while the process
// has one thread (with more it waits for an RCU grace period: 8-21 ms on
// an idle host, seconds on a loaded one): by the time this program's own
// initialisers run, before any runtime exists, the expedited command
// works. A process that is not registered gets EPERM from it.
const int g_expedited_at_static_init = [] {
  return syscall(SYS_membarrier, 8 /* MEMBARRIER_CMD_PRIVATE_EXPEDITED */, 0u, 0) == 0 ? 0 : errno;
}();

TEST(AsymmetricFence, RegisteredWhenTheLibraryLoads) {
  const char* e = std::getenv("PARKWAY_MEMBARRIER");
  const bool off_by_env = e && std::strcmp(e, "0") == 0;
  const long cmds = syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0u, 0);
  const bool kernel_has = cmds > 0 && (cmds & 8) && (cmds & 16);
  if (!kernel_has) GTEST_SKIP() << "the kernel has no expedited private membarrier";
  if (off_by_env)
    EXPECT_EQ(g_expedited_at_static_init, EPERM) << "PARKWAY_MEMBARRIER=0 registers nothing";
  else
    EXPECT_EQ(g_expedited_at_static_init, 0) << "before any runtime: " << std::strerror(g_expedited_at_static_init);
}

// Store buffering: A stores x then loads y with only producer_fence()
// between; B stores y, then heavy_fence() (membarrier when on) after a
// full fence, then loads x. Both loads reading 0 is the lost wakeup the
// pair must exclude. A control run with B's membarrier left out must
// show the reordering (x86 store buffers do it): if it never does, the
// harness cannot tell a working barrier from a missing one, and the test
// counts as skipped.
struct Litmus {
  alignas(64) std::atomic<int> x{0};
  alignas(64) std::atomic<int> y{0};
  alignas(64) std::atomic<int> go{0};
  alignas(64) std::atomic<int> done{0};
  int ra = 0;
};

// Two threads only (this one is B), so both spin on their own CPU of two.
// Stops early after 2 s; returns the weak outcomes and sets *ran.
long run_litmus(int iters, bool heavy, int* ran) {
  Litmus L;
  long weak = 0;
  std::thread a([&] {
    for (int i = 1;; ++i) {
      int g;
      while ((g = L.go.load(std::memory_order_acquire)) != i && g >= 0) {
      }
      if (g < 0) return;
      L.x.store(1, std::memory_order_relaxed);
      parkway::detail::producer_fence();
      L.ra = L.y.load(std::memory_order_relaxed);
      L.done.store(i, std::memory_order_release);
    }
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int i = 1;
  for (; i <= iters && std::chrono::steady_clock::now() < end; ++i) {
    L.x.store(0, std::memory_order_relaxed);
    L.y.store(0, std::memory_order_relaxed);
    L.go.store(i, std::memory_order_release);
    L.y.exchange(1, std::memory_order_seq_cst);  // the parker's RMW
    if (heavy && !parkway::detail::heavy_fence()) ADD_FAILURE() << "membarrier failed";
    int rb = L.x.load(std::memory_order_relaxed);
    while (L.done.load(std::memory_order_acquire) != i) {
    }
    if (L.ra == 0 && rb == 0) ++weak;
  }
  *ran = i - 1;
  L.go.store(-1, std::memory_order_release);
  a.join();
  return weak;
}

TEST(AsymmetricFence, StoreBufferingLitmus) {
  parkway::Runtime rt(parkway::Options{.workers = 1});  // decides the mode
  if (!asymmetric_fence_on()) {
    GTEST_SKIP() << "asymmetric mode off (no membarrier or PARKWAY_MEMBARRIER=0): the producer uses a full fence";
  }
  const int iters = 200000 / pwtest::kSlow;
  int nc = 0, nw = 0;
  long control = run_litmus(iters, /*heavy=*/false, &nc);
  long weak = run_litmus(iters, /*heavy=*/true, &nw);
  std::printf("both loads 0: %ld of %d without membarrier (control), %ld of %d with it\n", control, nc, weak, nw);
  EXPECT_GT(nw, 0);
  EXPECT_EQ(weak, 0) << "membarrier did not order the producer's store before its load";
  if (control == 0)
    GTEST_SKIP() << "the control run never showed the reordering in " << nc
                 << " rounds: this harness cannot tell whether membarrier orders anything here";
}

// membarrier(2) may fail (ENOMEM); heavy_fence() then says so and each
// caller falls back: a parker sleeps timed, the last searcher wakes, a
// thief gives up (tests/test_deque.cpp). Bursts of work with idle gaps in
// between must all run, and the pool must still go to sleep between them.
TEST(AsymmetricFence, HeavyFenceFailureFallsBack) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  if (!asymmetric_fence_on()) {
    std::printf("asymmetric mode off: heavy_fence() is a no-op that cannot fail\n");
    EXPECT_TRUE(parkway::detail::heavy_fence());
    return;
  }
  pwtest::Watchdog w("AsymmetricFence.HeavyFenceFailureFallsBack", 120);
  parkway::detail::g_heavy_fence_fails_for_test.store(true);
  EXPECT_FALSE(parkway::detail::heavy_fence());
  const auto before = rt.stats();
  std::atomic<long> ran{0};
  for (int burst = 0; burst < 20; ++burst) {
    std::vector<parkway::Future<void>> fs;
    for (int i = 0; i < 50; ++i) fs.push_back(rt.submit([&] { ran.fetch_add(1); }));
    long r = rt.run([] {  // spawns: thieves meet the gate
      parkway::TaskGroup g;
      std::atomic<long> n{0};
      for (int i = 0; i < 200; ++i) g.spawn([&] { n.fetch_add(1); });
      g.wait();
      return n.load();
    });
    EXPECT_EQ(r, 200);
    for (auto& f : fs) f.get();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // idle: workers park (timed)
  }
  parkway::detail::g_heavy_fence_fails_for_test.store(false);
  const auto after = rt.stats();
  EXPECT_EQ(ran.load(), 20 * 50);
  EXPECT_GT(after.total.parks, before.total.parks) << "the pool never parked with the fallback";
  std::printf("parks %llu during the bursts\n", (unsigned long long)(after.total.parks - before.total.parks));
}

}  // namespace

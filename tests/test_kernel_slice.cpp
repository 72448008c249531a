// Options::worker_slice_us: workers ask the kernel for the slice they
// were given, and a worker with a ring ends its slice at a task boundary
// ([Y1]; userspace/kernel_slice.hpp).
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "kernel_slice.hpp"
#include "sched_ext_link.hpp"
#include "parkway/io.hpp"
#include "parkway/parkway.hpp"

namespace {

// The slice reported on each of a runtime's workers (every task that ran
// saw the same, or 1 if they differed).
std::uint64_t workers_slice(parkway::Runtime& rt) {
  std::atomic<std::uint64_t> seen{0};
  parkway::TaskGroup g(rt);
  for (int i = 0; i < 64; ++i)
    g.spawn([&] {
      const std::uint64_t s = parkway::detail::kernel_slice_ns();
      std::uint64_t expected = 0;
      if (!seen.compare_exchange_strong(expected, s) && expected != s) seen.store(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // let the other worker take some
    });
  g.wait();
  return seen.load();
}

// Does this kernel keep a custom slice for a fair-class thread (6.12+)?
bool kernel_keeps_custom_slices() {
  bool kept = false;
  std::thread([&] {
    kept = parkway::detail::request_kernel_slice(250) && parkway::detail::kernel_slice_ns() == 250000;
  }).join();
  return kept;
}

}  // namespace

TEST(KernelSlice, WorkersAskForTheSliceTheyAreGiven) {
  if (!kernel_keeps_custom_slices())
    GTEST_SKIP() << "this kernel keeps no custom slice for fair-class threads (Linux 6.12+ does)";
  {
    parkway::Runtime rt(parkway::Options{.workers = 2, .worker_slice_us = 250});
    EXPECT_EQ(workers_slice(rt), 250000u);
  }
  {  // the default
    parkway::Runtime rt(parkway::Options{.workers = 2});
    EXPECT_EQ(workers_slice(rt), 300000u);
  }
  {  // 0 leaves the workers with what a new thread of the process gets
    std::uint64_t plain = 0;
    std::thread([&] { plain = parkway::detail::kernel_slice_ns(); }).join();
    parkway::Runtime rt(parkway::Options{.workers = 2, .worker_slice_us = 0});
    EXPECT_EQ(workers_slice(rt), plain);
    EXPECT_NE(plain, 250000u);
  }
  {  // the environment overrides the option
    ::setenv("PARKWAY_WORKER_SLICE_US", "300", 1);
    parkway::Runtime rt(parkway::Options{.workers = 2, .worker_slice_us = 250});
    ::unsetenv("PARKWAY_WORKER_SLICE_US");
    EXPECT_EQ(workers_slice(rt), 300000u);
  }
}

namespace {

parkway::Task<void> spin_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
  co_return;
}

// On one worker: an I/O operation (the worker gets its ring), then `n`
// tasks of `d` each, one after another. Returns the worker's slice yields.
// PARKWAY_WORKER_SLICE_US, which would override `slice_us`, is set aside.
std::uint64_t yields_over_a_task_stream(unsigned slice_us, bool with_io, int n, std::chrono::microseconds d) {
  const char* env = std::getenv("PARKWAY_WORKER_SLICE_US");
  const std::string saved = env ? env : "";
  ::unsetenv("PARKWAY_WORKER_SLICE_US");
  parkway::Runtime rt(parkway::Options{.workers = 1, .worker_slice_us = slice_us});
  if (env) ::setenv("PARKWAY_WORKER_SLICE_US", saved.c_str(), 1);
  parkway::sync_wait(rt, [](bool io, int n, std::chrono::microseconds d) -> parkway::Task<void> {
    if (io) {
      auto r = co_await parkway::io::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(r.ok());
    }
    for (int i = 0; i < n; ++i) co_await parkway::spawn(spin_for(d));
  }(with_io, n, d));
  return rt.stats().total.slice_yields;
}

}  // namespace

// [Y1] A worker with a ring in a stream of tasks gives up its CPU at the
// end of each slice, between two tasks, not at every task and not never
// (docs/design/parking.md, "Ending the slice at a task boundary").
TEST(KernelSlice, AWorkerWithARingYieldsAtTheEndOfEachSlice) {
  using namespace std::chrono_literals;
  if (!parkway::detail::in_fair_class())
    GTEST_SKIP() << "the tests run outside the kernel's fair class (chrt?): workers keep no slice of their own";
  const int tasks = 600;  // 50 us each: 30 ms, about 100 slices of 300 us
  const std::uint64_t y = yields_over_a_task_stream(300, true, tasks, 50us);
  // One slice (300 us) spans at least two task boundaries, however the
  // thread is scheduled, and the stream lasts at least 30 ms.
  EXPECT_GE(y, 10u) << "the worker ran 30 ms of tasks and never ended its slice";
  EXPECT_LE(y, std::uint64_t(tasks / 2)) << "the worker yielded at nearly every task";
  std::printf("slice yields over %d tasks of 50 us: %llu\n", tasks, (unsigned long long)y);
}

TEST(KernelSlice, NoSliceYieldsWithTheKernelsSliceOrWithoutARing) {
  using namespace std::chrono_literals;
  EXPECT_EQ(yields_over_a_task_stream(0, true, 300, 50us), 0u) << "worker_slice_us = 0 leaves the slice to the kernel";
  EXPECT_EQ(yields_over_a_task_stream(300, false, 300, 50us), 0u)
      << "a worker without a ring has no scheduling point that keeps the slice";
}

// Outside the fair class there is no slice to keep: workers that inherit
// SCHED_IDLE from the thread that starts them never yield.
TEST(KernelSlice, NoSliceYieldsOutsideTheFairClass) {
  using namespace std::chrono_literals;
  std::uint64_t y = ~0ull;
  bool idle = false;
  std::thread([&] {
    sched_param sp{};
    idle = sched_setscheduler(0, SCHED_IDLE, &sp) == 0;
    if (idle) y = yields_over_a_task_stream(300, true, 300, 50us);
  }).join();
  if (!idle) GTEST_SKIP() << "sched_setscheduler(SCHED_IDLE) refused here";
  EXPECT_EQ(y, 0u) << "a SCHED_IDLE worker kept a fair-class slice";
}

// A sched_ext scheduler in switch-all mode runs every SCHED_OTHER thread
// while the policy still reads SCHED_OTHER: then there is no fair-class
// slice to keep (in_fair_class reads /sys/kernel/sched_ext like this).
TEST(KernelSlice, ASwitchAllSchedExtSchedulerTakesTheFairClass) {
  char tmpl[] = "/tmp/parkway-scx-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto put = [&](const char* name, const char* text) {
    FILE* f = std::fopen((dir + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  using parkway::detail::sched_ext_runs_fair_tasks;
  EXPECT_FALSE(sched_ext_runs_fair_tasks((dir + "/absent").c_str())) << "no sched_ext in the kernel";
  put("state", "enabled\n");
  put("switch_all", "1\n");
  EXPECT_TRUE(sched_ext_runs_fair_tasks(dir.c_str()));
  put("switch_all", "0\n");
  EXPECT_FALSE(sched_ext_runs_fair_tasks(dir.c_str())) << "partial mode: only SCHED_EXT threads";
  put("state", "disabled\n");
  put("switch_all", "1\n");
  EXPECT_FALSE(sched_ext_runs_fair_tasks(dir.c_str()));
  std::remove((dir + "/state").c_str());
  std::remove((dir + "/switch_all").c_str());
  rmdir(dir.c_str());
}

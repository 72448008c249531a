// Options::worker_slice_us: workers ask the kernel for the slice they
// were given (userspace/kernel_slice.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "kernel_slice.hpp"
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

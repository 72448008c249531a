// test_stack.cpp -- worker stacks: Options::stack_size, and nested waits
// that run deep on a stack of a given size.
#include <gtest/gtest.h>
#include <alloca.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace {
// The stack size the calling thread was created with.
std::size_t own_stack_size() {
  pthread_attr_t a;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return 0;
  std::size_t n = 0;
  pthread_attr_getstacksize(&a, &n);
  pthread_attr_destroy(&a);
  return n;
}
// Uses about `kib` KiB of stack, touching every page.
__attribute__((noinline)) int deep(int kib) {
  volatile char page[1024];
  page[0] = char(kib);
  if (kib <= 1) return page[0];
  return deep(kib - 1) + page[0] - char(kib) + 1;
}
}  // namespace

// Options::stack_size gives every worker a stack of at least that size
// (rounded up to pages; glibc may reuse a larger cached stack, so only a
// lower bound is certain); 0 keeps what a new thread gets.
TEST(Stack, StackSizeIsEveryWorkersStack) {
  std::size_t deflt = 0;
  std::thread([&] { deflt = own_stack_size(); }).join();
  parkway::Runtime plain(parkway::Options{.workers = 2});
  EXPECT_GE(plain.run([] { return own_stack_size(); }), deflt);

  const std::size_t big = std::size_t(64) << 20;  // 64 MiB: far above the usual 8 MiB default
  parkway::Runtime rt(parkway::Options{.workers = 2, .stack_size = big + 100});
  std::atomic<int> seen{0}, right{0};
  parkway::parallel_for(rt, 0, 64, 1, [&](std::size_t) {
    seen.fetch_add(1);
    std::size_t s = own_stack_size();
    if (s >= big + 100) right.fetch_add(1);
  });
  EXPECT_EQ(seen.load(), 64);
  EXPECT_EQ(right.load(), 64);
  // 32 MiB of frames: would overflow an 8 MiB stack.
  if (!pwtest::kSanitized) {
    EXPECT_EQ(rt.run([] { return deep(32 << 10); }), 32 << 10);
  }

  parkway::Runtime small(parkway::Options{.workers = 1, .stack_size = parkway::kMinStackSize});
  EXPECT_EQ(small.run([] { return pwtest::fib(15); }), 610);
  EXPECT_GE(small.run([] { return own_stack_size(); }), parkway::kMinStackSize);
}

namespace {
// Touches `kib` KiB of the caller's stack (one write per page).
#define PW_USE_STACK(kib)                                                      \
  do {                                                                         \
    volatile char* f_ = static_cast<volatile char*>(alloca(std::size_t(kib) << 10)); \
    for (std::size_t k_ = 0; k_ < (std::size_t(kib) << 10); k_ += 4096) f_[k_] = 1; \
  } while (0)
}  // namespace

// Nested waits far down a stack of a given size: one worker, groups and
// futures alternating past the middle of a 2 MiB stack; each wait runs
// the task it waits for from its own deque.
TEST(Stack, NestedWaitsDeepInASmallStack) {
  pwtest::Watchdog dog("Stack.NestedWaitsDeepInASmallStack", 60);
  const std::size_t stack = std::size_t(2) << 20;
  parkway::Runtime rt(parkway::Options{.workers = 1, .stack_size = stack});
  struct Nest {
    parkway::Runtime& rt;
    std::size_t used_at_bottom = 0;  // stack in use at the innermost level
    long group(int d) {
      PW_USE_STACK(8);
      if (d == 0) {
        pthread_attr_t a;
        void* lo = nullptr;
        std::size_t size = 0;
        if (pthread_getattr_np(pthread_self(), &a) == 0) {
          pthread_attr_getstack(&a, &lo, &size);
          pthread_attr_destroy(&a);
        }
        used_at_bottom = static_cast<char*>(lo) + size - static_cast<char*>(__builtin_frame_address(0));
        return 0;
      }
      long r = 0;
      parkway::TaskGroup g;
      g.spawn([&] { r = future(d - 1); });
      g.wait();
      return r + 1;
    }
    long future(int d) {
      PW_USE_STACK(8);
      if (d == 0) return 0;
      return rt.submit([this, d] { return group(d - 1); }).get() + 1;
    }
  } nest{rt};
  const int depth = 150;  // about 1.2 MiB of frames (sanitized builds: about 1.4)
  EXPECT_EQ(rt.run([&] { return nest.group(depth); }), depth);
  EXPECT_GT(nest.used_at_bottom, stack / 2) << "the frames did not reach the middle of the stack";
}

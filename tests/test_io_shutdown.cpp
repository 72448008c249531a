// test_io_shutdown.cpp -- shutdown ends I/O on a worker that never idles:
// the cancel comes at the first reap after stop, and every operation
// begun after stop is refused (io.md, "Shutdown", [X4]).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "io/ring.hpp"
#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"
#include "worker.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;

namespace {

// One side of a ping-pong: send 64 bytes (if `first`), receive 64, again,
// until an operation fails; records that operation's errno.
parkway::Task<void> ping(int fd, bool first, std::atomic<long>* exchanges, std::atomic<int>* ended_with,
                         std::atomic<int>* ended) {
  std::byte b[64]{};
  int err = 0;
  for (;;) {
    if (first) {
      auto w = co_await io::send_all(fd, b);
      if (!w) {
        err = w.error().value();
        break;
      }
    }
    first = true;
    std::size_t have = 0;
    while (have < sizeof b) {
      auto n = co_await io::recv(fd, std::span(b).subspan(have));
      if (!n) {
        err = n.error().value();
        break;
      }
      if (*n == 0) {
        err = -1;  // EOF: nobody closes these sockets
        break;
      }
      have += *n;
    }
    if (err != 0) break;
    exchanges->fetch_add(1, std::memory_order_relaxed);
  }
  if (err != ECANCELED) ended_with->store(err);  // any other end is kept (it stays 0 otherwise)
  ended->fetch_add(1);
}

}  // namespace

// Two coroutines of one runtime talking to each other keep their worker
// busy: it never idles, where the shutdown cancel used to come from, so
// ~Runtime waited for ever (1.7M exchanges after it began, by hand). Now
// the first reap after stop cancels the ring's operations, every one
// begun after is refused (the sends done at the co_await too), and both
// loops end with ECANCELED.
TEST(IoShutdown, ShutdownEndsIoThatKeepsItsWorkerBusy) {
  pwtest::Watchdog wd("IoShutdown.ShutdownEndsIoThatKeepsItsWorkerBusy", 120);
  for (unsigned workers : {1u, 2u}) {
    for (bool send_first : {true, false}) {
      SCOPED_TRACE(testing::Message() << workers << " worker(s), " << (send_first ? "io_send_first" : "sends on the ring"));
      constexpr int kPairs = 4;
      int fds[kPairs][2];
      for (auto& p : fds) ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p), 0);
      std::atomic<long> exchanges{0};
      std::atomic<int> ended_with{0}, ended{0};
      std::chrono::steady_clock::duration took{};
      long at_shutdown = 0;
      {
        parkway::Runtime rt(parkway::Options{.workers = workers, .io_send_first = send_first});
        for (auto& p : fds) {
          parkway::detach(ping(p[0], true, &exchanges, &ended_with, &ended), rt);
          parkway::detach(ping(p[1], false, &exchanges, &ended_with, &ended), rt);
        }
        const auto until = std::chrono::steady_clock::now() + 20s;
        while (exchanges.load() < 1000 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
        ASSERT_GE(exchanges.load(), 1000) << "the ping-pong did not get going";
        at_shutdown = exchanges.load();
        const auto t0 = std::chrono::steady_clock::now();
        rt.shutdown();
        took = std::chrono::steady_clock::now() - t0;
      }
      EXPECT_EQ(ended.load(), 2 * kPairs) << "a loop did not end";
      EXPECT_EQ(ended_with.load(), 0) << "a loop ended with errno " << ended_with.load() << ", not ECANCELED";
      EXPECT_LT(took, 10s) << (exchanges.load() - at_shutdown) << " exchanges after the shutdown began";
      for (auto& p : fds) {
        ::close(p[0]);
        ::close(p[1]);
      }
    }
  }
}

namespace {
std::atomic<int> g_sleeper_started{0}, g_sleeper_errno{-1};
parkway::Task<int> sleeps_an_hour() {
  g_sleeper_started.store(1);
  auto r = co_await io::sleep_for(std::chrono::hours(1));
  g_sleeper_errno.store(r ? 0 : r.error().value());
  co_return 1;
}
// Spawns the sleeper and throws before its join: the dropped Spawned
// waits for it (CompletionWord::wait_isolated), on the worker whose ring
// holds the sleep when that worker ran the child itself.
parkway::Task<void> drops_a_sleeper() {
  parkway::Spawned<int> s = parkway::spawn(sleeps_an_hour());
  throw std::runtime_error("fails before its join");
  co_await std::move(s);
}
}  // namespace

// A dropped Spawned's wait never parks, and a park is where a worker
// cancels its ring's I/O once shutdown has begun: without the cancel in
// the wait's own loop, ~Runtime waits for ever for a child sleeping an
// hour on that worker's ring (1 and 2 workers; the full helping wait,
// whose park makes the cancel, ends in 0.30 s). With it the sleep ends
// with ECANCELED, the drop's wait ends, and the runtime goes.
TEST(IoShutdown, ADroppedSpawnedWaitingForIoEndsAtShutdown) {
  pwtest::Watchdog wd("IoShutdown.ADroppedSpawnedWaitingForIoEndsAtShutdown", 60);
  for (unsigned workers : {1u, 2u}) {
    SCOPED_TRACE(testing::Message() << workers << " worker(s)");
    g_sleeper_started.store(0);
    g_sleeper_errno.store(-1);
    std::chrono::steady_clock::duration took{};
    testing::internal::CaptureStderr();  // the detached coroutine's exception
    {
      parkway::Runtime rt(parkway::Options{.workers = workers});
      parkway::detach(drops_a_sleeper(), rt);
      const auto until = std::chrono::steady_clock::now() + 20s;
      while (g_sleeper_started.load() == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(50ms);  // the sleep submitted, the drop waiting
      const auto t0 = std::chrono::steady_clock::now();
      rt.shutdown();
      took = std::chrono::steady_clock::now() - t0;
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(g_sleeper_started.load(), 1);
    EXPECT_EQ(g_sleeper_errno.load(), ECANCELED);
    EXPECT_LT(took, 10s);
    EXPECT_NE(err.find("fails before its join"), std::string::npos) << err;
  }
}

// A worker left running by shutdown(deadline) is detached by ~Runtime; it
// reads its ring after its last task (between_tasks) and unmaps it on
// its way out, with no synchronization towards a worker of another
// runtime that had started before. That worker's ring, made later, may
// get the same address. liburing maps and unmaps with raw system calls,
// which ThreadSanitizer does not see, so it took the new ring's first
// CQ-head store for a race with the old worker's read (IoRing::IoRing,
// "A ring's mappings"). The new ring's I/O works; under TSAN the run
// reports no race. Rounds until the kernel reuses the address.
TEST(IoShutdown, ARingMappedWhereADetachedWorkersRingWasRacesWithNothing) {
  pwtest::Watchdog w("IoShutdown.ARingMappedWhereADetachedWorkersRingWasRacesWithNothing", 60);
  int reused = 0, rounds = 0;
  for (; rounds < 8 && reused == 0; ++rounds) {
    struct Flags {
      std::atomic<bool> release{false}, started{false};
      std::atomic<const void*> head{nullptr};
    };
    auto flags = std::make_shared<Flags>();  // the detached worker may outlive the test
    std::optional<parkway::Runtime> later;
    {
      parkway::Runtime rt(parkway::Options{.workers = 1, .name = "left"});
      parkway::detach(
          [](std::shared_ptr<Flags> f) -> parkway::Task<void> {
            auto s = co_await io::sleep_for(1ms);  // makes and reaps the ring
            if (!s) co_return;
            f->head.store(parkway::detail::Worker::current()->io_ring().cq_head_for_test());
            f->started.store(true);
            while (!f->release.load()) std::this_thread::sleep_for(1ms);
          }(flags),
          rt);
      for (int i = 0; i < 10000 && !flags->started.load(); ++i) std::this_thread::sleep_for(1ms);
      ASSERT_TRUE(flags->started.load());
      const parkway::ShutdownReport r = rt.shutdown(std::chrono::steady_clock::now() - 1s);
      ASSERT_EQ(r.running, 1u);
      // The next runtime's worker starts (and takes its park word) while
      // the old one still runs; it makes no ring yet.
      later.emplace(parkway::Options{.workers = 1, .name = "after"});
      later->submit([] {}).get();
    }
    flags->release.store(true);
    std::this_thread::sleep_for(50ms);  // the detached worker leaves: no join, no flag
    const void* head = nullptr;
    parkway::spawn(
        [](const void** out) -> parkway::Task<void> {
          auto s = co_await io::sleep_for(1ms);
          EXPECT_TRUE(bool(s)) << s.error().message();
          *out = parkway::detail::Worker::current()->io_ring().cq_head_for_test();
        }(&head),
        *later)
        .get();
    ASSERT_NE(head, nullptr);
    if (head == flags->head.load()) ++reused;
  }
  std::printf("the new ring took the detached worker's ring's address in %d of %d rounds\n", reused, rounds);
  if (reused == 0) GTEST_SKIP() << "the kernel never mapped a new ring where the old one was: nothing was checked";
}

// test_io_fairness.cpp -- the worker's ring is not held up by what runs on
// the worker: operations done at their co_await (a send with room, a
// cached read, a send_file step) are no scheduling point, so a loop of
// them gives the ring its turn every 64; and a relative sleep counts from
// its co_await, not from when its SQE reaches the kernel (io.md, "Sends at
// the co_await" and "When SQEs go to the kernel").
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>
#include <thread>

#include "io_test_files.hpp"
#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

parkway::Task<void> sleep_20ms(std::atomic<bool>* started, std::atomic<bool>* done) {
  started->store(true);
  (void)co_await io::sleep_for(20ms);
  done->store(true);
}

// How the loop's operations are done at their co_await.
enum class Kind { kUdpSend, kCachedRead, kSendFile };

// Runs operations that are done at their co_await until `done` turns true
// (the sleep beside it on this worker ended) or 5 s pass; true if `done`
// was seen. Nothing in the loop suspends unless the runtime makes it.
parkway::Task<bool> loop_until(Kind kind, int fd, int file_fd, std::atomic<bool>* done, long* ops) {
  std::byte buf[4096]{};
  const auto end = Clock::now() + 5s;
  while (!done->load() && Clock::now() < end) {
    if (kind == Kind::kUdpSend) {
      auto r = co_await io::send(fd, std::span<const std::byte>(buf, 64));
      if (!r) co_return false;
    } else if (kind == Kind::kCachedRead) {
      auto r = co_await io::read(file_fd, buf, 0);
      if (!r || *r != sizeof buf) co_return false;
    } else {
      auto r = co_await io::send_file(fd, file_fd, 0, 256 * 1024);
      if (!r) co_return false;
    }
    ++*ops;
  }
  co_return done->load();
}

}  // namespace

// A 20 ms sleep on a worker whose other coroutine loops over operations
// that never suspend. Without the streak the loop was one endless task:
// the sleep (and every completion and deadline of that ring) waited for
// its end (786-1015 ms for a UDP send loop of about 0.8 s).
TEST(Io, ALoopOfOperationsDoneAtTheirCoAwaitLetsItsRingRun) {
  pwtest::Watchdog wd("Io.ALoopOfOperationsDoneAtTheirCoAwaitLetsItsRingRun", 120);
  for (Kind kind : {Kind::kUdpSend, Kind::kCachedRead, Kind::kSendFile}) {
    const char* name = kind == Kind::kUdpSend ? "UDP sends" : kind == Kind::kCachedRead ? "cached reads" : "send_file";
    SCOPED_TRACE(name);
    parkway::Runtime rt(parkway::Options{.workers = 1});
    int fd = -1, peer = -1;
    std::atomic<bool> draining{true};
    std::thread drain;
    std::optional<pwtest::TcpPair> tcp;
    pwtest::TempFile file(1 << 20);  // written just now: in the page cache
    if (kind == Kind::kUdpSend) {
      peer = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      ASSERT_GE(peer, 0);
      ASSERT_GE(fd, 0);
      sockaddr_in a = pwtest::bind_loopback(peer);
      ASSERT_NE(a.sin_port, 0);
      ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // datagrams past its buffer are dropped
    } else if (kind == Kind::kSendFile) {
      tcp.emplace(rt);
      fd = tcp->out.fd();
      const int in = tcp->in;
      drain = std::thread([in, &draining] {  // a reader that keeps up: the socket has room
        std::vector<char> b(1 << 20);
        while (draining.load()) (void)::recv(in, b.data(), b.size(), MSG_DONTWAIT);
      });
    }
    std::atomic<bool> started{false}, done{false};
    parkway::detach(sleep_20ms(&started, &done), rt);
    for (int i = 0; i < 5000 && !started.load(); ++i) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(started.load());
    long ops = 0;
    const auto t0 = Clock::now();
    const bool seen = parkway::sync_wait(rt, loop_until(kind, fd, file.fd, &done, &ops));
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    EXPECT_TRUE(seen) << "the 20 ms sleep did not end while the loop ran (" << ops << " operations in " << took
                      << " ms)";
    EXPECT_GT(ops, 0);
    draining.store(false);
    if (drain.joinable()) drain.join();
    if (peer >= 0) ::close(peer);
    if (kind == Kind::kUdpSend) ::close(fd);
  }
}

// sleep_for(300ms), then a task holds the worker for 250 ms before the
// sleep's SQE reaches the kernel (a sleep is not urgent: it waits for the
// next reap). Relative, the timer started then, and the sleep ended at
// about 550 ms; absolute (counted from the co_await), at 300.
TEST(Io, SleepForCountsFromItsCoAwait) {
  pwtest::Watchdog wd("Io.SleepForCountsFromItsCoAwait", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const auto took = parkway::sync_wait(rt, []() -> parkway::Task<Clock::duration> {
    const auto t0 = Clock::now();
    // Queued on this worker's deque; it runs once the sleep has suspended us.
    auto holder = parkway::spawn([]() -> parkway::Task<void> {
      const auto end = Clock::now() + 250ms;
      while (Clock::now() < end) {
      }
      co_return;
    }());
    (void)co_await io::sleep_for(300ms);
    const auto slept = Clock::now() - t0;
    co_await std::move(holder);
    co_return slept;
  }());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(took).count();
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 500) << "the sleep counted from when its SQE reached the kernel, after the 250 ms task";
}

// In a time namespace whose CLOCK_MONOTONIC is 3 s ahead of the host's:
// io_uring takes an absolute timeout on the host's clock, untranslated,
// so a sleep's deadline made from the namespace's clock slept 3.1 s for
// 100 ms until the ring subtracted the namespace's offset
// (/proc/self/timens_offsets). A child made in the namespace measures it;
// the namespace is made in a first child, so the test process keeps its
// own.
TEST(Io, SleepForInATimeNamespaceLastsItsDuration) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the sanitizer's runtime (GCC 12) is not fork-safe for a child that starts threads";
#endif
  pwtest::Watchdog wd("Io.SleepForInATimeNamespaceLastsItsDuration", 60);
  constexpr int kNoNamespace = 77;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(nullptr);
  const pid_t outer = ::fork();
  ASSERT_GE(outer, 0);
  if (outer == 0) {
    ::close(fds[0]);
    ::alarm(30);
    if (::unshare(CLONE_NEWTIME) != 0) {
      dprintf(fds[1], "unshare(CLONE_NEWTIME): %s", std::strerror(errno));
      std::_Exit(kNoNamespace);
    }
    std::FILE* f = std::fopen("/proc/self/timens_offsets", "w");
    if (!f || std::fprintf(f, "monotonic 3 0\n") < 0 || std::fclose(f) != 0) {
      dprintf(fds[1], "writing /proc/self/timens_offsets: %s", std::strerror(errno));
      std::_Exit(kNoNamespace);
    }
    const pid_t inner = ::fork();  // the first process in the namespace
    if (inner == 0) {
      long ms = -1;
      {
        parkway::Runtime rt(parkway::Options{.workers = 1});
        ms = parkway::sync_wait(rt, []() -> parkway::Task<long> {
          const auto t0 = Clock::now();
          (void)co_await io::sleep_for(100ms);
          co_return long(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
        }());
      }
      dprintf(fds[1], "%ld", ms);
      std::_Exit(0);
    }
    int st = 0;
    if (inner < 0 || ::waitpid(inner, &st, 0) != inner) std::_Exit(3);
    std::_Exit(WIFEXITED(st) ? WEXITSTATUS(st) : 4);
  }
  ::close(fds[1]);
  std::string out;
  char b[256];
  for (ssize_t n; (n = ::read(fds[0], b, sizeof b)) > 0;) out.append(b, std::size_t(n));
  ::close(fds[0]);
  int st = 0;
  ASSERT_EQ(::waitpid(outer, &st, 0), outer);
  ASSERT_TRUE(WIFEXITED(st)) << "the child ended by a signal (hung?)";
  if (WEXITSTATUS(st) == kNoNamespace) GTEST_SKIP() << "no time namespace on this machine: " << out;
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const long ms = std::strtol(out.c_str(), nullptr, 10);
  EXPECT_GE(ms, 100) << out;
  EXPECT_LT(ms, 2000) << "sleep_for(100ms) in a namespace 3 s ahead took " << ms << " ms";
}

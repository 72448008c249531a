// test_io_orphans.cpp -- what an operation made for a coroutine that died
// before it took it: a descriptor from an accept or an open is closed with
// the operation's state (op_state.hpp, OpState::result_is_fd; io.md, "An
// operation's life").
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "parkway/io.hpp"
#include "parkway/runtime.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;

namespace {

// A coroutine the test resumes and destroys by hand.
struct Bare {
  struct promise_type {
    Bare get_return_object() { return Bare{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { std::terminate(); }
  };
  std::coroutine_handle<promise_type> h;
};

Bare open_file(const char* path) {
  auto f = co_await io::File::open(path, O_RDONLY);
  (void)f;  // closed here if the coroutine gets this far
}

Bare accept_one(int listen_fd) {
  auto s = co_await io::accept(listen_fd);
  (void)s;  // the Socket closes it if the coroutine gets this far
}

// The worker's ring is made at its first operation: one made here is in
// the count the rounds are compared with.
Bare make_the_ring(std::atomic<bool>* done) {
  (void)co_await io::sleep_for(1ms);
  done->store(true, std::memory_order_release);
}

void start_ring(parkway::Runtime& rt) {
  std::atomic<bool> done{false};
  Bare b = make_the_ring(&done);
  rt.run([&] { b.h.resume(); });
  while (!done.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
  rt.run([&] { b.h.destroy(); });
}

int open_descriptors() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

// Waits (outside the pool) until pred holds, up to 5 s.
template <class P>
bool eventually(P pred) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!pred()) {
    if (std::chrono::steady_clock::now() - t0 > 5s) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

}  // namespace

// Resumes `b` on a worker, where it queues an operation and suspends,
// and destroys it in the same task: the destruction's cancel goes to the
// ring after the operation, in the same entry, and finds it done (an
// accept of a connection already in the backlog, an open of a cached
// path: both complete at submission). The descriptor the kernel made is
// then the operation state's to close.
void destroy_once_submitted(parkway::Runtime& rt, Bare& b) {
  rt.run([&] {
    b.h.resume();
    b.h.destroy();
  });
}

TEST(IoOrphans, AnOpenWhoseCoroutineDiesLeavesNoDescriptor) {
  pwtest::Watchdog wd("IoOrphans.AnOpenWhoseCoroutineDiesLeavesNoDescriptor", 120);
  std::string path = "/tmp/parkway-orphan-open-XXXXXX";
  const int tmp = ::mkstemp(path.data());
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    start_ring(rt);
    const int before = open_descriptors();
    for (int round = 0; round < 50; ++round) {
      Bare b = open_file(path.c_str());
      destroy_once_submitted(rt, b);
    }
    ASSERT_TRUE(eventually([&] { return open_descriptors() <= before; }))
        << open_descriptors() - before << " descriptors left by orphaned opens";
  }
  ::unlink(path.c_str());
}

TEST(IoOrphans, AnAcceptWhoseCoroutineDiesLeavesNoDescriptor) {
  pwtest::Watchdog wd("IoOrphans.AnAcceptWhoseCoroutineDiesLeavesNoDescriptor", 120);
  const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  sockaddr_in a = pwtest::bind_loopback(l);
  ASSERT_NE(a.sin_port, 0);
  ASSERT_EQ(::listen(l, 512), 0);
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    start_ring(rt);
    const int before = open_descriptors();
    for (int round = 0; round < 50; ++round) {
      const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(c, 0);
      ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // in the backlog
      Bare b = accept_one(l);
      destroy_once_submitted(rt, b);
      ::close(c);
    }
    ASSERT_TRUE(eventually([&] { return open_descriptors() <= before; }))
        << open_descriptors() - before << " descriptors left by orphaned accepts";
  }
  ::close(l);
}

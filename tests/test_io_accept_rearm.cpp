// An accept stream's re-arm after a pause (userspace/io/accept_stream.cpp,
// rearm_for_taker; docs/design/io.md, "The accept stream"): a taker that
// began to wait while the paused accept was still armed is armed again by
// a task that the pause's ECANCELED queues. If the stream is destroyed
// before that task runs, nothing was armed for its destructor to cancel:
// the task itself must end the taker's wait with ECANCELED, as io.hpp
// promises for a stream destroyed under its taker.
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;

namespace {

constexpr int kWaiting = -1;

struct Scene {
  std::optional<io::AcceptStream> stream;
  int pair[2] = {-1, -1};               // a byte on pair[1] wakes the destroyer
  std::atomic<int> stage{0};            // 1: the worker is held; 2: let it go
  std::atomic<int> queued_taken{-1};    // connections the taker took without waiting
  std::atomic<int> result{kWaiting};    // the taker's last next(): 0, or its errno
  std::atomic<bool> destroyed{false};
  std::vector<io::Socket> held;
};

// Waits for a byte; its continuation destroys the stream.
Task<void> destroy_on_byte(Scene* s) {
  std::byte b[1];
  (void)co_await io::recv(s->pair[0], b);
  s->stream.reset();
  s->destroyed.store(true);
}

Task<void> hold_the_worker(Scene* s) {
  s->stage.store(1);
  while (s->stage.load() != 2) {
  }
  co_return;
}

Task<void> take_then_wait(Scene* s) {
  // A taker that times out leaves the accept armed.
  auto first = co_await s->stream->next({.timeout = 1ms});
  if (first || first.error() != std::errc::timed_out) {
    ADD_FAILURE() << "the first next() should time out";
    s->result.store(0);
    co_return;
  }
  // The one worker spins while the clients connect: their accepts are
  // reaped in one go, past the 64 that pause the stream.
  parkway::detach(hold_the_worker(s));
  (void)co_await io::sleep_for(1ms);
  int taken = 0;
  for (;;) {  // every connection queued, taken without suspending
    auto n = s->stream->next();
    if (!n.await_ready()) break;
    auto r = n.await_resume();
    if (r) s->held.push_back(std::move(*r));
    ++taken;
  }
  s->queued_taken.store(taken);
  // The destroyer's receive completes ahead of the pause's cancel: its
  // continuation runs before the re-arm task the cancel's CQE queues.
  const char x = 'x';
  (void)!::write(s->pair[1], &x, 1);
  auto last = co_await s->stream->next();  // waits on the paused, still armed accept
  s->result.store(last ? 0 : last.error().value());
}

}  // namespace

TEST(IoAcceptRearm, AStreamDestroyedBeforeItsRearmRunsEndsTheTakersWait) {
  pwtest::Watchdog wd("IoAcceptRearm.AStreamDestroyedBeforeItsRearmRunsEndsTheTakersWait", 60);
  Scene s;
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, s.pair), 0) << std::strerror(errno);
  std::vector<int> clients;
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 512});
    ASSERT_TRUE(l) << l.error().message();
    s.stream.emplace(l->stream());
    const io::Address to = l->local_address();
    parkway::detach(destroy_on_byte(&s), rt);
    std::this_thread::sleep_for(50ms);  // its receive is in the kernel
    std::thread connector([&] {
      while (s.stage.load() != 1) std::this_thread::yield();
      for (int i = 0; i < 70; ++i) {
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0 || ::connect(c, to.get(), to.size()) != 0) {
          ADD_FAILURE() << "client " << i << ": " << std::strerror(errno);
          if (c >= 0) ::close(c);
          continue;
        }
        clients.push_back(c);
      }
      std::this_thread::sleep_for(5ms);
      s.stage.store(2);
    });
    parkway::detach(take_then_wait(&s), rt);
    connector.join();
    const auto t0 = std::chrono::steady_clock::now();
    while (s.result.load() == kWaiting && std::chrono::steady_clock::now() - t0 < 5s)
      std::this_thread::sleep_for(1ms);
    if (s.result.load() == kWaiting) {
      ADD_FAILURE() << "the taker still waits 5 s after its stream was destroyed (stream destroyed: "
                    << s.destroyed.load() << ", " << s.queued_taken.load() << " connections taken before the wait)";
      std::fflush(stdout);
      std::_Exit(1);  // its frame waits for ever: the runtime cannot stop
    }
  }
  EXPECT_TRUE(s.destroyed.load());
  EXPECT_GE(s.queued_taken.load(), 64) << "the stream did not pause: the case was not set up";
  EXPECT_EQ(s.result.load(), ECANCELED) << std::strerror(s.result.load());
  for (int c : clients) ::close(c);
  ::close(s.pair[0]);
  ::close(s.pair[1]);
}

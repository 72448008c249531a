// test_io_contract.cpp -- what parkway/io.hpp promises of calls of many
// steps and of their arguments: a CancelSource destroyed while send_all
// or send_file runs does not reach their later steps; a Socket (or File)
// closed between two steps ends the call with ECANCELED, not a throw;
// offsets past 2^63 - 1 are EINVAL, never the file position; a read of a
// regular file is short only at its end, whatever the page cache holds;
// socket sends never raise SIGPIPE, whatever flags they are given; an
// awaitable made with a CancelSource does not read the source's address
// at its co_await (the source may be gone by then).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "io_test_files.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;
using pwtest::pattern;
using pwtest::TempFile;

namespace {


// Reads n bytes from fd, giving up after 2 s without any; the count of
// those that are not pattern(i), or -1 if the stream stopped first.
long read_and_check(int fd, std::size_t n) {
  const timeval limit{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  return pwtest::read_and_check(fd, n);
}

// A TcpPair with 64 KiB socket buffers: a send of a few MiB waits for
// the reader many times.
struct TcpPair : pwtest::TcpPair {
  explicit TcpPair(parkway::Runtime& rt) : pwtest::TcpPair(rt, /*small_buffers=*/true) {}
};

// What is waiting on fd now, read without blocking, for about `for_ms`.
void drain_for(int fd, int for_ms) {
  std::vector<char> buf(64 * 1024);
  for (int i = 0; i < for_ms; ++i) {
    while (::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT) > 0) {
    }
    std::this_thread::sleep_for(1ms);
  }
}

// Waits (up to 10 s) until rt has put an operation on a ring since its
// count was `before`: a send that filled its socket waits there for room.
bool waits_on_the_ring(parkway::Runtime& rt, std::uint64_t before) {
  for (int i = 0; i < 10000; ++i) {
    if (rt.stats().total.io_ops > before) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

std::string describe(io::Result<std::size_t> r, std::size_t want) {
  if (r) return *r == want ? "sent it all" : "sent " + std::to_string(*r);
  return r.error().message();
}

// ---- The CancelSource of a call of many steps -------------------------------

// Storage a CancelSource is made in, destroyed in, and made in again: the
// second source sits where the first was, as one in a reused stack slot.
struct SourceSlot {
  alignas(io::CancelSource) unsigned char mem[sizeof(io::CancelSource)];
  io::CancelSource* make() { return ::new (static_cast<void*>(mem)) io::CancelSource(); }
};

using Sender = Task<io::Result<std::size_t>> (*)(io::Socket*, const io::File*, std::size_t, io::OpOptions);

Task<io::Result<std::size_t>> socket_send_all(io::Socket* s, const io::File*, std::size_t n, io::OpOptions o) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = pattern(i);
  co_return co_await s->send_all(b, o);
}
Task<io::Result<std::size_t>> socket_send_file(io::Socket* s, const io::File* f, std::size_t n, io::OpOptions o) {
  co_return co_await s->send_file(*f, 0, n, o);
}

enum class Form { kRawSendAll, kSocketSendAll, kSocketSendFile, kRawSendFile };
const char* name(Form form) {
  switch (form) {
    case Form::kRawSendAll: return "io::send_all";
    case Form::kSocketSendAll: return "Socket::send_all";
    case Form::kSocketSendFile: return "Socket::send_file";
    case Form::kRawSendFile: return "io::send_file";
  }
  return "?";
}
// The send's call, here, and then its co_await; `called` is set between
// (the call is where the send takes what it keeps of its options).
Task<io::Result<std::size_t>> call_then_await(Form form, io::Socket* s, const io::File* f,
                                              std::span<const std::byte> b, io::OpOptions o,
                                              std::atomic<bool>* called) {
  std::optional<Task<io::Result<std::size_t>>> t;
  switch (form) {
    case Form::kRawSendAll: t.emplace(io::send_all(s->fd(), b, o)); break;
    case Form::kSocketSendAll: t.emplace(s->send_all(b, o)); break;
    case Form::kSocketSendFile: t.emplace(s->send_file(*f, 0, b.size(), o)); break;
    case Form::kRawSendFile: t.emplace(io::send_file(s->fd(), f->fd(), 0, b.size(), o)); break;
  }
  called->store(true, std::memory_order_release);
  co_return co_await std::move(*t);
}
void wait_for(const std::atomic<bool>& called) {
  while (!called.load(std::memory_order_acquire)) std::this_thread::sleep_for(1ms);
}

// The source given to a send that waits for room is destroyed, and a
// cancelled one made where it was; the reader then takes every byte. The
// send's later steps must not consult the address it was given: it ends
// with every byte sent, not ECANCELED (nor a read of freed memory).
TEST(IoContract, ASourceDestroyedWhileASendWaitsIsNotConsultedAgain) {
  pwtest::Watchdog wd("IoContract.ASourceDestroyedWhileASendWaitsIsNotConsultedAgain", 60);
  constexpr std::size_t kSize = 4 * 1024 * 1024;
  TempFile tf(kSize);
  io::File f(::open(tf.path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(f.is_open());
  std::vector<std::byte> b(kSize);
  for (std::size_t i = 0; i < kSize; ++i) b[i] = pattern(i);
  for (Form form : {Form::kRawSendAll, Form::kSocketSendAll, Form::kSocketSendFile, Form::kRawSendFile}) {
    SCOPED_TRACE(name(form));
    parkway::Runtime rt(parkway::Options{.workers = 1});
    TcpPair p(rt);
    SourceSlot slot;
    io::CancelSource* first = slot.make();
    const std::uint64_t ops = rt.stats().total.io_ops;
    std::atomic<bool> called{false};
    auto sender = parkway::spawn(call_then_await(form, &p.out, &f, b, {.cancel = first}, &called), rt);
    wait_for(called);
    ASSERT_TRUE(waits_on_the_ring(rt, ops)) << "the send never waited for room";  // the socket is full
    first->~CancelSource();
    slot.make()->cancel();  // another source, cancelled, at the same address
    const long bad = read_and_check(p.in, kSize);
    auto r = sender.get();
    EXPECT_EQ(describe(r, kSize), "sent it all");
    EXPECT_EQ(bad, 0) << "-1: the stream stopped early";
    std::launder(reinterpret_cast<io::CancelSource*>(slot.mem))->~CancelSource();
  }
  // The same with the source freed (under ASAN: a read of it is a
  // heap-use-after-free).
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  auto source = std::make_unique<io::CancelSource>();
  const std::uint64_t ops = rt.stats().total.io_ops;
  std::atomic<bool> called{false};
  auto sender =
      parkway::spawn(call_then_await(Form::kSocketSendAll, &p.out, nullptr, b, {.cancel = source.get()}, &called), rt);
  wait_for(called);
  ASSERT_TRUE(waits_on_the_ring(rt, ops));
  source.reset();
  const long bad = read_and_check(p.in, kSize);
  auto r = sender.get();
  EXPECT_EQ(describe(r, kSize), "sent it all");
  EXPECT_EQ(bad, 0);
}

// The source still cancels the steps while it lives, the later ones too.
TEST(IoContract, TheSourceOfASendCancelsItsLaterSteps) {
  pwtest::Watchdog wd("IoContract.TheSourceOfASendCancelsItsLaterSteps", 60);
  constexpr std::size_t kSize = 4 * 1024 * 1024;
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  io::CancelSource source;
  const std::uint64_t ops = rt.stats().total.io_ops;
  auto sender = parkway::spawn(socket_send_all(&p.out, nullptr, kSize, {.cancel = &source}), rt);
  ASSERT_TRUE(waits_on_the_ring(rt, ops));
  EXPECT_EQ(read_and_check(p.in, kSize / 8), 0);  // some steps later, waiting for room again
  std::this_thread::sleep_for(20ms);
  source.cancel();
  auto r = sender.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled);
}

// ---- A close between two steps ----------------------------------------------

// The sender fills the socket and waits on the ring; the closer waits
// for a byte on a pipe. Without a co_await (the one worker stays here),
// this wakes the closer, then makes room for the sender: both
// completions are reaped in one batch, the closer's first, so the Socket
// is closed after the sender's step ended and before its next one.
Task<std::string> close_between_steps(io::Socket* s, const io::File* f, int peer, Sender send) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) co_return "pipe2 failed";
  auto sending = [](Sender send, io::Socket* s, const io::File* f) -> Task<std::string> {
    try {
      auto r = co_await send(s, f, 4 * 1024 * 1024, {});
      co_return describe(r, 4 * 1024 * 1024);
    } catch (const std::logic_error& e) {
      co_return std::string("threw: ") + e.what();
    }
  };
  auto closing = [](io::Socket* s, int fd) -> Task<void> {
    auto ready = co_await io::poll(fd, POLLIN, {.timeout = 5s});
    (void)ready;
    s->close();
  };
  auto sender = parkway::spawn(sending(send, s, f));
  auto closer = parkway::spawn(closing(s, pipe_fds[0]));
  (void)co_await io::sleep_for(50ms);
  if (::write(pipe_fds[1], "x", 1) != 1) std::abort();
  drain_for(peer, 30);
  co_await std::move(closer);
  std::string r = co_await std::move(sender);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  co_return r;
}

TEST(IoContract, ASocketClosedBetweenStepsOfSendAllIsACancel) {
  pwtest::Watchdog wd("IoContract.ASocketClosedBetweenStepsOfSendAllIsACancel", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  EXPECT_EQ(parkway::sync_wait(rt, close_between_steps(&p.out, nullptr, p.in, socket_send_all)),
            "send: Operation canceled");
  // Closed at the call: misuse, thrown there.
  std::vector<std::byte> b(10);
  EXPECT_THROW((void)p.out.send_all(b), std::logic_error);
}

TEST(IoContract, ASocketClosedBetweenStepsOfSendFileIsACancel) {
  pwtest::Watchdog wd("IoContract.ASocketClosedBetweenStepsOfSendFileIsACancel", 60);
  TempFile tf(4 * 1024 * 1024);  // written just now: in the page cache, sent by sendfile(2) if cachestat says so
  io::File f(::open(tf.path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(f.is_open());
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  const std::string e = parkway::sync_wait(rt, close_between_steps(&p.out, &f, p.in, socket_send_file));
  // The sendfile path waits for room with a poll ("send_file" between
  // steps); the copy path (no cachestat here) with send_all's steps.
  EXPECT_TRUE(e == "send_file: Operation canceled" || e == "send: Operation canceled") << e;
}

// The copy path of send_file reads the file (here a pipe: the read waits
// for its writer) on the ring. A close of either the Socket or the File
// during the read cancels it.
TEST(IoContract, ACloseDuringSendFilesReadIsACancel) {
  pwtest::Watchdog wd("IoContract.ACloseDuringSendFilesReadIsACancel", 60);
  struct IgnoreSigpipe {
    struct sigaction old {};
    IgnoreSigpipe() {
      struct sigaction sa {};
      sa.sa_handler = SIG_IGN;
      ::sigaction(SIGPIPE, &sa, &old);
    }
    ~IgnoreSigpipe() { ::sigaction(SIGPIPE, &old, nullptr); }
  } ignoring;
  parkway::Runtime rt(parkway::Options{.workers = 1});
  for (bool close_socket : {true, false}) {
    SCOPED_TRACE(close_socket ? "the Socket closed" : "the File closed");
    TcpPair p(rt);
    int pipe_fds[2];
    ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
    io::File in(pipe_fds[0]);
    auto t = [](io::Socket* s, io::File* f, int writer, bool close_socket) -> Task<std::string> {
      auto sending = [](io::Socket* s, const io::File* f) -> Task<std::string> {
        try {
          auto r = co_await s->send_file(*f, 0, 10);
          co_return describe(r, 10);
        } catch (const std::logic_error& e) {
          co_return std::string("threw: ") + e.what();
        }
      };
      auto sender = parkway::spawn(sending(s, f));
      (void)co_await io::sleep_for(30ms);  // the read of the pipe waits on the ring
      if (close_socket)
        s->close();
      else
        f->close();
      // The cancel goes in at the worker's next look at its ring; bytes
      // written before that could complete the read first (a ring
      // without DEFER_TASKRUN completes it as they arrive).
      (void)co_await io::sleep_for(10ms);
      // The pipe's read end is gone once the File's close is done: EPIPE
      // (SIGPIPE is ignored for this test).
      if (::write(writer, "0123456789", 10) != 10 && (close_socket || errno != EPIPE)) std::abort();
      co_return co_await std::move(sender);
    };
    const std::string e = parkway::sync_wait(rt, t(&p.out, &in, pipe_fds[1], close_socket));
    ::close(pipe_fds[1]);
    EXPECT_EQ(e, "read: Operation canceled");
  }
}

// A close of the File ends the call while it waits for room in the
// socket too, a step that is not the File's: a cached file sent by
// sendfile (a poll for room), a pipe's bytes read into the copy path's
// buffer (send_all's send). Each wait has a 5 s timeout: without the
// close reaching the step, the call ends with ETIMEDOUT instead.
TEST(IoContract, AFileClosedWhileSendFileWaitsForRoomEndsIt) {
  pwtest::Watchdog wd("IoContract.AFileClosedWhileSendFileWaitsForRoomEndsIt", 60);
  constexpr std::size_t kSize = 4 << 20;
  TempFile tf(kSize);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (bool from_pipe : {false, true}) {
    SCOPED_TRACE(from_pipe ? "a pipe's bytes" : "a cached file");
    TcpPair p(rt);  // nobody reads p.in: its 64 KiB buffers fill up
    int pipe_fds[2] = {-1, -1};
    io::File f;
    if (from_pipe) {
      ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
      f = io::File(pipe_fds[0]);
      // More than the socket takes: the pipe's 1 MiB (its size is raised).
      ASSERT_GE(::fcntl(pipe_fds[1], F_SETPIPE_SZ, 1 << 20), 1 << 20);
      std::vector<char> bytes(1 << 20, 'x');
      ASSERT_EQ(::write(pipe_fds[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
    } else {
      f = io::File(::open(tf.path.c_str(), O_RDONLY | O_CLOEXEC));
    }
    ASSERT_TRUE(f.is_open());
    auto t = [](io::Socket* s, io::File* f) -> Task<std::pair<std::string, double>> {
      auto sending = [](io::Socket* s, const io::File* f) -> Task<std::pair<std::string, double>> {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = co_await s->send_file(*f, 0, kSize, {.timeout = 5s});
        co_return std::pair{describe(r, kSize),
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
      };
      auto sender = parkway::spawn(sending(s, f));
      // Until the socket has no room (the call then waits for it), and
      // a little more for the call to reach that wait.
      for (int i = 0; i < 500; ++i) {
        pollfd pf{s->fd(), POLLOUT, 0};
        if (::poll(&pf, 1, 0) == 0) break;
        (void)co_await io::sleep_for(10ms);
      }
      (void)co_await io::sleep_for(50ms);
      f->close();
      co_return co_await std::move(sender);
    };
    const auto [e, seconds] = parkway::sync_wait(rt, t(&p.out, &f));
    if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);  // pipe_fds[0] is f's
    // The sendfile path waits with a poll, the copy path with send_all's steps.
    EXPECT_TRUE(e == "poll: Operation canceled" || e == "send: Operation canceled") << e;
    EXPECT_LT(seconds, 2.5) << e;
  }
}

// A Socket's receive with MSG_OOB is tried at once, as the kernel takes
// it: with no urgent byte there it fails with EINVAL (a receive that
// polled first would wait for ordinary bytes, here until its timeout);
// with one, it returns that byte.
TEST(IoContract, AnUrgentReceiveIsTriedAtOnce) {
  pwtest::Watchdog wd("IoContract.AnUrgentReceiveIsTriedAtOnce", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  auto urgent = [](io::Socket* s) -> Task<std::pair<std::string, double>> {
    const auto t0 = std::chrono::steady_clock::now();
    char b[4];
    auto r = co_await s->recv(std::as_writable_bytes(std::span(b)), {.timeout = 5s}, MSG_OOB);
    co_return std::pair{r ? std::string(b, *r) : r.error().message(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
  };
  const auto [none, none_s] = parkway::sync_wait(rt, urgent(&p.out));
  EXPECT_EQ(none, "recv: Invalid argument");
  EXPECT_LT(none_s, 2.5) << "the receive waited";
  ASSERT_EQ(::send(p.in, "!", 1, MSG_OOB), 1);
  pollfd arrived{p.out.fd(), POLLPRI, 0};  // TCP reports an urgent byte that has arrived with POLLPRI
  ASSERT_EQ(::poll(&arrived, 1, 5000), 1) << "the urgent byte never arrived";
  const auto [got, got_s] = parkway::sync_wait(rt, urgent(&p.out));
  EXPECT_EQ(got, "!");
}

// A send with MSG_WAITALL sends everything, as the ring's does, also with
// sends done at the co_await on: that one would return what fit (here
// 219,264 of 4 MiB before).
TEST(IoContract, ASendWithWaitallSendsItAll) {
  pwtest::Watchdog wd("IoContract.ASendWithWaitallSendsItAll", 60);
  constexpr std::size_t kSize = 4 << 20;
  for (bool send_first : {true, false}) {
    SCOPED_TRACE(send_first ? "io_send_first" : "sends on the ring");
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = send_first});
    int sp[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
    std::atomic<std::size_t> drained{0};
    std::thread reader([&] {  // drains the other end until EOF
      std::vector<char> b(64 * 1024);
      for (;;) {
        const ssize_t n = ::recv(sp[1], b.data(), b.size(), 0);
        if (n > 0) {
          drained += std::size_t(n);
        } else if (n == 0 || errno != EAGAIN) {
          return;
        } else {
          std::this_thread::sleep_for(1ms);
        }
      }
    });
    std::vector<std::byte> bytes(kSize, std::byte{7});
    auto sending = [](int fd, std::span<const std::byte> b) -> Task<std::string> {
      auto r = co_await io::send(fd, b, {.timeout = 5s}, MSG_WAITALL);
      co_return r ? std::to_string(*r) : r.error().message();
    };
    const std::string sent = parkway::sync_wait(rt, sending(sp[0], bytes));
    ::close(sp[0]);
    reader.join();
    ::close(sp[1]);
    EXPECT_EQ(sent, std::to_string(kSize));
    EXPECT_EQ(drained.load(), kSize);
  }
}

// ---- Offsets past 2^63 - 1 ----------------------------------------------------

TEST(IoContract, OffsetsPastTwoToThe63AreInvalidNotTheFilePosition) {
  pwtest::Watchdog wd("IoContract.OffsetsPastTwoToThe63AreInvalidNotTheFilePosition", 60);
  constexpr std::size_t kSize = 8192;
  TempFile tf(kSize);
  for (bool first : {true, false}) {
    SCOPED_TRACE(first ? "io_read_first" : "every read on the ring");
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_read_first = first});
    io::File f(::open(tf.path.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(f.is_open());
    ASSERT_EQ(::lseek(f.fd(), 0, SEEK_SET), 0);  // the file position: 0, where the file has bytes
    auto t = [](io::File* f) -> Task<std::string> {
      std::string out;
      auto note = [&out](const char* what, io::Result<std::size_t> r) {
        out += std::string(what) + ": " + (r ? "ok " + std::to_string(*r) : r.error().message()) + "\n";
      };
      std::vector<std::byte> buf(16);
      const std::uint64_t two63 = std::uint64_t(1) << 63;
      note("read_at 2^63", co_await f->read_at(buf, two63));
      note("read_at 2^64-1", co_await f->read_at(buf, UINT64_MAX));
      note("read_at 2^63-8", co_await f->read_at(buf, two63 - 8));
      note("write_at 2^63", co_await f->write_at(buf, two63));
      note("write_at 2^64-1", co_await f->write_at(buf, UINT64_MAX));
      note("read -2", co_await io::read(f->fd(), buf, -2));
      note("write -2", co_await io::write(f->fd(), buf, -2));
      iovec v{buf.data(), buf.size()};
      note("readv -5", co_await io::readv(f->fd(), {&v, 1}, -5));
      note("writev INT64_MIN", co_await io::writev(f->fd(), {&v, 1}, INT64_MIN));
      note("read 0", co_await io::read(f->fd(), buf, 0));
      co_return out;
    };
    EXPECT_EQ(parkway::sync_wait(rt, t(&f)),
              "read_at 2^63: read: Invalid argument\n"
              "read_at 2^64-1: read: Invalid argument\n"
              "read_at 2^63-8: read: Invalid argument\n"
              "write_at 2^63: write: Invalid argument\n"
              "write_at 2^64-1: write: Invalid argument\n"
              "read -2: read: Invalid argument\n"
              "write -2: write: Invalid argument\n"
              "readv -5: readv: Invalid argument\n"
              "writev INT64_MIN: writev: Invalid argument\n"
              "read 0: ok 16\n");
    // Nothing was written at the file position.
    std::vector<std::byte> head(16);
    ASSERT_EQ(::pread(f.fd(), head.data(), head.size(), 0), 16);
    for (std::size_t i = 0; i < head.size(); ++i) EXPECT_EQ(head[i], pattern(i)) << i;
    EXPECT_EQ(::lseek(f.fd(), 0, SEEK_CUR), 0) << "the file position moved";

    // send_file: an offset past 2^63 - 1 is EINVAL; a count past it ends there.
    TcpPair p(rt);
    auto sf = [](io::Socket* s, const io::File* f, std::uint64_t off, std::size_t n) -> Task<std::string> {
      auto r = co_await s->send_file(*f, off, n);
      co_return r ? "ok " + std::to_string(*r) : r.error().message();
    };
    EXPECT_EQ(parkway::sync_wait(rt, sf(&p.out, &f, std::uint64_t(1) << 63, 100)), "send_file: Invalid argument");
    EXPECT_EQ(parkway::sync_wait(rt, sf(&p.out, &f, UINT64_MAX, 100)), "send_file: Invalid argument");
    auto raw = [](int s, int f) -> Task<std::string> {
      auto r = co_await io::send_file(s, f, std::uint64_t(1) << 63, 100);
      co_return r ? "ok " + std::to_string(*r) : r.error().message();
    };
    EXPECT_EQ(parkway::sync_wait(rt, raw(p.out.fd(), f.fd())), "send_file: Invalid argument");
    EXPECT_EQ(parkway::sync_wait(rt, sf(&p.out, &f, INT64_MAX, 100)), "ok 0");
    EXPECT_EQ(parkway::sync_wait(rt, sf(&p.out, &f, 0, SIZE_MAX)), "ok " + std::to_string(kSize));
    EXPECT_EQ(read_and_check(p.in, kSize), 0) << "the whole file, once";
    char extra;
    EXPECT_EQ(::recv(p.in, &extra, 1, MSG_DONTWAIT), -1) << "bytes sent for an invalid offset";
  }
}

// ---- Short only at the end of the file ----------------------------------------

// Pages of fd's first `bytes` that are in memory, by mincore(2); -1 if
// it cannot tell.
long resident_pages(int fd, std::size_t bytes) {
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return -1;
  const std::size_t page = std::size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  long n = -1;
  if (::mincore(m, bytes, v.data()) == 0) {
    n = 0;
    for (unsigned char c : v) n += c & 1;
  }
  ::munmap(m, bytes);
  return n;
}

// A 1 MiB file whose first 64 KiB are in the page cache and the rest not:
// a read of all of it at the co_await would stop at 64 KiB. It returns
// every byte (the ring reads the rest of the way), by read_at and readv.
// At the end of a cached file the short count comes at the co_await,
// without the ring.
TEST(IoContract, AReadIsShortOnlyAtTheEndOfTheFile) {
  pwtest::Watchdog wd("IoContract.AReadIsShortOnlyAtTheEndOfTheFile", 60);
  constexpr std::size_t kSize = 1024 * 1024, kCached = 64 * 1024;
  TempFile tf(kSize);
  ASSERT_EQ(::fsync(tf.fd), 0);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  for (bool vectored : {false, true}) {
    SCOPED_TRACE(vectored ? "readv" : "read_at");
    io::File f(::open(tf.path.c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(f.is_open());
    // Out of the page cache (once any read of it still in flight, such
    // as readahead an earlier read began, is done: a page being read
    // stays), then its first 64 KiB back in, without readahead (which
    // would bring in more).
    std::vector<std::byte> all(kSize);
    ASSERT_EQ(::pread(f.fd(), all.data(), kSize, 0), ssize_t(kSize));
    ASSERT_EQ(::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED), 0);
    ASSERT_EQ(::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_RANDOM), 0);
    std::vector<std::byte> head(kCached);
    ASSERT_EQ(::pread(f.fd(), head.data(), kCached, 0), ssize_t(kCached));
    const long resident = resident_pages(f.fd(), kSize);
    const long page = ::sysconf(_SC_PAGESIZE);
    if (resident <= 0 || resident >= long(kSize) / page)
      GTEST_SKIP() << "SKIP: cannot evict part of the file from the page cache here (" << resident
                   << " pages resident; a tmpfs?)";
    auto t = [](io::File* f, bool vectored, std::size_t n) -> Task<std::string> {
      std::vector<std::byte> buf(n);
      iovec v[2] = {{buf.data(), n / 2}, {buf.data() + n / 2, n - n / 2}};
      io::Result<std::size_t> r = io::Error(0, "");
      if (vectored)  // not a ?: of two co_awaits (GCC 12: docs/guide.md, "Limits")
        r = co_await io::readv(f->fd(), v, 0);
      else
        r = co_await f->read_at(buf, 0);
      if (!r) co_return r.error().message();
      if (*r != n) co_return "short: " + std::to_string(*r) + " of " + std::to_string(n);
      for (std::size_t i = 0; i < n; ++i)
        if (buf[i] != pattern(i)) co_return "byte " + std::to_string(i) + " differs";
      co_return "ok";
    };
    EXPECT_EQ(parkway::sync_wait(rt, t(&f, vectored, kSize)), "ok");
  }
  // The end of a cached file: short, at the co_await.
  io::File f(::open(tf.path.c_str(), O_RDONLY | O_CLOEXEC));
  std::vector<std::byte> all(kSize);
  ASSERT_EQ(::pread(f.fd(), all.data(), kSize, 0), ssize_t(kSize));
  const parkway::Stats before = rt.stats();
  auto tail = [](io::File* f) -> Task<std::string> {
    std::vector<std::byte> buf(64 * 1024);
    auto r = co_await f->read_at(buf, kSize - 1000);
    co_return r ? std::to_string(*r) : r.error().message();
  };
  EXPECT_EQ(parkway::sync_wait(rt, tail(&f)), "1000");
  const parkway::Stats after = rt.stats();
  EXPECT_EQ(after.total.io_read_now - before.total.io_read_now, 1u);
  EXPECT_EQ(after.total.io_ops, before.total.io_ops) << "the short read at the end took the ring";
}

// ---- No SIGPIPE, whatever the flags -------------------------------------------

std::atomic<int> g_sigpipes{0};
void count_sigpipe(int) { g_sigpipes.fetch_add(1); }

// SIGPIPE counted rather than fatal while it lives.
struct CountSigpipe {
  struct sigaction old {};
  CountSigpipe() {
    struct sigaction sa {};
    sa.sa_handler = count_sigpipe;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGPIPE, &sa, &old);
  }
  ~CountSigpipe() { ::sigaction(SIGPIPE, &old, nullptr); }
};

// On a socket shut for writing every send fails with EPIPE, which raises
// SIGPIPE unless the send says MSG_NOSIGNAL. Flags given (MSG_MORE, or 0
// said outright) must not drop it, at the co_await or on the ring.
TEST(IoContract, SocketSendsNeverRaiseSigpipeWhateverTheirFlags) {
  pwtest::Watchdog wd("IoContract.SocketSendsNeverRaiseSigpipeWhateverTheirFlags", 60);
  CountSigpipe counting;
  for (bool first : {true, false}) {
    SCOPED_TRACE(first ? "sends at the co_await" : "every send on the ring");
    g_sigpipes = 0;
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = first});
    TcpPair p(rt);
    ASSERT_EQ(::shutdown(p.out.fd(), SHUT_WR), 0);
    auto t = [](io::Socket* s) -> Task<std::string> {
      std::string out;
      auto note = [&out](const char* what, io::Result<std::size_t> r) {
        out += std::string(what) + ": " + (r ? "ok" : r.error().message()) + "\n";
      };
      std::byte b[4] = {};
      iovec v{b, sizeof b};
      msghdr m{};
      m.msg_iov = &v;
      m.msg_iovlen = 1;
      note("Socket::send_all MSG_MORE", co_await s->send_all(b, {}, MSG_MORE));
      note("Socket::send 0", co_await s->send(b, {}, 0));
      note("Socket::sendmsg MSG_MORE", co_await s->sendmsg(m, {}, MSG_MORE));
      note("Socket::writev", co_await s->writev({&v, 1}));
      note("io::send_all MSG_MORE", co_await io::send_all(s->fd(), b, {}, MSG_MORE));
      note("io::send MSG_MORE", co_await io::send(s->fd(), b, {}, MSG_MORE));
      note("io::sendmsg 0", co_await io::sendmsg(s->fd(), m, {}, 0));
      co_return out;
    };
    EXPECT_EQ(parkway::sync_wait(rt, t(&p.out)),
              "Socket::send_all MSG_MORE: send: Broken pipe\n"
              "Socket::send 0: send: Broken pipe\n"
              "Socket::sendmsg MSG_MORE: sendmsg: Broken pipe\n"
              "Socket::writev: writev: Broken pipe\n"
              "io::send_all MSG_MORE: send: Broken pipe\n"
              "io::send MSG_MORE: send: Broken pipe\n"
              "io::sendmsg 0: sendmsg: Broken pipe\n");
    EXPECT_EQ(g_sigpipes.load(), 0) << "a send raised SIGPIPE (its default action ends the process)";
  }
}

// ---- A source destroyed between an operation's call and its co_await ----------

// "ok", "ECANCELED", or the error's message.
template <class R>
std::string outcome(const R& r) {
  if (r) return "ok";
  return r.error() == std::errc::operation_canceled ? "ECANCELED" : r.error().message();
}

// Connects a blocking socket to `l` (loopback: done without an accept);
// the descriptor, which the caller closes.
int connect_raw(const io::Listener& l) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const io::Address a = l.local_address();
  if (fd < 0 || ::connect(fd, a.get(), a.size()) != 0) std::abort();
  return fd;
}

// Each kind of awaitable (and Socket::connect's Task) is made with a
// source from `src`, then src->between() ends that source, then it is
// awaited, with what it waits for already there; a line each, "kind:
// outcome".
template <class Sources>
Task<std::string> each_awaitable(io::Socket* s, int peer, io::Listener* l, Sources* src) {
  std::string out;
  auto line = [&out](const char* kind, const auto& r) { out += std::string(kind) + ": " + outcome(r) + "\n"; };
  std::byte b[1] = {std::byte{7}};
  {
    auto op = s->recv(b, {.cancel = src->make()});
    src->between();
    if (::send(peer, "x", 1, 0) != 1) std::abort();
    auto r = co_await op;
    line("Socket::recv", r);
  }
  {
    auto op = s->send(b, {.cancel = src->make()});
    src->between();
    auto r = co_await op;
    line("Socket::send", r);
  }
  {
    auto op = io::sleep_for(1ms, src->make());
    src->between();
    auto r = co_await op;
    line("io::sleep_for", r);
  }
  {
    auto op = l->accept({.cancel = src->make()});
    src->between();
    const int c = connect_raw(*l);
    auto r = co_await op;
    line("Listener::accept", r);
    ::close(c);
  }
  {
    auto stream = l->stream();
    auto next = stream.next({.cancel = src->make()});
    src->between();
    const int c = connect_raw(*l);
    auto r = co_await next;
    line("AcceptStream::next", r);
    ::close(c);
  }
  {
    auto connecting = io::Socket::connect(l->local_address(), {.cancel = src->make()});
    src->between();
    auto r = co_await std::move(connecting);
    line("Socket::connect", r);
  }
  co_return out;
}

// The source is destroyed and a cancelled one made where it was (as in
// a reused stack slot): the awaitable must not look at that address.
struct ReplacedAtItsAddress {
  SourceSlot slot;
  bool live = false;  // a source is in the slot
  io::CancelSource* at() { return std::launder(reinterpret_cast<io::CancelSource*>(slot.mem)); }
  void drop() {
    if (live) at()->~CancelSource();
    live = false;
  }
  io::CancelSource* make() {
    drop();  // the cancelled one the last between() left
    live = true;
    return slot.make();
  }
  void between() {
    drop();
    make()->cancel();
  }
  ~ReplacedAtItsAddress() { drop(); }
};

// The source is cancelled, then freed (under ASAN a read of its address
// is a heap-use-after-free): the awaitable holds its state.
struct CancelledThenFreed {
  std::unique_ptr<io::CancelSource> source;
  io::CancelSource* make() {
    source = std::make_unique<io::CancelSource>();
    return source.get();
  }
  void between() {
    source->cancel();
    source.reset();
  }
};

TEST(IoContract, AnAwaitableDoesNotReadItsSourcesAddressAtItsCoAwait) {
  pwtest::Watchdog wd("IoContract.AnAwaitableDoesNotReadItsSourcesAddressAtItsCoAwait", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l);
  ReplacedAtItsAddress sources;
  EXPECT_EQ(parkway::sync_wait(rt, each_awaitable(&p.out, p.in, &*l, &sources)),
            "Socket::recv: ok\n"
            "Socket::send: ok\n"
            "io::sleep_for: ok\n"
            "Listener::accept: ok\n"
            "AcceptStream::next: ok\n"
            "Socket::connect: ok\n");
}

TEST(IoContract, ASourceCancelledThenFreedBeforeTheCoAwaitStillCancels) {
  pwtest::Watchdog wd("IoContract.ASourceCancelledThenFreedBeforeTheCoAwaitStillCancels", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  TcpPair p(rt);
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l);
  CancelledThenFreed sources;
  EXPECT_EQ(parkway::sync_wait(rt, each_awaitable(&p.out, p.in, &*l, &sources)),
            "Socket::recv: ECANCELED\n"
            "Socket::send: ECANCELED\n"
            "io::sleep_for: ECANCELED\n"
            "Listener::accept: ECANCELED\n"
            "AcceptStream::next: ECANCELED\n"
            "Socket::connect: ECANCELED\n");
}

}  // namespace

// test_io.cpp -- the io_uring layer (parkway/io.hpp, docs/design/io.md):
// echo over loopback with every byte checked, continuations stolen onto
// other rings, timeouts, cancels from other threads, destroyed awaiters,
// ring-parked workers woken by tasks and by completions, EMFILE on
// accept, shutdown with I/O in flight, idle connections costing no CPU
// and a ring sleep not counted as I/O wait, reads from the page cache
// done at their co_await, and owned receives through the ring's buffer
// pool, empty pool included.
// The whole suite also runs with PARKWAY_IO_WAKE=eventfd (make
// test-io-eventfd), the wake path of kernels without IORING_OP_FUTEX_WAIT.
#include <fcntl.h>
#include <mqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "io/ring.hpp"
#include "runtime_impl.hpp"
#include "worker.hpp"
#include "parkway/io.hpp"
#include "parkway/parkway.hpp"
#include "test_util.hpp"

namespace io = parkway::io;
using namespace std::chrono_literals;
using parkway::Task;

namespace {

std::byte pattern(std::uint64_t seed, std::uint64_t i) {
  return std::byte(((i + seed) * 0x9E3779B97F4A7C15ull) >> 56);
}

// n blocking TCP clients connected to `to` (each waits in the listener's
// backlog until accepted); fewer, with a test failure, if one could not be.
std::vector<int> connect_clients(const io::Address& to, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || ::connect(c, to.get(), to.size()) != 0) {
      ADD_FAILURE() << "client " << i << " of " << n << ": " << std::strerror(errno);
      if (c >= 0) ::close(c);
      break;
    }
    fds.push_back(c);
  }
  return fds;
}

// A connected pair of non-blocking stream sockets.
struct Pair {
  int a = -1, b = -1;
  Pair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
    a = fds[0];
    b = fds[1];
  }
  ~Pair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The CPU time the whole process (every worker) has used, in ms.
double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

// Waits (outside the pool) until pred holds, up to `limit`.
template <class P>
bool eventually(P pred, std::chrono::milliseconds limit = 5000ms) {
  auto t0 = std::chrono::steady_clock::now();
  while (!pred()) {
    if (std::chrono::steady_clock::now() - t0 > limit) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

Task<void> echo_conn(io::Socket s) {
  std::vector<std::byte> buf(16384);
  for (;;) {
    auto n = co_await s.recv(buf);
    if (!n || *n == 0) co_return;
    auto w = co_await s.send_all({buf.data(), *n});
    if (!w) co_return;
  }
}

Task<void> accept_n(io::Listener& l, int n, std::atomic<int>* errors) {
  io::AcceptStream st = l.stream();
  for (int i = 0; i < n;) {
    auto c = co_await st.next();
    if (!c) {
      errors->fetch_add(1);
      (void)co_await io::sleep_for(1ms);
      continue;
    }
    parkway::detach(echo_conn(std::move(*c)));
    ++i;
  }
}

struct ClientStats {
  std::atomic<long> bad_bytes{0}, failed{0}, migrations{0};
};

Task<void> send_pattern(io::Socket* s, std::size_t bytes, std::uint64_t seed, ClientStats* cs) {
  std::vector<std::byte> buf(8192);
  std::size_t sent = 0;
  while (sent < bytes) {
    std::size_t n = std::min(buf.size(), bytes - sent);
    for (std::size_t i = 0; i < n; ++i) buf[i] = pattern(seed, sent + i);
    auto w = co_await s->send_all({buf.data(), n});
    if (!w) {
      cs->failed.fetch_add(1);
      co_return;
    }
    sent += n;
  }
}

Task<void> echo_client(io::Address a, std::size_t bytes, std::uint64_t seed, ClientStats* cs) {
  auto c = co_await io::Socket::connect(a);
  if (!c) {
    cs->failed.fetch_add(1);
    co_return;
  }
  io::Socket s = std::move(*c);
  auto sender = parkway::spawn(send_pattern(&s, bytes, seed, cs));
  std::vector<std::byte> buf(16384);
  std::size_t got = 0;
  int where = parkway::Runtime::current_worker_index();
  while (got < bytes) {
    auto n = co_await s.recv(buf);
    int now = parkway::Runtime::current_worker_index();
    if (now != where) cs->migrations.fetch_add(1);
    where = now;
    if (!n || *n == 0) {
      cs->failed.fetch_add(1);
      break;
    }
    for (std::size_t i = 0; i < *n; ++i)
      if (buf[i] != pattern(seed, got + i)) cs->bad_bytes.fetch_add(1);
    got += *n;
  }
  co_await std::move(sender);
}

Task<void> run_clients(io::Address a, int conns, std::size_t bytes, ClientStats* cs) {
  std::vector<parkway::Spawned<void>> all;
  all.reserve(std::size_t(conns));
  for (int i = 0; i < conns; ++i) all.push_back(parkway::spawn(echo_client(a, bytes, std::uint64_t(i) * 7919, cs)));
  for (auto& s : all) co_await std::move(s);
}

}  // namespace

TEST(Io, EchoManyConnectionsEveryByteChecked) {
  const int conns = pwtest::kSanitized ? 100 : 1000;
  const std::size_t bytes = pwtest::kSanitized ? (256u << 10) : (1u << 20);
  pwtest::Watchdog wd("Io.EchoManyConnectionsEveryByteChecked", 240);
  parkway::Runtime rt(parkway::Options{.workers = 4});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::Address addr = l->local_address();
  std::atomic<int> accept_errors{0};
  auto server = parkway::spawn(accept_n(*l, conns, &accept_errors), rt);
  ClientStats cs;
  auto t0 = std::chrono::steady_clock::now();
  parkway::sync_wait(rt, run_clients(addr, conns, bytes, &cs));
  double ms = ms_since(t0);
  server.get();
  std::printf("%d connections x %zu bytes each way in %.0f ms; %ld continuations resumed on another worker\n", conns,
              bytes, ms, cs.migrations.load());
  EXPECT_EQ(cs.failed.load(), 0);
  EXPECT_EQ(cs.bad_bytes.load(), 0);
  EXPECT_EQ(accept_errors.load(), 0);
  parkway::Stats st = rt.stats();
  int rings = 0;
  for (auto& w : st.workers) rings += w.io_ops > 0;
  EXPECT_GE(rings, 2) << "I/O went to one worker's ring only";
  EXPECT_GT(st.total.io_sent_now, 0u) << "no send went out at its co_await (Options::io_send_first)";
  // How many continuations moved is the scheduler's business here (none,
  // once, under TSAN); Io.StolenContinuationSubmitsOnTheThiefsRing forces it.
}

namespace {
struct Hop {
  std::atomic<int> submit1{-1}, resume1{-1}, submit2{-1};
};
Task<void> hop(int fd, Hop* h, std::atomic<int>* submissions_per_worker) {
  std::byte b[16];
  h->submit1 = parkway::Runtime::current_worker_index();
  submissions_per_worker[h->submit1.load()].fetch_add(1);
  auto r = co_await io::recv(fd, b);
  h->resume1 = parkway::Runtime::current_worker_index();
  auto t0 = std::chrono::steady_clock::now();
  while (ms_since(t0) < 20) {
  }  // keep this worker busy: the other continuations are stolen
  h->submit2 = parkway::Runtime::current_worker_index();
  submissions_per_worker[h->submit2.load()].fetch_add(1);
  (void)co_await io::sleep_for(1ms);
  (void)r;
}
Task<void> start_hops(std::vector<Pair>* pairs, std::vector<Hop>* hops, std::atomic<int>* per_worker,
                      std::vector<parkway::Spawned<void>>* out) {
  for (std::size_t i = 0; i < pairs->size(); ++i) out->push_back(parkway::spawn(hop((*pairs)[i].a, &(*hops)[i], per_worker)));
  co_return;
}
}  // namespace

// A continuation stolen by another worker issues its next operation on
// the thief's ring: per worker, the operations submitted equal those the
// coroutines recorded there.
TEST(Io, StolenContinuationSubmitsOnTheThiefsRing) {
  pwtest::Watchdog wd("Io.StolenContinuationSubmitsOnTheThiefsRing", 60);
  bool migrated = false;
  for (int round = 0; round < 5 && !migrated; ++round) {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    std::vector<Pair> pairs(8);
    std::vector<Hop> hops(8);
    std::atomic<int> per_worker[2] = {0, 0};
    std::vector<parkway::Spawned<void>> spawned;
    // One worker held in a task while the other starts every hop, so that
    // all eight receives are on one ring: its reap makes a batch of eight
    // 20 ms continuations, and the released worker takes some of them.
    std::atomic<bool> held{false}, release{false};
    auto blocker = rt.submit([&] {
      held.store(true);
      while (!release.load()) std::this_thread::yield();
    });
    ASSERT_TRUE(eventually([&] { return held.load(); }));
    parkway::sync_wait(rt, start_hops(&pairs, &hops, per_worker, &spawned));
    ASSERT_TRUE(eventually([&] {
      for (auto& h : hops)
        if (h.submit1 < 0) return false;
      return true;
    }));
    release.store(true);
    blocker.get();
    std::this_thread::sleep_for(5ms);
    for (auto& p : pairs) ASSERT_EQ(::write(p.b, "x", 1), 1);
    for (auto& s : spawned) s.get();
    parkway::Stats st = rt.stats();
    for (int w = 0; w < 2; ++w) EXPECT_EQ(st.workers[std::size_t(w)].io_ops, std::uint64_t(per_worker[w].load()));
    for (auto& h : hops) {
      EXPECT_EQ(h.resume1.load(), h.submit2.load());
      if (h.resume1.load() != h.submit1.load()) migrated = true;
    }
  }
  EXPECT_TRUE(migrated) << "no continuation ran on another worker in 5 rounds";
}

namespace {
template <class T>
T run_on(parkway::Runtime& rt, Task<T> t) {
  return parkway::sync_wait(rt, std::move(t));
}
Task<io::Result<std::size_t>> recv_once(int fd, io::OpOptions o) {
  std::byte b[16];
  co_return co_await io::recv(fd, b, o);
}
}  // namespace

TEST(Io, TimeoutFiresWithinItsDeadline) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  Pair p;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_on(rt, recv_once(p.a, {.timeout = 50ms}));
  double ms = ms_since(t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  EXPECT_STREQ(r.error().op(), "recv");
  EXPECT_GE(ms, 49.0);
  EXPECT_LT(ms, 1000.0);
  // An absolute deadline.
  t0 = std::chrono::steady_clock::now();
  r = run_on(rt, recv_once(p.a, {.deadline = std::chrono::steady_clock::now() + 30ms}));
  ms = ms_since(t0);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out);
  EXPECT_GE(ms, 29.0);
  EXPECT_LT(ms, 1000.0);
  // Data before the deadline: the operation's own result, no timeout.
  ASSERT_EQ(::write(p.b, "hello", 5), 5);
  r = run_on(rt, recv_once(p.a, {.timeout = 5s}));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 5u);
}

namespace {
Task<void> recv_timed(int fd, std::chrono::milliseconds t, std::chrono::steady_clock::time_point t0,
                      std::vector<std::pair<double, int>>* ends, int id, io::Result<std::size_t>* out) {
  std::byte b[16];
  *out = co_await io::recv(fd, b, {.timeout = t});
  ends->push_back({ms_since(t0), id});  // one worker: no lock needed
}
}  // namespace

// Operations with staggered timeouts, submitted out of order on one ring,
// some answered before their deadline: the answered ones get their data,
// the others ETIMEDOUT no sooner than their own timeout, earliest
// deadline first (the ring's deadline heap: an answered operation leaves
// it from the middle).
TEST(Io, TimeoutsFireInDeadlineOrderAndAnsweredOnesKeepTheirData) {
  pwtest::Watchdog wd("Io.TimeoutsFireInDeadlineOrderAndAnsweredOnesKeepTheirData", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  constexpr int kOps = 24;
  std::vector<Pair> pairs(kOps);
  std::vector<int> order(kOps);
  for (int i = 0; i < kOps; ++i) order[std::size_t(i)] = (i * 7) % kOps;  // a permutation
  std::vector<std::pair<double, int>> ends;
  std::vector<io::Result<std::size_t>> res(kOps, io::Result<std::size_t>(std::size_t(0)));
  const auto t0 = std::chrono::steady_clock::now();
  auto all = [&]() -> Task<void> {
    std::vector<parkway::Spawned<void>> v;
    for (int i : order)  // op i times out after 300 + 15 i ms; every third is answered once all are in
      v.push_back(parkway::spawn(recv_timed(pairs[std::size_t(i)].a, std::chrono::milliseconds(300 + 15 * i), t0,
                                            &ends, i, &res[std::size_t(i)])));
    for (auto& s : v) co_await std::move(s);
  };
  auto done = parkway::spawn(all(), rt);
  ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= std::uint64_t(kOps); }));
  for (int i = 0; i < kOps; i += 3) ASSERT_EQ(::write(pairs[std::size_t(i)].b, "abc", 3), 3);
  done.get();
  ASSERT_EQ(ends.size(), std::size_t(kOps));
  double last_timeout_end = 0;
  int last_id = -1;
  for (auto [ms, id] : ends) {
    auto& r = res[std::size_t(id)];
    if (id % 3 == 0) {
      ASSERT_TRUE(r) << "op " << id << ": " << r.error().message();
      EXPECT_EQ(*r, 3u);
      continue;
    }
    ASSERT_FALSE(r) << "op " << id << " should have timed out";
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
    EXPECT_GE(ms, 300.0 + 15 * id - 1) << "op " << id << " timed out early";
    EXPECT_LT(ms, 300.0 + 15 * id + 1000) << "op " << id << " timed out late";
    EXPECT_GT(id, last_id) << "op " << id << " timed out before op " << last_id << ", whose deadline was earlier";
    EXPECT_GE(ms, last_timeout_end);
    last_timeout_end = ms;
    last_id = id;
  }
}

namespace {
Task<void> recv_then_flag(int fd, io::Result<std::size_t>* out, std::atomic<bool>* done) {
  std::byte b[16];
  *out = co_await io::recv(fd, b, {.timeout = 30ms});
  done->store(true);
}
}  // namespace

// A worker that never runs out of tasks never parks, so only its
// scheduling points can notice the deadline: the operation still times
// out (not when the tasks stop).
TEST(Io, TimeoutFiresOnAWorkerThatNeverParks) {
  pwtest::Watchdog wd("Io.TimeoutFiresOnAWorkerThatNeverParks", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  io::Result<std::size_t> r(std::size_t(0));
  std::atomic<bool> done{false};
  const auto t0 = std::chrono::steady_clock::now();
  auto s = parkway::spawn(recv_then_flag(p.a, &r, &done), rt);
  ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 1; }));  // in the ring
  auto busy = [&]() -> Task<long> {
    long tasks = 0;
    // Small tasks until the receive is over, 5 s at most.
    while (!done.load() && ms_since(t0) < 5000) {
      parkway::TaskGroup g;
      for (int i = 0; i < 8; ++i) g.spawn([] {});
      g.wait();
      tasks += 8;
    }
    co_return tasks;
  };
  const long tasks = parkway::sync_wait(rt, busy());
  const double ms = ms_since(t0);
  s.get();
  std::printf("timed out after %.1f ms, %ld tasks run meanwhile, %llu parks\n", ms, tasks,
              (unsigned long long)rt.stats().total.parks);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  EXPECT_GE(ms, 29.0);
  EXPECT_LT(ms, 1000.0) << "the deadline was noticed only when the tasks stopped";
}

TEST(Io, SleepForSleepsAtLeastItsDuration) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto t0 = std::chrono::steady_clock::now();
  auto r = parkway::sync_wait(rt, []() -> Task<io::Result<void>> { co_return co_await io::sleep_for(40ms); }());
  EXPECT_TRUE(r) << r.error().message();
  EXPECT_GE(ms_since(t0), 39.0);
}

namespace {
Task<io::Result<std::size_t>> recv_cancellable(int fd, io::CancelSource* cs, std::atomic<int>* where) {
  std::byte b[16];
  where->store(parkway::Runtime::current_worker_index());
  co_return co_await io::recv(fd, b, {.cancel = cs});
}
}  // namespace

TEST(Io, CancelFromAnOutsideThread) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  Pair p;
  io::CancelSource cs;
  std::atomic<int> where{-1};
  auto f = parkway::spawn(recv_cancellable(p.a, &cs, &where), rt);
  ASSERT_TRUE(eventually([&] { return where.load() >= 0; }));
  std::this_thread::sleep_for(10ms);  // the worker is asleep in its ring by now
  cs.cancel();
  auto r = f.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled);
  // A cancelled source fails later operations at once.
  auto r2 = parkway::sync_wait(rt, recv_cancellable(p.a, &cs, &where));
  EXPECT_EQ(r2.error(), std::errc::operation_canceled);
}

namespace {
// A bare coroutine type, so a test can destroy a frame suspended in an
// operation (Task<T> never lets a suspended frame be destroyed).
struct Bare {
  struct promise_type {
    Bare get_return_object() { return Bare{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_always initial_suspend() noexcept { return {}; }
    // Marks the frame finished once it is suspended for good: a thread
    // that saw `finished` may destroy it.
    struct Final {
      bool await_ready() noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        h.promise().finished.store(true, std::memory_order_release);
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
    std::exception_ptr error;
    std::atomic<bool> finished{false};
  };
  std::coroutine_handle<promise_type> h;
};
struct Outcome {
  io::Result<std::size_t> r = io::Error();
};
Bare recv_into(int fd, io::CancelSource* cs, Outcome* out) {
  std::byte b[16];
  out->r = co_await io::recv(fd, b, {.cancel = cs});
}
}  // namespace

// Two tasks that meet at a barrier run on the two workers at once: the
// first starts a receive on its ring, the second cancels it through the
// first one's mailbox.
TEST(Io, CancelFromAnotherWorker) {
  pwtest::Watchdog wd("Io.CancelFromAnotherWorker", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int round = 0; round < 10; ++round) {
    Pair p;
    io::CancelSource cs;
    Outcome out;
    Bare b = recv_into(p.a, &cs, &out);
    std::atomic<int> arrived{0}, started{0};
    std::atomic<int> op_worker{-1}, cancel_worker{-1};
    auto meet = [&] {
      arrived.fetch_add(1);
      while (arrived.load() < 2) {
      }
    };
    auto f1 = rt.submit([&] {
      meet();
      op_worker.store(parkway::Runtime::current_worker_index());
      b.h.resume();  // suspends in recv, on this worker's ring
      started.store(1);
    });
    auto f2 = rt.submit([&] {
      meet();
      cancel_worker.store(parkway::Runtime::current_worker_index());
      while (started.load() == 0) {
      }
      cs.cancel();
    });
    f1.get();
    f2.get();
    ASSERT_TRUE(eventually([&] { return b.h.promise().finished.load(std::memory_order_acquire); }));
    EXPECT_NE(op_worker.load(), cancel_worker.load());
    ASSERT_FALSE(out.r);
    EXPECT_EQ(out.r.error(), std::errc::operation_canceled);
    b.h.destroy();
  }
}

namespace {
// A receive on *s, flagging `started` once its operation is made (before
// its co_await).
Task<io::Result<std::size_t>> recv_once_started(std::shared_ptr<io::Socket> s, std::atomic<int>* started) {
  std::byte b[16];
  auto op = s->recv(b);
  started->store(1);
  co_return co_await op;
}
// Keeps its worker busy, without a scheduling point, until released.
Task<void> spin_until_released(std::atomic<bool>* release, std::atomic<bool>* spinning) {
  spinning->store(true);
  while (!release->load()) std::this_thread::yield();
  co_return;
}
}  // namespace

TEST(Io, ClosingASocketCancelsItsOperations) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  Pair p;
  auto s = std::make_shared<io::Socket>(::dup(p.a));
  std::atomic<int> started{0};
  auto f = parkway::spawn(
      recv_once_started(s, &started),
      rt);
  ASSERT_TRUE(eventually([&] { return started.load() == 1; }));
  std::this_thread::sleep_for(10ms);
  s->close();
  auto r = f.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled);
  EXPECT_THROW((void)s->recv({}), std::logic_error);  // closed: misuse, named
}

namespace {
// fd's number is closed: fcntl fails with EBADF.
void expect_number_closed(int fd, const char* why) {
  errno = 0;
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << why;
  EXPECT_EQ(errno, EBADF);
}
}  // namespace

// Closing a Socket whose receive is still in flight keeps its number
// open until the receive has ended: an SQE names the descriptor by
// number, and one queued for the next flush (or an owned receive the
// reaper submits again) must not find the number given to another file
// meanwhile. The worker is kept busy so that the cancel waits in its
// mailbox; closing a socket with nothing in flight closes it at once.
TEST(Io, AClosedSocketKeepsItsNumberUntilItsOperationsEnd) {
  pwtest::Watchdog wd("Io.AClosedSocketKeepsItsNumberUntilItsOperationsEnd", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  const int fd = ::dup(p.a);
  auto s = std::make_shared<io::Socket>(fd);
  std::atomic<int> started{0};
  std::atomic<bool> release{false}, spinning{false};
  auto r = parkway::spawn(
      recv_once_started(s, &started),
      rt);
  ASSERT_TRUE(eventually([&] { return started.load() == 1; }));
  auto spin = parkway::spawn(spin_until_released(&release, &spinning), rt);
  ASSERT_TRUE(eventually([&] { return spinning.load(); }));
  s->close();  // the cancel waits in the busy worker's mailbox
  EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "the number was closed while its receive could still be submitted";
  release.store(true);
  spin.get();
  auto got = r.get();
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error(), std::errc::operation_canceled) << got.error().message();
  expect_number_closed(fd, "the last operation's end did not close it");

  const int idle_fd = ::dup(p.a);
  io::Socket idle(idle_fd);
  idle.close();
  expect_number_closed(idle_fd, "a socket with nothing in flight was not closed at once");
}

// The same for a listener whose multishot accept is armed but not yet
// submitted: the accept stream, not an operation, names the number, and
// the number must stay open until the accept has left the kernel.
TEST(Io, AClosedListenersNumberOutlivesItsArmedAccept) {
  pwtest::Watchdog wd("Io.AClosedListenersNumberOutlivesItsArmedAccept", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  const int fd = l->fd();
  std::atomic<bool> release{false}, spinning{false};
  auto taker = parkway::spawn(
      [](io::Listener* l, std::atomic<bool>* release, std::atomic<bool>* spinning) -> Task<io::Result<io::Socket>> {
        io::AcceptStream st = l->stream();
        // Queued behind our own suspension: the worker runs it next, with
        // the accept's SQE queued and not yet submitted.
        auto spin = parkway::spawn(spin_until_released(release, spinning));
        auto c = co_await st.next();
        co_await std::move(spin);
        co_return c;
      }(&*l, &release, &spinning),
      rt);
  ASSERT_TRUE(eventually([&] { return spinning.load(); }));
  l->close();
  EXPECT_NE(::fcntl(fd, F_GETFD), -1) << "the number was closed while its armed accept could still be submitted";
  release.store(true);
  auto c = taker.get();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), std::errc::operation_canceled) << c.error().message();
  expect_number_closed(fd, "the accept's last CQE did not close it");
}

namespace {
// A read whose offset no kernel call takes (below -1): it fails with
// EINVAL without the ring, but only on a worker.
Bare read_at_a_bad_offset(int fd, std::atomic<int>* stage) {
  std::byte buf[8];
  auto r = co_await io::read(fd, buf, -5);
  stage->store(r ? 0 : r.error().value());
}

Bare read_into_frame(int fd, std::atomic<int>* stage) {
  std::byte frame_buffer[64];  // the kernel would write here
  stage->store(1);
  auto r = co_await io::recv(fd, frame_buffer);
  stage->store(2);
  (void)r;
}
}  // namespace

// Destroying a coroutine suspended in an operation cancels it and waits
// until the kernel is done with the frame's buffer (ASAN sees any
// use-after-free); the data sent afterwards is still in the socket.
TEST(Io, CoroutineDestroyedWithAnOperationInFlight) {
  pwtest::Watchdog wd("Io.CoroutineDestroyedWithAnOperationInFlight", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  for (int from_outside = 0; from_outside < 2; ++from_outside) {
    Pair p;
    std::atomic<int> stage{0};
    Bare b = read_into_frame(p.a, &stage);
    rt.run([&] { b.h.resume(); });
    ASSERT_EQ(stage.load(), 1);
    std::this_thread::sleep_for(5ms);
    if (from_outside)
      b.h.destroy();
    else
      rt.run([&] { b.h.destroy(); });
    EXPECT_EQ(stage.load(), 1);
    ASSERT_EQ(::write(p.b, "abc", 3), 3);
    char got[8] = {};
    ASSERT_TRUE(eventually([&] { return ::read(p.a, got, sizeof got) == 3; }));
    EXPECT_EQ(std::memcmp(got, "abc", 3), 0);
  }
}

TEST(Io, OperationOutsideAWorkerIsRefusedByName) {
  Pair p;
  std::atomic<int> stage{0};
  Bare b = read_into_frame(p.a, &stage);
  b.h.resume();  // on this thread, outside any pool
  ASSERT_TRUE(b.h.done());
  ASSERT_TRUE(b.h.promise().error);
  try {
    std::rethrow_exception(b.h.promise().error);
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::strstr(e.what(), "recv"), nullptr) << e.what();
    EXPECT_NE(std::strstr(e.what(), "not on a parkway worker"), nullptr) << e.what();
  }
  b.h.destroy();
  // Arguments that fail the operation do not skip the check: outside a
  // worker it is refused the same way; on a worker it fails with EINVAL.
  Bare bad = read_at_a_bad_offset(p.a, &stage);
  bad.h.resume();
  ASSERT_TRUE(bad.h.done());
  EXPECT_TRUE(bad.h.promise().error) << "no std::logic_error; the co_await returned errno " << stage.load();
  bad.h.destroy();
  parkway::Runtime rt(parkway::Options{.workers = 1});
  stage = -1;
  Bare on_worker = read_at_a_bad_offset(p.a, &stage);
  rt.run([&] { on_worker.h.resume(); });
  EXPECT_EQ(stage.load(), EINVAL);
  rt.run([&] { on_worker.h.destroy(); });
}

// A worker parked inside its ring (a recv in flight) is woken by a new
// task, and by the completion; in both wake modes (this suite runs again
// with PARKWAY_IO_WAKE=eventfd).
TEST(Io, RingParkedWorkerWokenByATaskAndByACompletion) {
  pwtest::Watchdog wd("Io.RingParkedWorkerWokenByATaskAndByACompletion", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  auto f = parkway::spawn(recv_once(p.a, {}), rt);
  ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks >= 1; })) << "the worker never parked in its ring";
  const char* env = std::getenv("PARKWAY_IO_WAKE");
  const bool want_eventfd = env && std::strcmp(env, "eventfd") == 0;
  EXPECT_EQ(io::detail::process_wake_mode(nullptr) == io::detail::WakeMode::kEventfd, want_eventfd);
  for (int i = 0; i < 20; ++i) {  // woken by a task, then back to sleep in the ring
    EXPECT_EQ(rt.submit([i] { return i * 2; }).get(), i * 2);
    std::this_thread::sleep_for(1ms);
  }
  const auto parks = rt.stats().total.ring_parks;
  EXPECT_GE(parks, 2u);
  ASSERT_EQ(::write(p.b, "wake", 4), 4);  // woken by the completion
  auto r = f.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 4u);
}

// A worker whose ring is made when one descriptor is left: in the
// eventfd wake mode the ring needs two (the ring's, and the eventfd that
// wakes a worker parked in it), and the second one's EMFILE must be the
// operation's error (a value), not an abort at the
// worker's first park. Once descriptors are free again the worker makes
// its ring and runs the operation.
Task<io::Result<void>> sleep_1ms() { co_return co_await io::sleep_for(1ms); }

TEST(Io, NoDescriptorForTheRingsWakeIsAnErrorNotAnAbort) {
  pwtest::Watchdog wd("Io.NoDescriptorForTheRingsWakeIsAnErrorNotAnAbort", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  ASSERT_EQ(parkway::sync_wait(rt, []() -> Task<int> { co_return 1; }()), 1);  // the worker is up
  const int top = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(top, 0);
  ::close(top);
  std::vector<int> fillers;  // every hole below `top` taken: `top` is the one free number
  for (int fd = 0; fd < top; ++fd)
    if (fcntl(fd, F_GETFD) < 0) fillers.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = rlim_t(top + 1);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string first;
  try {
    auto r = parkway::sync_wait(rt, sleep_1ms());
    first = r ? "ok" : r.error().message();
  } catch (const std::system_error& e) {
    first = std::string("system_error: ") + e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  for (int f : fillers) ::close(f);
  // In eventfd mode the worker's park word may hold a doorbell already
  // (park words outlive their threads and are reused): then one
  // descriptor is enough.
  if (io::detail::process_wake_mode(nullptr) == io::detail::WakeMode::kEventfd)
    EXPECT_TRUE(first == "ok" || first == "sleep: Too many open files") << first;
  else
    EXPECT_EQ(first, "ok") << "one descriptor is all the futex wake mode's ring needs";
  auto r = parkway::sync_wait(rt, sleep_1ms());
  EXPECT_TRUE(r) << r.error().message();
}

// A worker makes its ring at the first operation it runs, and which
// worker runs a coroutine's next co_await is the scheduler's choice: a
// ring that cannot be made (no descriptor left) fails that operation
// with EMFILE, a value, as an accept loop that takes every error as a
// value expects. It used to throw std::system_error from the co_await,
// which ended such a loop for good (a server then left its backlog
// unaccepted). Both kinds of operation that make the ring are checked:
// an OpBase (a sleep) and an accept stream's next().
Task<std::string> ring_less_operations(io::Listener* l) {
  std::string out;
  auto s = co_await io::sleep_for(1ms);
  out += s ? "sleep ok" : s.error().message();
  io::AcceptStream st = l->stream();
  auto c = co_await st.next({.timeout = 10ms});
  out += "; ";
  out += c ? "accepted" : c.error().message();
  co_return out;
}

TEST(Io, ARingThatCannotBeMadeFailsItsOperationAsAValue) {
  pwtest::Watchdog wd("Io.ARingThatCannotBeMadeFailsItsOperationAsAValue", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  ASSERT_EQ(parkway::sync_wait(rt, []() -> Task<int> { co_return 1; }()), 1);  // the worker is up, ringless
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  const int top = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(top, 0);
  ::close(top);
  std::vector<int> fillers;  // every number below `top` taken, and `top` over the limit
  for (int fd = 0; fd < top; ++fd)
    if (fcntl(fd, F_GETFD) < 0) fillers.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = rlim_t(top);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::string first;
  try {
    first = parkway::sync_wait(rt, ring_less_operations(&*l));
  } catch (const std::exception& e) {
    first = std::string("threw: ") + e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  for (int f : fillers) ::close(f);
  EXPECT_EQ(first, "sleep: Too many open files; accept: Too many open files");
  // With descriptors again, the worker makes its ring and runs them.
  auto r = parkway::sync_wait(rt, sleep_1ms());
  EXPECT_TRUE(r) << r.error().message();
}

// A worker asleep in its ring with a receive in flight is idle, not
// waiting for a disk: on kernels with IORING_ENTER_NO_IOWAIT (6.15) its
// sleep must not count as I/O wait, which top shows as "wa", PSI as I/O
// pressure, and cpufreq's iowait boost answers with a higher clock (io.md,
// "A ring sleep is not I/O wait"). The worker is pinned to one CPU and
// that CPU's iowait read from /proc/stat; with PARKWAY_IO_IOWAIT=1 (the
// old accounting) it is the whole window and this test fails.
TEST(Io, ARingSleepIsNotIoWait) {
  {
    io_uring probe;
    io_uring_params p{};
    if (io_uring_queue_init_params(2, &probe, &p) != 0) GTEST_SKIP() << "io_uring_setup failed";
    const bool has = (p.features & io::detail::kFeatNoIowait) != 0;
    io_uring_queue_exit(&probe);
    if (!has) GTEST_SKIP() << "this kernel has no IORING_ENTER_NO_IOWAIT (Linux 6.15): a ring sleep counts as I/O wait";
  }
  pwtest::Watchdog wd("Io.ARingSleepIsNotIoWait", 60);
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpu = c;
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // the worker inherits it
  std::unique_ptr<parkway::Runtime> rt;
  try {
    rt = std::make_unique<parkway::Runtime>(parkway::Options{.workers = 1});
  } catch (...) {
    sched_setaffinity(0, sizeof(all), &all);
    throw;
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  Pair p;
  auto f = parkway::spawn(recv_once(p.a, {}), *rt);
  ASSERT_TRUE(eventually([&] { return rt->stats().total.ring_parks >= 1; })) << "the worker never parked in its ring";
  // iowait (the fifth number) of cpuN in /proc/stat, in clock ticks
  auto iowait_ticks = [cpu] {
    std::FILE* fp = std::fopen("/proc/stat", "r");
    if (!fp) return -1LL;
    char line[512];
    const std::string want = "cpu" + std::to_string(cpu) + " ";
    long long v = -1;
    while (std::fgets(line, sizeof(line), fp))
      if (std::strncmp(line, want.c_str(), want.size()) == 0) {
        long long u, n, s, i, w;
        if (std::sscanf(line + want.size(), "%lld %lld %lld %lld %lld", &u, &n, &s, &i, &w) == 5) v = w;
        break;
      }
    std::fclose(fp);
    return v;
  };
  // The CPU's iowait counts every task that waits for a disk there (a
  // file system's journal thread after a build, say): a window counts
  // against the worker only if all of up to three are over the bound.
  // The worker's own accounting, when wrong, fills every window.
  const std::uint64_t parks0 = rt->stats().total.ring_parks;
  long long waited = 0;
  double window_ticks = 0;
  for (int window = 0; window < 3; ++window) {
    const long long w0 = iowait_ticks();
    ASSERT_GE(w0, 0) << "no cpu" << cpu << " line in /proc/stat";
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(2s);
    waited = iowait_ticks() - w0;
    window_ticks = ms_since(t0) / 1000.0 * double(sysconf(_SC_CLK_TCK));
    std::printf("cpu%d: %lld ticks of iowait in %.0f with the worker asleep in its ring\n", cpu, waited, window_ticks);
    if (double(waited) <= 0.25 * window_ticks) break;
  }
  const std::uint64_t parks = rt->stats().total.ring_parks - parks0;
  EXPECT_LE(double(waited), 0.25 * window_ticks) << "the ring sleep was counted as I/O wait";
  EXPECT_LE(parks, 50u) << "the worker did not stay asleep (the window measured something else)";
  ASSERT_EQ(::write(p.b, "wake", 4), 4);
  auto r = f.get();
  ASSERT_TRUE(r) << r.error().message();
}

// The kernel's IORING_SQ_TASKRUN flag can be left set with no deferred
// work behind it (io.md, "A stale TASKRUN flag"). A worker that took it
// at its word entered the kernel at every scheduling point and never
// parked: a whole CPU for an idle server. The test sets the flag on a
// ring-parked worker's ring: it must clear it, park in its ring again,
// and still reap the completion that comes later.
TEST(Io, AStaleTaskrunFlagDoesNotKeepTheWorkerAwake) {
  pwtest::Watchdog wd("Io.AStaleTaskrunFlagDoesNotKeepTheWorkerAwake", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  auto f = parkway::spawn(recv_once(p.a, {}), rt);
  ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks >= 1; })) << "the worker never parked in its ring";
  const auto stale_before = rt.submit([] { return parkway::detail::Worker::current()->io_ring().stale_taskrun_hints(); }).get();
  // Counted before the task that sets the flag wakes the worker: the park
  // after it counts one more.
  const auto parks_before_raise = rt.stats().total.ring_parks;
  rt.submit([] { parkway::detail::Worker::current()->io_ring().raise_taskrun_flag_for_test(); }).get();
  const double cpu0 = process_cpu_ms();
  const bool parked_again = eventually([&] { return rt.stats().total.ring_parks > parks_before_raise; }, 2000ms);
  std::this_thread::sleep_for(300ms);
  const double cpu_ms = process_cpu_ms() - cpu0;
  EXPECT_TRUE(parked_again) << "the worker did not park in its ring again after the flag was set";
  const auto stale_after = rt.submit([] { return parkway::detail::Worker::current()->io_ring().stale_taskrun_hints(); }).get();
  EXPECT_GT(stale_after, stale_before) << "the stale flag was not found and cleared";
  std::printf("after a stale TASKRUN flag: %.3f ms CPU in about 300 ms\n", cpu_ms);
  if (!pwtest::kSanitized) {
    EXPECT_LE(cpu_ms, 30.0) << "the worker kept entering the kernel";
  }
  ASSERT_EQ(::write(p.b, "late", 4), 4);  // the completion after the clear is still reaped
  auto r = f.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, 4u);
}

namespace {
// An echo connection that sets its worker's TASKRUN flag after every
// receive, the last one (EOF) included, as if the kernel had left it
// stale at that moment.
Task<void> echo_raising_the_flag(io::Socket s, std::atomic<long>* raised) {
  std::vector<std::byte> buf(8192);
  for (;;) {
    auto n = co_await s.recv(buf);
    parkway::detail::Worker::current()->io_ring().raise_taskrun_flag_for_test();
    raised->fetch_add(1, std::memory_order_relaxed);
    if (!n || *n == 0) co_return;
    auto w = co_await s.send_all({buf.data(), *n});
    if (!w) co_return;
  }
}

Task<void> accept_raising(io::Listener& l, int n, std::atomic<long>* raised) {
  io::AcceptStream st = l.stream();
  for (int i = 0; i < n; ++i) {
    auto c = co_await st.next();
    if (!c) co_return;
    parkway::detach(echo_raising_the_flag(std::move(*c), raised));
  }
}
}  // namespace

// [F1] under traffic: the flag, set at every receive while completions
// keep coming on two workers, is cleared without losing or holding back
// one (every byte comes back, in order), and the pool then goes idle.
TEST(Io, EchoWithTheTaskrunFlagSetAtEveryReceive) {
  const int conns = 64;
  const std::size_t bytes = pwtest::kSanitized ? (64u << 10) : (256u << 10);
  pwtest::Watchdog wd("Io.EchoWithTheTaskrunFlagSetAtEveryReceive", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  std::atomic<long> raised{0};
  auto server = parkway::spawn(accept_raising(*l, conns, &raised), rt);
  ClientStats cs;
  parkway::sync_wait(rt, run_clients(l->local_address(), conns, bytes, &cs));
  server.get();
  EXPECT_EQ(cs.failed.load(), 0);
  EXPECT_EQ(cs.bad_bytes.load(), 0);
  EXPECT_GT(raised.load(), long(conns)) << "the flag was not set under traffic";
  std::printf("%ld receives set the flag\n", raised.load());
  // Under traffic the kernel's next run of its list clears the flag; the
  // last one set on each ring is left stale, and [F1] must clear it for
  // the pool to go idle.
  if (!pwtest::kSanitized) {
    std::this_thread::sleep_for(50ms);
    const double cpu0 = process_cpu_ms();
    std::this_thread::sleep_for(300ms);
    EXPECT_LE(process_cpu_ms() - cpu0, 30.0) << "the pool did not go idle after the traffic";
  }
}

namespace {
Task<void> wait_forever(int fd, std::atomic<int>* cancelled) {
  std::byte b[16];
  auto r = co_await io::recv(fd, b);
  if (!r && r.error() == std::errc::operation_canceled) cancelled->fetch_add(1);
}
Task<void> sleep_long(std::atomic<int>* cancelled) {
  auto r = co_await io::sleep_for(1h);
  if (!r && r.error() == std::errc::operation_canceled) cancelled->fetch_add(1);
}
}  // namespace

// Shutdown with I/O in flight: every operation is cancelled, its awaiter
// resumes with ECANCELED, and the runtime's destructor returns.
TEST(Io, ShutdownCancelsOperationsInFlight) {
  pwtest::Watchdog wd("Io.ShutdownCancelsOperationsInFlight", 60);
  std::vector<Pair> pairs(50);
  std::atomic<int> cancelled{0};
  {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    for (auto& p : pairs) parkway::detach(wait_forever(p.a, &cancelled), rt);
    parkway::detach(sleep_long(&cancelled), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 51; }));
  }
  EXPECT_EQ(cancelled.load(), 51);
}

namespace {
// After shutdown has cancelled its receive: a send with room, a receive
// whose bytes are there and an accept whose connection is queued. Each
// result: the count, or -errno.
Task<void> after_the_cancel(int idle, int tx, int rx, io::Listener* l, std::array<std::atomic<int>, 4>* out) {
  std::byte b[16];
  auto r = co_await io::recv(idle, b);  // nothing comes: the shutdown cancels it
  (*out)[0] = r ? int(*r) : -r.error().value();
  static const char msg[] = "hello";
  auto s = co_await io::send(tx, std::as_bytes(std::span(msg, 5)));
  (*out)[1] = s ? int(*s) : -s.error().value();
  auto q = co_await io::recv(rx, b);
  (*out)[2] = q ? int(*q) : -q.error().value();
  io::AcceptStream st = l->stream();
  auto c = co_await st.next();
  (*out)[3] = c ? 1 : -c.error().value();
}
}  // namespace

// Once shutdown has cancelled a worker's operations, one begun there
// after is cancelled too, even one the kernel could do at once: before,
// the send went out, the receive and the accept returned what was there.
TEST(Io, AnOperationBegunAfterTheShutdownsCancelIsCancelled) {
  pwtest::Watchdog wd("Io.AnOperationBegunAfterTheShutdownsCancelIsCancelled", 60);
  for (bool send_first : {true, false}) {
    SCOPED_TRACE(send_first ? "io_send_first" : "sends on the ring");
    Pair idle, tx, rx;
    ASSERT_EQ(::write(rx.b, "data", 4), 4);
    auto l = io::Listener::bind(io::Address::loopback(0));
    ASSERT_TRUE(l);
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const io::Address to = l->local_address();
    ASSERT_EQ(::connect(client, to.get(), to.size()), 0);  // queued in the backlog
    std::array<std::atomic<int>, 4> out;
    for (auto& o : out) o = 999;
    {
      parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = send_first});
      parkway::detach(after_the_cancel(idle.a, tx.a, rx.a, &*l, &out), rt);
      ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 1; }));
    }
    ::close(client);
    EXPECT_EQ(out[0], -ECANCELED);
    EXPECT_EQ(out[1], -ECANCELED) << "the send went out";
    EXPECT_EQ(out[2], -ECANCELED) << "the receive took the bytes";
    EXPECT_EQ(out[3], -ECANCELED) << "the accept took the connection";
    char b[8];
    EXPECT_EQ(::recv(tx.b, b, sizeof b, MSG_DONTWAIT), -1) << "the peer got the send";
    EXPECT_EQ(::recv(rx.a, b, sizeof b, MSG_DONTWAIT | MSG_PEEK), 4) << "the bytes were taken";
  }
}

namespace {
Task<void> wait_then_close(int sock, int fd, std::atomic<int>* close_err, std::atomic<int>* stage) {
  std::byte b[8];
  stage->store(1);
  (void)co_await io::recv(sock, b);  // ECANCELED by the shutdown
  auto c = co_await io::close(fd);
  close_err->store(c ? 0 : c.error().code().value());
  stage->store(2);
}
}  // namespace

// A close begun after the shutdown's cancel-everything still closes
// (io::close runs whatever else is cancelled). A POSIX message queue's
// descriptor has a flush method, so the kernel closes it in its worker
// thread, where the worker's next cancel-everything (the close counts as
// a new operation) found it queued and cancelled it: the close ended
// with ECANCELED and the descriptor stayed open.
TEST(Io, ACloseBegunAfterTheShutdownsCancelStillCloses) {
  pwtest::Watchdog wd("Io.ACloseBegunAfterTheShutdownsCancelStillCloses", 60);
  const int rounds = 30;
  int left_open = 0, cancelled = 0;
  for (int round = 0; round < rounds; ++round) {
    char name[64];
    std::snprintf(name, sizeof name, "/parkway-test-close-%d-%d", int(::getpid()), round);
    mq_attr attr{};
    attr.mq_maxmsg = 1;
    attr.mq_msgsize = 8;
    const int mq = mq_open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600, &attr);
    if (mq < 0) GTEST_SKIP() << "mq_open: " << std::strerror(errno);
    mq_unlink(name);
    Pair p;
    std::atomic<int> close_err{-1}, stage{0};
    {
      parkway::Runtime rt(parkway::Options{.workers = 1});
      parkway::detach(wait_then_close(p.a, mq, &close_err, &stage), rt);
      ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 1; }));
    }  // the shutdown cancels the receive; the task then closes mq
    ASSERT_EQ(stage.load(), 2);
    if (close_err.load() == ECANCELED) ++cancelled;
    if (::fcntl(mq, F_GETFD) != -1) {
      ++left_open;
      ::close(mq);
    }
  }
  EXPECT_EQ(cancelled, 0) << "of " << rounds << " closes";
  EXPECT_EQ(left_open, 0) << "of " << rounds << " descriptors stayed open";
}

namespace {
Task<void> accept_through_emfile(io::Listener* l, int want, bool use_stream, std::atomic<int>* emfile,
                                 std::atomic<int>* accepted) {
  std::vector<io::Socket> held;
  std::optional<io::AcceptStream> st;
  if (use_stream) st.emplace(l->stream());
  while (accepted->load() < want) {
    io::Result<io::Socket> c = io::Error();
    if (use_stream)
      c = co_await st->next();
    else
      c = co_await l->accept();
    if (c) {
      accepted->fetch_add(1);
      held.push_back(std::move(*c));
      continue;
    }
    if (c.error() == std::errc::too_many_files_open) {
      emfile->fetch_add(1);
      held.clear();  // descriptors free up: accepting must resume
      continue;
    }
    ADD_FAILURE() << "accept: " << c.error().message();
    co_return;
  }
}
}  // namespace

TEST(Io, AcceptSurvivesEmfile) {
  pwtest::Watchdog wd("Io.AcceptSurvivesEmfile", 60);
  for (bool use_stream : {false, true}) {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    auto l = io::Listener::bind(io::Address::loopback(0));
    ASSERT_TRUE(l);
    // The worker's ring exists before the limit is lowered.
    ASSERT_TRUE(parkway::sync_wait(rt, []() -> Task<io::Result<void>> { co_return co_await io::sleep_for(1ms); }()));
    const int want = 24;
    const std::vector<int> clients = connect_clients(l->local_address(), want);
    ASSERT_EQ(int(clients.size()), want);
    int top = 0;
    for (int fd = 0; fd < 4096; ++fd)
      if (fcntl(fd, F_GETFD) >= 0) top = fd;
    std::vector<int> fillers;  // no free descriptor below the limit but the six
    for (int fd = 0; fd < top; ++fd)
      if (fcntl(fd, F_GETFD) < 0) fillers.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
    rlimit low = old;
    low.rlim_cur = rlim_t(top + 1 + 6);  // room for six accepted sockets
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    std::atomic<int> emfile{0}, accepted{0};
    parkway::sync_wait(rt, accept_through_emfile(&*l, want, use_stream, &emfile, &accepted));
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
    for (int c : clients) ::close(c);
    for (int f : fillers) ::close(f);
    EXPECT_EQ(accepted.load(), want) << (use_stream ? "stream" : "one-shot");
    EXPECT_GT(emfile.load(), 0) << "the low limit never produced EMFILE";
  }
}

namespace {
int open_descriptor_count() {
  int n = 0;
  for (int fd = 0; fd < 65536; ++fd) n += fcntl(fd, F_GETFD) >= 0;
  return n;
}
// Takes connections until none comes for `quiet`.
Task<int> take_until_quiet(io::AcceptStream* st, std::chrono::milliseconds quiet, std::vector<io::Socket>* held) {
  int n = 0;
  for (;;) {
    auto c = co_await st->next({.timeout = quiet});
    if (!c) {
      if (c.error() != std::errc::timed_out) ADD_FAILURE() << "accept: " << c.error().message();
      co_return n;
    }
    held->push_back(std::move(*c));
    ++n;
  }
}
}  // namespace

// An armed accept stream accepts whether or not anyone takes. Past 64
// connections untaken it pauses (cancels its accept), so that later ones
// wait in the listener's backlog instead of each holding a descriptor
// here, and the next taker to find the queue empty arms it again and
// gets them all. Clients arrive one every 0.5 ms, each reaped before the
// next comes (a burst the kernel accepts in one go, before any is
// reaped, is not bounded: io.md, "The accept stream"). All 300 were
// queued before the pause.
TEST(Io, AnAcceptStreamNobodyTakesFromLeavesTheRestInTheBacklog) {
  pwtest::Watchdog wd("Io.AnAcceptStreamNobodyTakesFromLeavesTheRestInTheBacklog", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 512});
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  std::vector<io::Socket> held;
  // A taker that times out leaves the accept armed.
  EXPECT_EQ(parkway::sync_wait(rt, take_until_quiet(&st, 1ms, &held)), 0);
  const int before = open_descriptor_count();
  const int kClients = 300;
  const io::Address to = l->local_address();
  std::vector<int> clients;
  for (int i = 0; i < kClients; ++i) {
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(c, 0) << std::strerror(errno);
    ASSERT_EQ(::connect(c, to.get(), to.size()), 0) << "client " << i << ": " << std::strerror(errno);
    clients.push_back(c);
    std::this_thread::sleep_for(500us);
  }
  std::this_thread::sleep_for(50ms);
  const int queued = open_descriptor_count() - before - kClients;
  EXPECT_GE(queued, 64) << "the stream stopped accepting before 64 waited untaken";
  EXPECT_LE(queued, 64 + 32) << "connections accepted and not taken: the stream did not pause";
  // The next taker arms the accept again: every client is taken once.
  const int taken = parkway::sync_wait(rt, take_until_quiet(&st, 300ms, &held));
  EXPECT_EQ(taken, kClients);
  for (int c : clients) ::close(c);
}

namespace {
// Takes `total` connections in bursts of 1-100 with pauses of 0-6 ms
// between (long enough for 64 to queue and the stream to pause), every
// error but a timeout a failure; returns how many it took.
Task<int> take_in_bursts(io::AcceptStream* st, int total, unsigned seed) {
  int taken = 0;
  while (taken < total) {
    seed = seed * 1103515245u + 12345u;
    const int burst = 1 + int((seed >> 8) % 100);
    for (int i = 0; i < burst && taken < total; ++i) {
      auto c = co_await st->next({.timeout = 5s});
      if (!c) {
        ADD_FAILURE() << "accept after " << taken << " of " << total << ": " << c.error().message();
        co_return taken;
      }
      ++taken;
    }
    (void)co_await io::sleep_for(std::chrono::microseconds((seed >> 16) % 6000));
  }
  co_return taken;
}
}  // namespace

// The pause and its re-arm with a taker that comes and goes: clients
// arrive steadily while the taker takes in bursts and pauses, so the
// stream pauses, is armed again by next() or, when the taker began to
// wait before the pause's cancel ended the accept, by the re-arm task.
// Every connection is taken once, and no taker sees an error.
TEST(Io, AnAcceptStreamPausedAndArmedAgainLosesNoConnection) {
  pwtest::Watchdog wd("Io.AnAcceptStreamPausedAndArmedAgainLosesNoConnection", 60);
  const int kClients = 800 / pwtest::kSlow;  // each leaves a port in TIME_WAIT for 60 s
  for (unsigned workers : {1u, 2u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 4096});
    ASSERT_TRUE(l) << l.error().message();
    io::AcceptStream st = l->stream();
    const io::Address to = l->local_address();
    std::atomic<int> failed{0};
    std::thread clients([&] {
      for (int i = 0; i < kClients; ++i) {
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0 || ::connect(c, to.get(), to.size()) != 0) failed.fetch_add(1);
        if (c >= 0) ::close(c);  // accepted all the same: it waits in the backlog
      }
    });
    // Tasks of 0.5 ms keep the workers busy between their scheduling
    // points, so that a pause's cancel may wait in its ring's mailbox
    // while the taker, on another worker, drains the queue and waits.
    std::atomic<bool> stop{false};
    parkway::TaskGroup busy;
    std::function<void()> spin = [&] {
      const auto end = std::chrono::steady_clock::now() + 500us;
      while (std::chrono::steady_clock::now() < end) {
      }
      if (!stop.load()) busy.spawn(spin);
    };
    rt.run([&] { busy.spawn(spin); });
    const int taken = parkway::sync_wait(rt, take_in_bursts(&st, kClients, 7u + workers));
    stop.store(true);
    rt.run([&] { busy.wait(); });
    clients.join();
    EXPECT_EQ(failed.load(), 0) << workers << " worker(s)";
    EXPECT_EQ(taken, kClients) << workers << " worker(s)";
  }
}

namespace {
Task<int> take_through_a_pause(io::AcceptStream* st, std::atomic<int>* stage, int first, int total) {
  std::vector<io::Socket> held;
  auto c = co_await st->next({.timeout = 1ms});  // arms the accept
  if (c || c.error() != std::errc::timed_out) {
    ADD_FAILURE() << "a connection before the clients came";
    co_return 0;
  }
  // One worker: while this task spins, the taker's sleep ends and the
  // first clients wait in the backlog; the worker's next reap accepts
  // them all at once and reaps the sleep in the same batch, so the queue
  // passes 64 (the pause is posted) with no taker waiting.
  parkway::detach([](std::atomic<int>* stage) -> Task<void> {
    stage->store(1);
    while (stage->load() != 2) {
    }
    co_return;
  }(stage));
  (void)co_await io::sleep_for(1ms);
  int taken = 0;
  while (taken < total) {
    // The first `first` are queued; the next next() then waits while the
    // paused accept is still armed, and the accept's end arms it again.
    auto c = co_await st->next({.timeout = 5s});
    if (!c) {
      ADD_FAILURE() << "accept after " << taken << " of " << total << ": " << c.error().message();
      co_return taken;
    }
    held.push_back(std::move(*c));
    if (++taken == first) stage->store(3);  // the rest of the clients may come
  }
  co_return taken;
}
}  // namespace

// A taker that drains a paused stream's queue and waits before the
// pause's cancel has ended the accept arms nothing (the accept is still
// armed): the accept's end arms it again for the taker, from a task.
// Without that re-arm the taker waits for ever and the later clients
// stay in the backlog.
TEST(Io, ATakerThatWaitsWhileTheStreamPausesGetsItArmedAgain) {
  pwtest::Watchdog wd("Io.ATakerThatWaitsWhileTheStreamPausesGetsItArmedAgain", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 512});
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  const io::Address to = l->local_address();
  const int kFirst = 100, kTotal = 150;
  std::atomic<int> stage{0};
  std::vector<int> clients;
  std::thread connector([&] {
    auto connect_one = [&] {
      const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c < 0 || ::connect(c, to.get(), to.size()) != 0) ADD_FAILURE() << "connect: " << std::strerror(errno);
      clients.push_back(c);
    };
    while (stage.load() != 1) std::this_thread::yield();
    for (int i = 0; i < kFirst; ++i) connect_one();
    std::this_thread::sleep_for(5ms);  // the taker's sleep is over too
    stage.store(2);
    while (stage.load() != 3) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // the taker waits on the paused stream
    for (int i = kFirst; i < kTotal; ++i) connect_one();
  });
  const int taken = parkway::sync_wait(rt, take_through_a_pause(&st, &stage, kFirst, kTotal));
  if (stage.load() != 3) stage.store(3);  // a failed taker: let the connector finish
  connector.join();
  for (int c : clients) ::close(c);
  EXPECT_EQ(taken, kTotal);
}

// What the workers did while they should have slept: the counters that
// moved, per worker, so a failing idle check says where the CPU went.
std::string describe_idle_activity(const parkway::Stats& before, const parkway::Stats& after) {
  std::string out = "counters that moved while idle:";
  for (std::size_t i = 0; i < after.workers.size() && i < before.workers.size(); ++i) {
    const parkway::WorkerStats& x = before.workers[i];
    const parkway::WorkerStats& y = after.workers[i];
    out += "\n  worker " + std::to_string(i) + ": executed +" + std::to_string(y.executed - x.executed) +
           ", parks +" + std::to_string(y.parks - x.parks) + ", ring_parks +" +
           std::to_string(y.ring_parks - x.ring_parks) + ", io_ops +" + std::to_string(y.io_ops - x.io_ops) +
           ", failed_steals +" + std::to_string(y.failed_steals - x.failed_steals) + ", wakeups +" +
           std::to_string(y.wakeups - x.wakeups) + ", park_fences +" + std::to_string(y.park_fences - x.park_fences);
  }
  return out;
}

TEST(Io, IdleConnectionsCostNoCpu) {
  if (pwtest::kSanitized) GTEST_SKIP() << "the sanitizer runtime's own threads use CPU";
  const int conns = 10000;
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_max < rlim_t(conns + 200))
    GTEST_SKIP() << "RLIMIT_NOFILE's hard limit " << r.rlim_max << " is too low for " << conns << " connections";
  if (r.rlim_cur < rlim_t(conns + 200)) {
    rlimit want{r.rlim_max, r.rlim_max};
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &want), 0);
  }
  pwtest::Watchdog wd("Io.IdleConnectionsCostNoCpu", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 4096});
  ASSERT_TRUE(l);
  std::atomic<int> accept_errors{0};
  auto server = parkway::spawn(accept_n(*l, conns, &accept_errors), rt);
  // The clients live in a child process (its own descriptor table): it
  // connects them all, reports on a pipe, and holds them until the pipe
  // back to it closes. It calls only async-signal-safe functions.
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const io::Address addr = l->local_address();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(up[0]);
    ::close(down[1]);
    char ok = 1;
    for (int i = 0; i < conns && ok; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c < 0 || ::connect(c, addr.get(), addr.size()) != 0) ok = 0;
    }
    (void)!::write(up[1], &ok, 1);
    char x;
    (void)!::read(down[0], &x, 1);  // returns when the parent closes its end
    _exit(0);
  }
  ::close(up[1]);
  ::close(down[0]);
  char ok = 0;
  ASSERT_EQ(::read(up[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1) << "the client process could not connect every client";
  server.get();
  ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= std::uint64_t(conns) + 1; }));
  std::this_thread::sleep_for(100ms);
  const parkway::Stats before = rt.stats();
  const double cpu0 = process_cpu_ms();
  std::this_thread::sleep_for(2s);
  const double cpu_ms = process_cpu_ms() - cpu0;
  const parkway::Stats after = rt.stats();
  std::printf("%d idle connections: %.3f ms CPU in 2 s\n", conns, cpu_ms);
  EXPECT_LE(cpu_ms, 2.0) << describe_idle_activity(before, after);
  ::close(down[1]);  // the child exits; the echo coroutines see EOF and end
  ::close(up[0]);
  int status = 0;
  waitpid(child, &status, 0);
}

// A Result read through a const reference: the value, or IoError. (The
// accessors took only non-const objects: this did not compile.)
TEST(Io, AConstResultReadsItsValue) {
  const io::Result<std::string> good(std::string("abc"));
  const io::Result<std::string>& g = good;
  EXPECT_EQ(g.value(), "abc");
  EXPECT_EQ(*g, "abc");
  EXPECT_EQ(g->size(), 3u);
  const io::Result<std::string> bad(io::Error(ECONNRESET, "recv"));
  EXPECT_THROW((void)bad.value(), io::IoError);
  EXPECT_THROW((void)*bad, io::IoError);
}

// The message names the operation and the errno's text; a default Error
// (no operation, no errno) says so instead of ": Success".
TEST(Io, AnErrorsMessageNamesItsOperation) {
  EXPECT_EQ(io::Error(ECONNRESET, "recv").message(), "recv: Connection reset by peer");
  EXPECT_EQ(io::Error(ECONNRESET, "").message(), "Connection reset by peer");
  EXPECT_EQ(io::Error().message(), "no error");
  EXPECT_EQ(io::Error(0, "send").message(), "send: no error");
}

TEST(Io, ErrorsAreValuesNamingTheOperation) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  // A refused connection: nobody listens on this port.
  auto probe = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(probe);
  io::Address a = probe->local_address();
  probe->close();
  auto c = parkway::sync_wait(rt, io::Socket::connect(a));
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), std::errc::connection_refused);
  EXPECT_STREQ(c.error().op(), "connect");
  EXPECT_THROW(c.value(), io::IoError);
  // EOF is a zero-byte recv; EBADF is a value too.
  Pair p;
  ::close(p.b);
  p.b = -1;
  auto r = parkway::sync_wait(rt, recv_once(p.a, {}));
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, 0u);
  auto bad = parkway::sync_wait(rt, recv_once(1 << 20, {}));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::errc::bad_file_descriptor);
}

TEST(Io, FilesReadWriteAndStat) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  char path[] = "/tmp/parkway-io-XXXXXX";
  int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  auto body = [](const char* path) -> Task<std::string> {
    auto f = co_await io::File::open(path, O_RDWR | O_TRUNC);
    if (!f) co_return "open: " + f.error().message();
    const char text[] = "parkway reads and writes files through its rings";
    auto w = co_await f->write_at({reinterpret_cast<const std::byte*>(text), sizeof text - 1}, 100);
    if (!w || *w != sizeof text - 1) co_return "write failed";
    auto st = co_await f->stat();
    if (!st || st->size != 100 + sizeof text - 1) co_return "stat: wrong size";
    std::vector<std::byte> buf(sizeof text - 1);
    auto r = co_await f->read_at(buf, 100);
    if (!r || std::memcmp(buf.data(), text, *r) != 0) co_return "read mismatch";
    auto missing = co_await io::File::open("/nonexistent/parkway");
    if (missing || missing.error() != std::errc::no_such_file_or_directory) co_return "open of a missing file";
    co_return "ok";
  };
  EXPECT_EQ(parkway::sync_wait(rt, body(path)), "ok");
  ::unlink(path);
}

// A read at an offset whose data is in the page cache is copied at its
// co_await (Options::io_read_first, io.md "Reads from the page cache");
// with the option off every read goes to the ring, with the same bytes.
// A read the attempt cannot do (here: a descriptor not open for reading)
// goes to the ring, which reports its own error, named "read".
TEST(Io, AReadFromThePageCacheFinishesAtItsCoAwait) {
  char path[] = "/tmp/parkway-io-XXXXXX";
  int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  std::string text(10000, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = char(pattern(7, i));
  ASSERT_EQ(::write(tmp, text.data(), text.size()), ssize_t(text.size()));  // now in the page cache
  ::close(tmp);
  for (bool first : {true, false}) {
    SCOPED_TRACE(first ? "io_read_first" : "every read on the ring");
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_read_first = first});
    auto body = [](const char* path, const std::string& text) -> Task<std::string> {
      auto f = co_await io::File::open(path, O_RDONLY);
      if (!f) co_return "open: " + f.error().message();
      std::vector<std::byte> buf(4096);
      auto r = co_await f->read_at(buf, 3000);
      if (!r || *r != 4096 || std::memcmp(buf.data(), text.data() + 3000, 4096) != 0) co_return "read mismatch";
      auto tail = co_await f->read_at(buf, 9000);  // a short read at the end
      if (!tail || *tail != 1000 || std::memcmp(buf.data(), text.data() + 9000, 1000) != 0) co_return "short read";
      auto eof = co_await f->read_at(buf, 20000);
      if (!eof || *eof != 0) co_return "read past the end";
      co_return "ok";
    };
    EXPECT_EQ(parkway::sync_wait(rt, body(path, text)), "ok");
    auto bad = [](const char* path) -> Task<std::string> {
      int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0) co_return "open failed";
      io::File f(fd);
      std::vector<std::byte> buf(16);
      auto r = co_await f.read_at(buf, 0);
      if (r) co_return "read from a write-only descriptor succeeded";
      co_return r.error().message();
    };
    EXPECT_EQ(parkway::sync_wait(rt, bad(path)), "read: Bad file descriptor");
    const parkway::Stats st = rt.stats();
    EXPECT_EQ(st.total.io_read_now, first ? 3u : 0u);
    EXPECT_EQ(st.total.io_ops, first ? 2u : 5u) << "operations on the ring: the open and the failed read, or every one";
  }
  ::unlink(path);
}

TEST(Io, OptionsOfTheRingAreValidated) {
  EXPECT_THROW(parkway::Runtime(parkway::Options{.workers = 1, .io_sq_entries = 0}), std::invalid_argument);
  EXPECT_THROW(parkway::Runtime(parkway::Options{.workers = 1, .io_sq_entries = 64, .io_cq_entries = 32}),
               std::invalid_argument);
  // A small SQ: many operations at once are flushed and retried.
  parkway::Runtime rt(parkway::Options{.workers = 1, .io_sq_entries = 4});
  std::vector<Pair> pairs(64);
  std::atomic<int> cancelled{0};
  auto t = [](std::vector<Pair>* pairs) -> Task<long> {
    std::vector<parkway::Spawned<io::Result<std::size_t>>> rs;
    for (auto& p : *pairs) rs.push_back(parkway::spawn(recv_once(p.a, {.timeout = 20ms})));
    long timed_out = 0;
    for (auto& r : rs) {
      auto x = co_await std::move(r);
      timed_out += !x && x.error() == std::errc::timed_out;
    }
    co_return timed_out;
  };
  EXPECT_EQ(parkway::sync_wait(rt, t(&pairs)), 64);
  (void)cancelled;
}

namespace {
Task<io::Result<io::Socket>> take_one(io::AcceptStream* st, io::OpOptions o = {}) { co_return co_await st->next(o); }
}  // namespace

// Closing a Listener cancels its armed multishot accept: the waiting
// taker resumes with ECANCELED, and no connection is accepted after.
TEST(Io, ClosingAListenerCancelsItsAcceptStream) {
  pwtest::Watchdog wd("Io.ClosingAListenerCancelsItsAcceptStream", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l);
  io::AcceptStream st = l->stream();
  auto f = parkway::spawn(take_one(&st), rt);
  ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 1; }));
  std::this_thread::sleep_for(5ms);
  l->close();
  auto r = f.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled);
}

namespace {
Task<void> take_into(io::AcceptStream* st, std::string* out) {
  try {
    // A bound for a broken stream only: the first taker waits through the
    // setup of the second (a loaded host took 2 s once).
    auto c = co_await st->next({.timeout = 20s});
    *out = c ? "a connection" : c.error().message();
  } catch (const std::logic_error& e) {
    *out = e.what();
  }
}
// After a byte on fd: the same as take_into.
Task<void> take_after_byte(int fd, io::AcceptStream* st, std::string* out) {
  std::byte b[1];
  (void)co_await io::recv(fd, b);
  co_await take_into(st, out);
}
}  // namespace

// One coroutine at a time awaits an accept stream: a second one is
// refused with std::logic_error while the first waits, and also while
// the first's resume is queued (its connection delivered, its
// continuation not run yet). Before, that second taker took the first
// one's connection, and the first resumed with ECANCELED.
TEST(Io, ASecondTakerOfAnAcceptStreamIsRefused) {
  pwtest::Watchdog wd("Io.ASecondTakerOfAnAcceptStreamIsRefused", 60);
  const std::string busy = "parkway::io::AcceptStream::next: another coroutine is already waiting on this stream";
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l);
  const io::Address to = l->local_address();
  {
    io::AcceptStream st = l->stream();
    std::string first, second;
    auto a = parkway::spawn(take_into(&st, &first), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 2; }));  // the guard and the accept
    parkway::spawn(take_into(&st, &second), rt).get();
    EXPECT_EQ(second, busy) << "while the first waits";
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(client, to.get(), to.size()), 0);
    a.get();
    EXPECT_EQ(first, "a connection");
    ::close(client);
  }
  {
    // The one worker is kept busy while a byte arrives for the second
    // taker, then a connection for the first: both are reaped in one
    // batch, in that order, and the second taker calls next() with the
    // first's continuation queued behind it.
    io::AcceptStream st = l->stream();
    Pair p;
    std::string first, second;
    auto a = parkway::spawn(take_into(&st, &first), rt);
    auto b = parkway::spawn(take_after_byte(p.a, &st, &second), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 5; }));  // a's guard and accept, b's receive
    // b's receive may still be queued in the SQ (io.md, "When SQEs go to
    // the kernel"): submitted only after the blocker, it would complete
    // behind the accept armed before it, and a would resume first. A ring
    // park's entry submits it; one that begins from now on comes after
    // it was queued (the no-op makes the worker park again if it slept).
    const std::uint64_t parks = rt.stats().total.ring_parks;
    rt.submit([] {}).get();
    ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks > parks; }));
    std::atomic<bool> started{false}, release{false};
    auto blocker = rt.submit([&] {
      started.store(true);
      while (!release.load()) {
      }
    });
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    ASSERT_EQ(::write(p.b, "x", 1), 1);
    std::this_thread::sleep_for(5ms);
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(client, to.get(), to.size()), 0);
    std::this_thread::sleep_for(5ms);
    release.store(true);
    blocker.get();
    a.get();
    b.get();
    EXPECT_EQ(second, busy) << "while the first's resume is queued";
    EXPECT_EQ(first, "a connection");
    ::close(client);
  }
}

namespace {
// Takes connections from *st until *stop, counting what next() gave;
// a refusal (another taker waits or is resuming) is counted and retried,
// with a sleep now and then so that this worker reaps its ring.
Task<void> take_until_stopped(io::AcceptStream* st, const std::atomic<bool>* stop, std::atomic<int>* ended,
                              std::atomic<long>* conns, std::atomic<long>* cancelled, std::atomic<long>* refused) {
  unsigned spins = 0;
  while (!stop->load(std::memory_order_relaxed)) {
    try {
      auto c = co_await st->next();
      if (c) ++*conns;
      else if (c.error() == std::errc::operation_canceled) ++*cancelled;
    } catch (const std::logic_error&) {
      ++*refused;
      ++spins;
    }
    if (spins % 256 == 255) {
      ++spins;
      (void)co_await io::sleep_for(0ns);
    }
  }
  ++*ended;
}
}  // namespace

// What next() hands a taker is its own from the moment it is decided,
// under the queue's lock, not only once its await_resume pops it. Two
// gaps let a second taker on another worker take it before: a taker
// resumed with its connection (its continuation run, or its guard's
// error pushed) and not yet in its await_resume; and a taker whose
// await_ready saw a connection queued (so did the other's). The loser
// found the queue empty: ECANCELED, which the docs reserve for a
// destroyed stream or a closed listener. Two takers on two workers,
// connections arriving back to back: an ECANCELED within 1.3 s in 6 of 6
// runs before; none in 3 s now.
TEST(Io, ATakerResumedWithItsConnectionKeepsItFromASecondTaker) {
  pwtest::Watchdog wd("Io.ATakerResumedWithItsConnectionKeepsItFromASecondTaker", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l);
  const io::Address to = l->local_address();
  std::atomic<bool> stop{false};
  std::atomic<int> ended{0};
  std::atomic<long> conns{0}, cancelled{0}, refused{0};
  std::atomic<long> connected{0};   // the clients' connects that succeeded
  std::atomic<int> client_error{0};  // the errno of a client that gave up
  long cancelled_by_takers = 0;
  {
    io::AcceptStream st = l->stream();
    auto a = parkway::spawn(take_until_stopped(&st, &stop, &ended, &conns, &cancelled, &refused), rt);
    auto b = parkway::spawn(take_until_stopped(&st, &stop, &ended, &conns, &cancelled, &refused), rt);
    // Connections until both takers have ended (each ends after a next()
    // that returned: the last one needs a connection too). A connect()
    // gives up after 100 ms (EINPROGRESS), so that the loop sees the
    // takers end: the listener's backlog can be full with no accept armed
    // (a burst of accepts filled the CQ, which ends the multishot accept,
    // and the takers ended on results still queued, so none armed it
    // again); the kernel then drops every SYN, and a blocking connect
    // retries for some 127 s. A socket() or connect() that fails is
    // retried: EINPROGRESS as above, EADDRNOTAVAIL while the ports it
    // could use are in TIME_WAIT, EMFILE while accepted connections wait
    // in the queue. One that fails for 10 s on end is reported with its
    // errno: the takers would wait for ever for their last connection.
    std::thread clients([&] {
      const timeval connect_limit{0, 100000};
      std::chrono::steady_clock::time_point failing_since{};
      while (ended.load() < 2) {
        int err = 0;
        const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c < 0) {
          err = errno;
        } else {
          if (::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &connect_limit, sizeof connect_limit) != 0 ||
              ::connect(c, to.get(), to.size()) != 0)
            err = errno;
          ::close(c);
        }
        if (err == 0) {
          ++connected;
          failing_since = {};
          continue;
        }
        const auto now = std::chrono::steady_clock::now();
        if (failing_since == std::chrono::steady_clock::time_point{}) failing_since = now;
        if (now - failing_since > 10s) {
          client_error.store(err);
          break;
        }
        std::this_thread::sleep_for(1ms);
      }
    });
    const auto t0 = std::chrono::steady_clock::now();
    while (cancelled.load() == 0 && std::chrono::steady_clock::now() - t0 < 3s) std::this_thread::sleep_for(1ms);
    stop.store(true);
    // The takers end with the next connections, at most 10 s of a client's
    // retries away. If not, the failure says why, and closing the listener
    // ends their waits (ECANCELED) so that the test ends.
    const long connected_at_stop = connected.load();
    const auto t1 = std::chrono::steady_clock::now();
    while (ended.load() < 2 && client_error.load() == 0 && std::chrono::steady_clock::now() - t1 < 20s)
      std::this_thread::sleep_for(1ms);
    cancelled_by_takers = cancelled.load();
    if (ended.load() < 2) {
      const int err = client_error.load();
      if (err != 0)
        ADD_FAILURE() << "a client could not connect for 10 s: " << std::strerror(err) << " (errno " << err << ")";
      else
        ADD_FAILURE() << 2 - ended.load() << " taker(s) still waiting 20 s after the stop, "
                      << connected.load() - connected_at_stop << " connections made since";
      l->close();
    }
    a.get();
    b.get();
    clients.join();
  }
  EXPECT_EQ(cancelled_by_takers, 0) << "a taker's connection went to the other taker (" << conns.load()
                                    << " connections taken, " << refused.load() << " refusals)";
  EXPECT_GT(conns.load(), 0);
}

// Shutdown also reaches I/O that a worker waits for inside a task (a
// helping wait, not its main loop): the wait's ring park cancels it.
TEST(Io, ShutdownCancelsIoAWaitingTaskNeeds) {
  pwtest::Watchdog wd("Io.ShutdownCancelsIoAWaitingTaskNeeds", 60);
  Pair p;
  std::atomic<int> started{0};
  parkway::Future<bool> f;
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    f = rt.submit([&] {
      started.store(1);
      auto r = parkway::spawn(recv_once(p.a, {})).get();  // waits on this worker, helping
      return !r && r.error() == std::errc::operation_canceled;
    });
    ASSERT_TRUE(eventually([&] { return started.load() == 1 && rt.stats().total.ring_parks >= 1; }));
  }
  EXPECT_TRUE(f.get());
}

namespace {
// Destroys *rt on another thread. True if that had not returned after
// `limit`; then a byte written to `unblock` completes the receive that
// held it, so a test that fails does not hang.
bool shutdown_hangs(std::unique_ptr<parkway::Runtime>& rt, int unblock, std::chrono::milliseconds limit) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    rt.reset();
    done.store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (!done.load() && std::chrono::steady_clock::now() - t0 < limit) std::this_thread::sleep_for(5ms);
  const bool hung = !done.load();
  if (hung) (void)!::write(unblock, "x", 1);
  t.join();
  return hung;
}
}  // namespace

// With two workers, the receive a task waits for is on the ring of the
// waiting worker P (asleep in it, inside the wait), and the other worker
// Q parked in its main loop after P. Shutdown's one wake [X2] goes to Q,
// which may not leave (P is not quiet) and parks again: P must still be
// woken to cancel its ring's operations ([X1b]). All three runs hung
// before.
TEST(Io, ShutdownReachesAWorkerWaitingInsideATaskInItsRing) {
  pwtest::Watchdog wd("Io.ShutdownReachesAWorkerWaitingInsideATaskInItsRing", 60);
  int hangs = 0;
  for (int run = 0; run < 3; ++run) {
    Pair p;
    auto rt = std::make_unique<parkway::Runtime>(parkway::Options{.workers = 2});
    std::atomic<int> stage{0};
    auto q = rt->submit([&] {  // Q: busy 200 ms, then parks last
      stage.store(1);
      std::this_thread::sleep_for(200ms);
    });
    while (stage.load() != 1) std::this_thread::sleep_for(1ms);
    auto f = rt->submit([&] {  // P: waits, helping, for a receive on its own ring
      auto r = parkway::spawn(recv_once(p.a, {})).get();
      return r ? 0 : int(r.error().value());
    });
    q.get();
    std::this_thread::sleep_for(100ms);
    hangs += shutdown_hangs(rt, p.b, 3000ms);
    EXPECT_EQ(f.get(), ECANCELED) << "run " << run;
  }
  EXPECT_EQ(hangs, 0) << hangs << " of 3 shutdowns hung";
}

// The receive is on the ring of worker P, parked in its main loop; the
// other worker Q waits for it inside a task and parked after P. [X2]'s
// wake goes to Q, which is not in its main loop and parks again: P must
// still come round to cancel. All three runs hung before.
TEST(Io, ShutdownReachesARingWhoseAwaiterWaitsOnAnotherWorker) {
  pwtest::Watchdog wd("Io.ShutdownReachesARingWhoseAwaiterWaitsOnAnotherWorker", 60);
  int hangs = 0;
  for (int run = 0; run < 3; ++run) {
    Pair p;
    auto rt = std::make_unique<parkway::Runtime>(parkway::Options{.workers = 2});
    std::atomic<int> stage{0};
    std::unique_ptr<parkway::Spawned<io::Result<std::size_t>>> s;
    auto q = rt->submit([&] {
      stage.store(1);
      std::this_thread::sleep_for(200ms);
      while (stage.load() != 2) std::this_thread::sleep_for(1ms);
      auto r = s->get();  // Q waits, helping, and parks after P
      return r ? 0 : int(r.error().value());
    });
    while (stage.load() != 1) std::this_thread::sleep_for(1ms);
    // Runs on P (Q is busy), whose receive then sleeps in P's ring.
    s = std::make_unique<parkway::Spawned<io::Result<std::size_t>>>(parkway::spawn(recv_once(p.a, {}), *rt));
    stage.store(2);
    std::this_thread::sleep_for(400ms);
    hangs += shutdown_hangs(rt, p.b, 3000ms);
    EXPECT_EQ(q.get(), ECANCELED) << "run " << run;
  }
  EXPECT_EQ(hangs, 0) << hangs << " of 3 shutdowns hung";
}

// The same echo with every send on the ring (Options::io_send_first =
// false): the ring's send path, not only the one a full socket takes.
TEST(Io, EchoWithEverySendOnTheRing) {
  pwtest::Watchdog wd("Io.EchoWithEverySendOnTheRing", 120);
  const int conns = 50;
  const std::size_t bytes = 64u << 10;
  parkway::Runtime rt(parkway::Options{.workers = 2, .io_send_first = false});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  std::atomic<int> accept_errors{0};
  auto server = parkway::spawn(accept_n(*l, conns, &accept_errors), rt);
  ClientStats cs;
  parkway::sync_wait(rt, run_clients(l->local_address(), conns, bytes, &cs));
  server.get();
  EXPECT_EQ(cs.failed.load(), 0);
  EXPECT_EQ(cs.bad_bytes.load(), 0);
  parkway::Stats st = rt.stats();
  EXPECT_EQ(st.total.io_sent_now, 0u);
  // Both directions of every connection went through rings: at least a
  // send and a recv per 16 KiB echoed.
  EXPECT_GE(st.total.io_ops, std::uint64_t(conns) * 2 * (bytes / 16384));
}

namespace {
Task<io::Result<std::size_t>> send_all_once(int fd, std::span<const std::byte> b, io::OpOptions o) {
  co_return co_await io::send_all(fd, b, o);
}
// What is waiting on fd now, read without blocking.
std::size_t drain(int fd) {
  std::size_t got = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) return got;
    got += std::size_t(n);
  }
}
}  // namespace

// A send goes out at its co_await while the socket has room; once it has
// none the rest waits on the ring for room; a cancel that came first
// sends nothing; with io_send_first off the ring does all of it.
TEST(Io, SendsGoOutAtTheirCoAwaitUntilTheSocketIsFull) {
  pwtest::Watchdog wd("Io.SendsGoOutAtTheirCoAwaitUntilTheSocketIsFull", 60);
  const std::byte small[5] = {std::byte('h'), std::byte('e'), std::byte('l'), std::byte('l'), std::byte('o')};
  {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    Pair p;
    auto r = parkway::sync_wait(rt, send_all_once(p.a, small, {}));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, sizeof small);
    EXPECT_EQ(drain(p.b), sizeof small);
    parkway::Stats st = rt.stats();
    EXPECT_EQ(st.total.io_sent_now, 1u);
    EXPECT_EQ(st.total.io_ops, 0u) << "a send with room went to the ring";

    // Far more than the socket holds: the first part goes at once, the
    // rest waits on the ring until a reader makes room.
    std::vector<std::byte> big(8u << 20);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = pattern(3, i);
    auto f = parkway::spawn(send_all_once(p.a, big, {}), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 1; })) << "the full socket's send never reached the ring";
    std::vector<std::byte> got;
    got.reserve(big.size());
    std::vector<std::byte> buf(65536);
    while (got.size() < big.size()) {
      ssize_t n = ::recv(p.b, buf.data(), buf.size(), 0);  // p.b is non-blocking: spin until data
      if (n > 0) got.insert(got.end(), buf.begin(), buf.begin() + n);
      else ASSERT_TRUE(n < 0 && errno == EAGAIN) << std::strerror(errno);
    }
    auto br = f.get();
    ASSERT_TRUE(br) << br.error().message();
    EXPECT_EQ(*br, big.size());
    EXPECT_TRUE(got == big) << "bytes of the big send came out changed or out of order";

    // Cancelled before it began: ECANCELED, and nothing reaches the peer.
    io::CancelSource c;
    c.cancel();
    auto cr = parkway::sync_wait(rt, send_all_once(p.a, small, {.cancel = &c}));
    ASSERT_FALSE(cr);
    EXPECT_EQ(cr.error(), std::errc::operation_canceled);
    EXPECT_EQ(drain(p.b), 0u);

    // Errors come back as values naming the operation.
    ::close(p.b);
    p.b = -1;
    auto er = parkway::sync_wait(rt, send_all_once(p.a, small, {}));
    ASSERT_FALSE(er);
    EXPECT_EQ(er.error(), std::errc::broken_pipe);
    EXPECT_STREQ(er.error().op(), "send");
  }
  {
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = false});
    Pair p;
    auto r = parkway::sync_wait(rt, send_all_once(p.a, small, {}));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(drain(p.b), sizeof small);
    parkway::Stats st = rt.stats();
    EXPECT_EQ(st.total.io_sent_now, 0u);
    EXPECT_EQ(st.total.io_ops, 1u);
  }
}

// A worker whose only business is I/O in flight, with no worker running
// a task, parks after one search round instead of all of them: 40 idle
// gaps cost a few failed steal rounds each, not search_rounds (32).
TEST(Io, AWorkerWaitingForItsIoParksWithoutSearchingOn) {
  pwtest::Watchdog wd("Io.AWorkerWaitingForItsIoParksWithoutSearchingOn", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2, .search_rounds = 32});
  Pair p;
  auto reader = [](int fd, int n) -> Task<int> {
    int got = 0;
    std::byte b[1];
    while (got < n) {
      auto r = co_await io::recv(fd, b);
      if (!r || *r == 0) break;
      ++got;
    }
    co_return got;
  };
  const int n = 40;
  auto f = parkway::spawn(reader(p.a, n), rt);
  std::uint64_t parked = 0;
  for (int i = 0; i < n; ++i) {
    // The reader's worker runs out of work and parks (a wait for that,
    // not only a fixed sleep: a worker slowed down, under a sanitizer or
    // on a busy machine, would get two bytes in one wake), and sleeps a
    // while: a byte that comes as it parks makes it search again.
    ASSERT_TRUE(eventually([&] { return rt.stats().total.parks > parked; })) << "byte " << i;
    std::this_thread::sleep_for(2ms);
    parked = rt.stats().total.parks;
    ASSERT_EQ(::write(p.b, "x", 1), 1);
  }
  EXPECT_EQ(f.get(), n);
  parkway::Stats st = rt.stats();
  const std::uint64_t sleeps = st.total.parks;
  // The property is the ring's owner's: a sibling with no I/O in flight
  // searches its rounds when something wakes it, as a compute pool does.
  std::uint64_t ring_failed = 0, ring_parks = 0;
  for (std::size_t i = 0; i < st.workers.size(); ++i) {
    const parkway::WorkerStats& w = st.workers[i];
    std::printf("worker %zu: %llu I/O ops, %llu parks (%llu in its ring), %llu failed steal rounds\n", i,
                (unsigned long long)w.io_ops, (unsigned long long)w.parks, (unsigned long long)w.ring_parks,
                (unsigned long long)w.failed_steals);
    if (w.io_ops != 0) {
      ring_failed += w.failed_steals;
      ring_parks += w.parks;
    }
  }
  std::printf("%llu parks, %llu failed steal rounds\n", (unsigned long long)sleeps,
              (unsigned long long)st.total.failed_steals);
  ASSERT_GE(sleeps, std::uint64_t(n));
  EXPECT_LE(ring_failed, 4 * ring_parks) << "workers waiting for their I/O searched on";
}

// ---- the ready queue of I/O continuations (io/ready_queue.hpp) ----------

TEST(ReadyQueue, FirstInFirstOutWithinItsCapacity) {
  namespace iod = parkway::io::detail;
  auto q = std::make_unique<iod::ReadyQueue>();
  std::vector<parkway::detail::Task> t(iod::ReadyQueue::kCapacity + 1,
                                       parkway::detail::Task([](parkway::detail::Task*) noexcept { return true; }));
  EXPECT_EQ(q->take(), nullptr);
  EXPECT_FALSE(q->maybe_nonempty());
  for (std::uint32_t i = 0; i < iod::ReadyQueue::kCapacity; ++i) ASSERT_TRUE(q->push(&t[i]));
  EXPECT_EQ(q->room(), 0u);
  EXPECT_FALSE(q->push(&t.back())) << "a full queue took one more";
  for (std::uint32_t round = 0; round < 3; ++round) {  // wrap around several times
    for (std::uint32_t i = 0; i < iod::ReadyQueue::kCapacity; ++i) {
      ASSERT_EQ(q->take(), &t[(i + round * 7) % iod::ReadyQueue::kCapacity]);
      ASSERT_TRUE(q->push(&t[(i + (round + 1) * 7) % iod::ReadyQueue::kCapacity]));
    }
  }
  EXPECT_TRUE(q->maybe_nonempty());
}

// The owner pushes and takes while four thieves take: every task is
// taken exactly once, and each taker sees its tasks in push order.
TEST(ReadyQueue, EachTaskTakenOnceInOrderWithFourThieves) {
  namespace iod = parkway::io::detail;
  const std::size_t n = pwtest::kSanitized ? 50000 : 400000;
  auto q = std::make_unique<iod::ReadyQueue>();
  std::vector<parkway::detail::Task> t(n, parkway::detail::Task([](parkway::detail::Task*) noexcept { return true; }));
  std::vector<std::atomic<int>> taken(n);
  std::atomic<bool> stop{false};
  std::atomic<long> out_of_order{0};
  auto record = [&](parkway::detail::Task* x, std::size_t* last) {
    const std::size_t i = std::size_t(x - t.data());
    taken[i].fetch_add(1, std::memory_order_relaxed);
    if (*last != ~std::size_t(0) && i <= *last) out_of_order.fetch_add(1, std::memory_order_relaxed);
    *last = i;
  };
  std::vector<std::thread> thieves;
  for (int k = 0; k < 4; ++k)
    thieves.emplace_back([&] {
      std::size_t last = ~std::size_t(0);
      while (!stop.load(std::memory_order_acquire))
        if (parkway::detail::Task* x = q->take()) record(x, &last);
      while (parkway::detail::Task* x = q->take()) record(x, &last);
    });
  std::size_t last = ~std::size_t(0);
  for (std::size_t i = 0; i < n;) {
    if (q->push(&t[i])) ++i;
    if ((i & 7) == 0)
      if (parkway::detail::Task* x = q->take()) record(x, &last);
  }
  stop.store(true, std::memory_order_release);
  for (auto& th : thieves) th.join();
  while (parkway::detail::Task* x = q->take()) record(x, &last);
  std::size_t wrong = 0;
  for (auto& c : taken) wrong += c.load() != 1;
  EXPECT_EQ(wrong, 0u) << "tasks taken other than exactly once";
  EXPECT_EQ(out_of_order.load(), 0);
}

namespace {
void spin_ms(int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
  }
}
// After its receive, a long computation of many tasks on this worker.
Task<void> compute_after_recv(int fd, int tasks, int ms_each) {
  std::byte b[1];
  (void)co_await io::recv(fd, b);
  parkway::TaskGroup g;
  for (int i = 0; i < tasks; ++i) g.spawn([ms_each] { spin_ms(ms_each); });
  g.wait();
}
Task<void> stamp_after_recv(int fd, std::atomic<std::int64_t>* at) {
  std::byte b[1];
  (void)co_await io::recv(fd, b);
  at->store(std::chrono::steady_clock::now().time_since_epoch().count());
}
}  // namespace

// Two completions reaped in one batch on one worker: one continuation
// starts 100 tasks of 3 ms, the other only notes the time. Whichever came
// first, the short one runs within a task's length or so, never after
// the whole computation (300 ms): continuations wait in a FIFO queue that
// every scheduling point serves, not under the tasks a sibling spawned.
TEST(Io, AContinuationIsNotBuriedUnderASiblingsTasks) {
  pwtest::Watchdog wd("Io.AContinuationIsNotBuriedUnderASiblingsTasks", 60);
  for (bool short_first : {true, false}) {
    parkway::Runtime rt(parkway::Options{.workers = 1});
    Pair quick, heavy;
    std::atomic<std::int64_t> resumed{0}, blocker_end{0};
    auto c = parkway::spawn(compute_after_recv(heavy.a, 100, 3), rt);
    auto s = parkway::spawn(stamp_after_recv(quick.a, &resumed), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 2; }));
    std::atomic<bool> started{false};
    // Keep the worker busy while both completions arrive: they are
    // reaped together once the blocker returns.
    auto blocker = rt.submit([&] {
      started.store(true);
      spin_ms(40);
      blocker_end.store(std::chrono::steady_clock::now().time_since_epoch().count());
    });
    ASSERT_TRUE(eventually([&] { return started.load(); }));
    std::this_thread::sleep_for(2ms);
    int first = short_first ? quick.b : heavy.b, second = short_first ? heavy.b : quick.b;
    ASSERT_EQ(::write(first, "x", 1), 1);
    std::this_thread::sleep_for(2ms);
    ASSERT_EQ(::write(second, "x", 1), 1);
    blocker.get();
    s.get();
    c.get();
    const double waited_ms = double(resumed.load() - blocker_end.load()) / 1e6;
    std::printf("short continuation %s: ran %.1f ms after the blocker\n", short_first ? "first" : "second", waited_ms);
    EXPECT_LT(waited_ms, 60.0) << "the short continuation waited for its sibling's tasks";
  }
}

namespace {
// Receives a byte on a Socket of its own (a dup of fd), then notes id.
// All on one worker: no lock.
Task<void> note_after_recv(int fd, int id, std::vector<int>* order) {
  io::Socket s(::dup(fd));
  std::byte b[1];
  (void)co_await s.recv(b);
  order->push_back(id);
}
// The bytes of every waiting receive arrive, then late's bytes, and only
// then is late's receive issued.
Task<void> recv_after_its_bytes(std::vector<Pair>* waiting, Pair* late, std::vector<int>* order) {
  for (auto& p : *waiting)
    if (::write(p.b, "x", 1) != 1) throw std::runtime_error("write");
  if (::write(late->b, "x", 1) != 1) throw std::runtime_error("write");
  io::Socket s(::dup(late->a));
  std::byte b[1];
  (void)co_await s.recv(b);
  order->push_back(-1);
}
}  // namespace

// A receive on a socket whose bytes are already there completes behind
// the receives whose bytes came before (Options::io_recv_poll_first):
// eight receives wait on one worker, their bytes arrive, then a ninth
// connection's bytes and only then its receive. The ninth's continuation
// runs last. With the option off, on a DEFER_TASKRUN ring, it completes
// while its SQE is submitted and runs first: the queue jump the option
// removes.
TEST(Io, AReceiveWhoseBytesAreThereWaitsItsTurn) {
  pwtest::Watchdog wd("Io.AReceiveWhoseBytesAreThereWaitsItsTurn", 60);
  for (bool poll_first : {true, false}) {
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_recv_poll_first = poll_first});
    std::vector<Pair> waiting(8);
    Pair late;
    std::vector<int> order;
    std::vector<parkway::Spawned<void>> all;
    // On a failed ASSERT the receives still waiting end (EOF) before
    // their Spawned handles wait for them.
    struct EndReceives {
      std::vector<Pair>& w;
      ~EndReceives() {
        for (auto& p : w) ::shutdown(p.b, SHUT_WR);
      }
    } end_receives{waiting};
    for (int i = 0; i < int(waiting.size()); ++i) all.push_back(parkway::spawn(note_after_recv(waiting[i].a, i, &order), rt));
    ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= waiting.size(); }));
    // Their receives are in the kernel once the worker, out of work, has
    // parked in its ring (its park's entry submits them).
    ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks >= 1; }));
    std::this_thread::sleep_for(50ms);
    parkway::sync_wait(rt, recv_after_its_bytes(&waiting, &late, &order));
    for (auto& s : all) s.get();
    const bool defers = rt.submit([] { return parkway::detail::Worker::current()->io_ring().defers_taskrun(); }).get();
    ASSERT_EQ(order.size(), waiting.size() + 1);
    const auto late_at = std::find(order.begin(), order.end(), -1) - order.begin();
    std::printf("io_recv_poll_first %s: the late receive ran %td of %zu\n", poll_first ? "true" : "false", late_at + 1,
                order.size());
    for (int i = 0; i < int(waiting.size()); ++i) EXPECT_EQ(order[i + (late_at <= i)], i) << "the waiting receives ran out of order";
    if (poll_first) {
      EXPECT_EQ(late_at, std::ptrdiff_t(waiting.size())) << "the late receive went ahead of receives whose bytes came first";
    } else if (defers) {
      EXPECT_EQ(late_at, 0) << "with the option off the late receive should complete at its submission";
    }
  }
}

namespace {
Task<std::pair<int, int>> dontwait_twice(int fd) {
  io::Socket s(::dup(fd));
  std::byte b[8];
  auto got = co_await s.recv(b, {}, MSG_DONTWAIT);
  auto none = co_await s.recv(b, {}, MSG_DONTWAIT);
  co_return std::pair<int, int>{got ? int(*got) : -got.error().value(), none ? int(*none) : -none.error().value()};
}
Task<std::pair<int, double>> recv_on_a_pipe(int fd) {
  const auto t0 = std::chrono::steady_clock::now();
  std::byte b[8];
  auto r = co_await io::recv(fd, b);
  co_return std::pair<int, double>{r ? int(*r) : -r.error().value(), ms_since(t0)};
}
}  // namespace

// A receive on a socket with MSG_DONTWAIT takes the bytes there (the
// kernel's poll-first would fail it with EAGAIN before it looked), and
// with none there fails with EAGAIN at once.
TEST(Io, AReceiveWithDontwaitTakesTheBytesThere) {
  pwtest::Watchdog wd("Io.AReceiveWithDontwaitTakesTheBytesThere", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  ASSERT_EQ(::write(p.b, "abc", 3), 3);
  const auto [got, none] = parkway::sync_wait(rt, dontwait_twice(p.a));
  EXPECT_EQ(got, 3);
  EXPECT_EQ(none, -EAGAIN);
}

namespace {
// Whether the kernel ends a no-op with the result its SQE names
// (IORING_NOP_INJECT_RESULT), which io::detail::g_inject_kernel_eagain
// relies on.
bool kernel_injects_nop_results() {
  io_uring ring;
  if (io_uring_queue_init(2, &ring, 0) != 0) return false;
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_nop(sqe);
  sqe->rw_flags = int(io::detail::kNopInjectResult);
  sqe->len = static_cast<unsigned>(-EAGAIN);
  io_uring_cqe* cqe = nullptr;
  bool ok = io_uring_submit_and_wait(&ring, 1) == 1 && io_uring_peek_cqe(&ring, &cqe) == 0 && cqe->res == -EAGAIN;
  io_uring_queue_exit(&ring);
  return ok;
}
struct AgainResults {
  int slept = -1, sent = 0, received = 0, owned = 0, timed_out = 0;
};
// `peer` writes 3 bytes before each receive. The sleep first is no send
// or receive: the injection passes it by (its timespec shares its bytes
// with a send's or receive's arguments, OpState::again_args).
Task<AgainResults> send_recv_after_kernel_eagain(int fd, int peer) {
  io::Socket s(::dup(fd));
  AgainResults r;
  auto z = co_await io::sleep_for(std::chrono::milliseconds(1));
  r.slept = z ? 0 : z.error().value();
  const char hello[] = "hello";
  auto w = co_await s.send(std::as_bytes(std::span(hello, 5)));
  r.sent = w ? int(*w) : -w.error().value();
  std::byte b[8];
  if (::write(peer, "abc", 3) != 3) std::abort();
  auto n = co_await s.recv(b);
  r.received = n ? int(*n) : -n.error().value();
  if (::write(peer, "def", 3) != 3) std::abort();
  auto o = co_await io::recv_owned(fd, 8);
  r.owned = o ? int(o->size()) : -o.error().value();
  auto t = co_await s.recv(b, {.timeout = std::chrono::milliseconds(20)});
  r.timed_out = t ? int(*t) : -t.error().value();
  co_return r;
}
}  // namespace

// A send or receive that the kernel's worker thread ends with EAGAIN on
// the non-blocking socket (io.md, "EAGAIN from the kernel's worker
// thread") goes in again: its co_await gets the bytes, or its deadline's
// ETIMEDOUT, never EAGAIN. The kernel's EAGAIN is made by a no-op that
// ends with it, submitted in the operation's place.
TEST(Io, ASendOrReceiveTheKernelEndsWithEagainGoesInAgain) {
  pwtest::Watchdog wd("Io.ASendOrReceiveTheKernelEndsWithEagainGoesInAgain", 60);
  if (!kernel_injects_nop_results())
    GTEST_SKIP() << "this kernel cannot end a no-op with a given result (IORING_NOP_INJECT_RESULT, Linux 6.10)";
  for (const unsigned pool : {128u, 0u}) {  // owned receives through the ring's pool, and without it
    SCOPED_TRACE(pool);
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = false,  // the send on the ring
                                         .io_recv_pool_buffers = pool});
    Pair p;
    io::detail::g_inject_kernel_eagain.store(4);
    const AgainResults r = parkway::sync_wait(rt, send_recv_after_kernel_eagain(p.a, p.b));
    EXPECT_EQ(io::detail::g_inject_kernel_eagain.exchange(0), 0);
    EXPECT_EQ(r.slept, 0);
    EXPECT_EQ(r.sent, 5);
    EXPECT_EQ(r.received, 3);
    EXPECT_EQ(r.owned, 3);
    EXPECT_EQ(r.timed_out, -ETIMEDOUT);
    EXPECT_EQ(rt.stats().total.io_kernel_again, 4u);
    EXPECT_EQ(rt.stats().total.io_recv_pool_empty, 0u);
    char got[8] = {};
    EXPECT_EQ(::read(p.b, got, sizeof got), 5);
    EXPECT_STREQ(got, "hello");
  }
}

// A receive on a descriptor that is no socket fails with ENOTSOCK at
// once, even with nothing to read on it.
TEST(Io, AReceiveOnAPipeFailsAtOnce) {
  pwtest::Watchdog wd("Io.AReceiveOnAPipeFailsAtOnce", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  const auto [res, ms] = parkway::sync_wait(rt, recv_on_a_pipe(fds[0]));
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(res, -ENOTSOCK);
  EXPECT_LT(ms, 1000.0) << "the receive waited for the pipe";
}

namespace {
Task<void> spin_after_recv(int fd, int ms, std::atomic<int>* done) {
  std::byte b[1];
  (void)co_await io::recv(fd, b);
  spin_ms(ms);
  done->fetch_add(1);
}
Task<void> send_after_recv(int fd, int to) {
  std::byte b[1];
  (void)co_await io::recv(fd, b);
  (void)co_await io::send(to, std::span<const std::byte>(b, 1));
}
}  // namespace

// A send on the ring queued while a batch of continuations runs reaches
// the kernel within a few tasks (kFlushTicks = 4), not at the batch's
// end: the peer has it while most of twenty 5 ms continuations behind it
// have yet to run.
TEST(Io, ASendOnTheRingGoesOutWithinAFewTasksOfABatch) {
  pwtest::Watchdog wd("Io.ASendOnTheRingGoesOutWithinAFewTasksOfABatch", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1, .io_send_first = false});
  Pair trigger, out;
  std::vector<Pair> slow(20);
  std::atomic<int> slow_done{0};
  std::vector<parkway::Spawned<void>> all;
  all.push_back(parkway::spawn(send_after_recv(trigger.a, out.a), rt));
  for (auto& p : slow) all.push_back(parkway::spawn(spin_after_recv(p.a, 5, &slow_done), rt));
  ASSERT_TRUE(eventually([&] { return rt.stats().total.io_ops >= 21; }));
  std::atomic<bool> started{false};
  auto blocker = rt.submit([&] {
    started.store(true);
    spin_ms(30);
  });
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  ASSERT_EQ(::write(trigger.b, "x", 1), 1);  // first: its continuation runs first
  for (auto& p : slow) ASSERT_EQ(::write(p.b, "x", 1), 1);
  blocker.get();
  const auto t0 = std::chrono::steady_clock::now();
  char c;
  while (::recv(out.b, &c, 1, MSG_DONTWAIT) != 1) ASSERT_LT(ms_since(t0), 5000.0);
  const int behind = slow_done.load();
  for (auto& s : all) s.get();
  std::printf("the send reached the peer after %d of the 20 continuations behind it\n", behind);
  EXPECT_LE(behind, 8) << "the ring's send waited for the end of the batch";
}

// ---- owned receives (io::recv_owned; io.md, "Receives that take memory
// when bytes arrive") -------------------------------------------------------

namespace {
Task<io::Result<io::Bytes>> recv_owned_once(int fd, std::size_t max, io::OpOptions o = {}, int flags = 0) {
  co_return co_await io::recv_owned(fd, max, o, flags);
}

// Reads `want` bytes of pattern(seed, .) with owned receives of up to
// `max`; counts bytes that differ, and failures.
Task<void> drain_owned(int fd, std::size_t want, std::uint64_t seed, std::size_t max, std::atomic<long>* bad,
                       std::atomic<long>* failed, std::atomic<long>* largest) {
  std::size_t got = 0;
  while (got < want) {
    auto r = co_await io::recv_owned(fd, max);
    if (!r || r->empty()) {
      failed->fetch_add(1);
      co_return;
    }
    if (r->capacity() != max) failed->fetch_add(1);
    long n = long(r->size());
    long seen = largest->load();
    while (n > seen && !largest->compare_exchange_weak(seen, n)) {
    }
    for (std::size_t i = 0; i < r->size(); ++i)
      if (r->data()[i] != pattern(seed, got + i)) bad->fetch_add(1);
    got += r->size();
  }
}

void write_pattern(int fd, std::size_t bytes, std::uint64_t seed) {
  std::vector<std::byte> b(bytes);
  for (std::size_t i = 0; i < bytes; ++i) b[i] = pattern(seed, i);
  std::size_t off = 0;
  while (off < bytes) {
    ssize_t w = ::write(fd, b.data() + off, bytes - off);
    if (w > 0)
      off += std::size_t(w);
    else if (w < 0 && errno == EAGAIN)
      std::this_thread::sleep_for(100us);
    else
      std::abort();
  }
}

Bare owned_recv_into_frame(int fd, std::atomic<int>* stage) {
  stage->store(1);
  auto r = co_await io::recv_owned(fd, 256);
  stage->store(2);
  (void)r;
}
}  // namespace

// With the ring's pool (the default) and without it (every receive takes
// its block up front): the bytes, the block's size, a message larger than
// one pool buffer, EOF, a timeout, a refused max of 0 and a coroutine
// destroyed while its owned receive waits (ASAN: nothing leaks, nothing is
// written after the frame is gone).
TEST(Io, AnOwnedReceiveTakesItsBlockWhenBytesArrive) {
  pwtest::Watchdog wd("Io.AnOwnedReceiveTakesItsBlockWhenBytesArrive", 60);
  for (unsigned buffers : {128u, 0u}) {
    SCOPED_TRACE(buffers ? "pool of 128 buffers of 64 bytes" : "no pool");
    parkway::Runtime rt(parkway::Options{.workers = 2, .io_recv_pool_buffers = buffers,
                                         .io_recv_pool_buffer_bytes = 64});
    Pair p;
    ASSERT_EQ(::write(p.b, "hello", 5), 5);
    auto r = run_on(rt, recv_owned_once(p.a, 100));
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->size(), 5u);
    EXPECT_EQ(r->capacity(), 100u);
    EXPECT_EQ(std::memcmp(r->data(), "hello", 5), 0);
    std::unique_ptr<std::byte[]> block = r->release();
    EXPECT_NE(block, nullptr);
    EXPECT_EQ(r->size(), 0u);

    // 300 bytes at once: a pool buffer holds 64 of them, a block of its own 300.
    std::atomic<long> bad{0}, failed{0}, largest{0};
    write_pattern(p.b, 300, 11);
    run_on(rt, drain_owned(p.a, 300, 11, 1000, &bad, &failed, &largest));
    EXPECT_EQ(bad.load(), 0);
    EXPECT_EQ(failed.load(), 0);
    if (buffers)
      EXPECT_EQ(largest.load(), 64) << "a receive got more than one pool buffer holds";
    else
      EXPECT_EQ(largest.load(), 300);

    auto t = run_on(rt, recv_owned_once(p.a, 100, {.timeout = 30ms}));
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error(), std::errc::timed_out) << t.error().message();
    EXPECT_STREQ(t.error().op(), "recv");

    EXPECT_THROW((void)run_on(rt, recv_owned_once(p.a, 0)), std::invalid_argument);
    // MSG_TRUNC would report more than the block holds (a datagram's
    // whole length: a copy past both blocks, under ASAN an overflow).
    EXPECT_THROW((void)run_on(rt, recv_owned_once(p.a, 100, {}, MSG_TRUNC)), std::invalid_argument);

    std::atomic<int> stage{0};
    Bare b = owned_recv_into_frame(p.a, &stage);
    rt.run([&] { b.h.resume(); });
    ASSERT_EQ(stage.load(), 1);
    std::this_thread::sleep_for(5ms);
    rt.run([&] { b.h.destroy(); });
    ASSERT_EQ(::write(p.b, "abc", 3), 3);
    char got[8] = {};
    ASSERT_TRUE(eventually([&] { return ::read(p.a, got, sizeof got) == 3; }));
    EXPECT_EQ(std::memcmp(got, "abc", 3), 0) << "a cancelled owned receive took bytes";

    ::close(std::exchange(p.b, -1));
    auto eof = run_on(rt, recv_owned_once(p.a, 100));
    ASSERT_TRUE(eof) << eof.error().message();
    EXPECT_TRUE(eof->empty());
    EXPECT_EQ(eof->data(), nullptr) << "EOF took a block";
    EXPECT_EQ(rt.stats().total.io_recv_pool_empty, 0u);
  }
}

// A pool of one buffer and 200 connections whose bytes all arrive at
// once: most receives find the pool empty (ENOBUFS) and go in again, and
// every byte still arrives, in order. Beside them, streams that stop at a
// cancel or at a deadline: a receive caught between its ENOBUFS and its
// second submission when the cancel (or the deadline's) comes must still
// end with ECANCELED (ETIMEDOUT); had the reaper submitted it again after
// the cancel went by, it would wait for bytes that never come, and the
// watchdog would fail the test.
TEST(Io, OwnedReceivesSurviveAnEmptyPool) {
  pwtest::Watchdog wd("Io.OwnedReceivesSurviveAnEmptyPool", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2, .io_recv_pool_buffers = 1, .io_recv_pool_buffer_bytes = 64});
  const int conns = 200, stopped = 16;
  const std::size_t bytes = 4096;
  std::vector<Pair> pairs(conns), by_cancel(stopped), by_deadline(stopped);
  std::atomic<long> bad{0}, failed{0}, largest{0};
  std::atomic<int> timed_out{0}, was_cancelled{0}, other_end{0};
  io::CancelSource cs;
  const auto t0 = std::chrono::steady_clock::now();
  const auto cancel_at = t0 + 60ms, deadline = t0 + 80ms;
  // Receives until the stream ends with an error: counts ECANCELED or
  // ETIMEDOUT, and any other end.
  auto until_stopped = [](int fd, io::OpOptions o, std::atomic<int>* ended, std::errc want,
                          std::atomic<int>* other) -> Task<void> {
    for (;;) {
      auto r = co_await io::recv_owned(fd, 64, o);
      if (r && !r->empty()) continue;
      if (!r && r.error() == want) ended->fetch_add(1);
      else other->fetch_add(1);
      co_return;
    }
  };
  auto all = [&]() -> Task<void> {
    std::vector<parkway::Spawned<void>> ts;
    for (int i = 0; i < conns; ++i)
      ts.push_back(parkway::spawn(drain_owned(pairs[std::size_t(i)].a, bytes, std::uint64_t(i), 64, &bad, &failed,
                                              &largest)));
    for (auto& c : by_cancel)
      ts.push_back(parkway::spawn(until_stopped(c.a, {.cancel = &cs}, &was_cancelled, std::errc::operation_canceled,
                                                &other_end)));
    for (auto& d : by_deadline)
      ts.push_back(parkway::spawn(until_stopped(d.a, {.deadline = deadline}, &timed_out, std::errc::timed_out,
                                                &other_end)));
    for (auto& s : ts) co_await std::move(s);
  };
  std::thread writer([&] {
    const std::byte chunk[64] = {};
    std::vector<std::size_t> sent(conns, 0);
    bool cancelled = false;
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (!cancelled && now >= cancel_at) {
        cs.cancel();  // and no more bytes for those streams
        cancelled = true;
      }
      bool more = false;
      for (int i = 0; i < conns; ++i) {
        std::size_t& off = sent[std::size_t(i)];
        if (off == bytes) continue;
        more = true;
        std::byte b[256];
        const std::size_t n = std::min(sizeof b, bytes - off);
        for (std::size_t k = 0; k < n; ++k) b[k] = pattern(std::uint64_t(i), off + k);
        ssize_t w = ::write(pairs[std::size_t(i)].b, b, n);
        if (w > 0) off += std::size_t(w);
      }
      for (int i = 0; i < stopped; ++i) {
        if (!cancelled) (void)!::write(by_cancel[std::size_t(i)].b, chunk, sizeof chunk);
        if (now < deadline) (void)!::write(by_deadline[std::size_t(i)].b, chunk, sizeof chunk);
      }
      if (!more && cancelled && now >= deadline) return;
      std::this_thread::sleep_for(200us);
    }
  });
  parkway::sync_wait(rt, all());
  writer.join();
  const auto empty = rt.stats().total.io_recv_pool_empty;
  std::printf("%d connections x %zu bytes, and %d streams stopped by a cancel and %d by a deadline, through a pool "
              "of one 64-byte buffer: %llu receives found it empty\n",
              conns, bytes, stopped, stopped, static_cast<unsigned long long>(empty));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LE(largest.load(), 64);
  EXPECT_GT(empty, 0u) << "the pool never ran empty: the test did not reach the path it is for";
  EXPECT_EQ(was_cancelled.load(), stopped);
  EXPECT_EQ(timed_out.load(), stopped);
  EXPECT_EQ(other_end.load(), 0);
}

TEST(Io, OptionsOfTheReceivePoolAreValidated) {
  EXPECT_THROW(parkway::Runtime(parkway::Options{.workers = 1, .io_recv_pool_buffers = 3}), std::invalid_argument);
  EXPECT_THROW(parkway::Runtime(parkway::Options{.workers = 1, .io_recv_pool_buffers = 65536}), std::invalid_argument);
  EXPECT_THROW(parkway::Runtime(parkway::Options{.workers = 1, .io_recv_pool_buffer_bytes = 63}),
               std::invalid_argument);
  try {
    parkway::Runtime rt(parkway::Options{.workers = 1, .io_recv_pool_buffer_bytes = (2u << 20)});
    ADD_FAILURE() << "a 2 MiB pool buffer was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("io_recv_pool_buffer_bytes"), std::string::npos) << e.what();
  }
}

namespace {
Bare take_one(io::AcceptStream* st, std::atomic<int>* stage) {
  stage->store(1);
  auto c = co_await st->next();
  stage->store(2);
  (void)c;
}

// A client connected to l (a blocking connect): its number, -1 if the
// connect failed.
int connect_client(const io::Listener& l) {
  const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(c, l.local_address().get(), l.local_address().size()) == 0) return c;
  ::close(c);
  return -1;
}

// AcceptStream::next() awaited on a worker of rt.
io::Result<io::Socket> next_on(parkway::Runtime& rt, io::AcceptStream* st) {
  return parkway::sync_wait(rt, [](io::AcceptStream* st) -> Task<io::Result<io::Socket>> {
    co_return co_await st->next();
  }(st));
}
}  // namespace

// A coroutine destroyed while it waits in AcceptStream::next() is
// forgotten by the stream: the connection that comes next resumes no
// freed frame (ASAN would see it) and waits for the stream's next taker.
TEST(Io, ATakerDestroyedWhileItWaitsIsForgotten) {
  pwtest::Watchdog wd("Io.ATakerDestroyedWhileItWaitsIsForgotten", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  std::atomic<int> stage{0};
  Bare b = take_one(&st, &stage);
  rt.run([&] { b.h.resume(); });
  ASSERT_EQ(stage.load(), 1);
  rt.run([&] { b.h.destroy(); });
  const int c = connect_client(*l);
  ASSERT_GE(c, 0);
  std::this_thread::sleep_for(50ms);  // the accept's CQE is reaped with nobody waiting
  auto got = next_on(rt, &st);
  EXPECT_TRUE(got) << got.error().message();
  EXPECT_EQ(stage.load(), 1) << "the destroyed taker was resumed";
  ::close(c);
}

// AcceptStream::next() off a worker is refused (std::logic_error) also
// when a connection is queued and the co_await would not wait; the
// connection stays for a taker on a worker.
TEST(Io, ATakerOffAWorkerIsRefusedWithAConnectionQueued) {
  pwtest::Watchdog wd("Io.ATakerOffAWorkerIsRefusedWithAConnectionQueued", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  std::atomic<int> stage{0};
  Bare armer = take_one(&st, &stage);  // arms the multishot accept on the worker, then goes
  rt.run([&] { armer.h.resume(); });
  rt.run([&] { armer.h.destroy(); });
  const int c = connect_client(*l);
  ASSERT_GE(c, 0);
  std::this_thread::sleep_for(50ms);  // the accept's CQE is reaped: the connection is queued
  stage = 0;
  Bare outside = take_one(&st, &stage);
  outside.h.resume();  // on this thread, outside any pool
  ASSERT_TRUE(outside.h.done());
  EXPECT_EQ(stage.load(), 1) << "the co_await returned off a worker";
  EXPECT_TRUE(outside.h.promise().error) << "no std::logic_error";
  outside.h.destroy();
  auto got = next_on(rt, &st);
  EXPECT_TRUE(got) << got.error().message();
  ::close(c);
}

// Two accept streams on one Listener, each with a taker: closing the
// listener ends both takers with ECANCELED, and the number is closed
// once both accepts have left the kernel.
TEST(Io, ClosingAListenerEndsEachOfItsAcceptStreams) {
  pwtest::Watchdog wd("Io.ClosingAListenerEndsEachOfItsAcceptStreams", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  const int fd = l->fd();
  std::atomic<int> waiting{0}, ended{0}, cancelled{0};
  for (int i = 0; i < 2; ++i)
    parkway::detach(
        [](io::Listener* l, std::atomic<int>* waiting, std::atomic<int>* ended,
           std::atomic<int>* cancelled) -> Task<void> {
          io::AcceptStream st = l->stream();
          waiting->fetch_add(1);
          auto c = co_await st.next();
          if (!c && c.error() == std::errc::operation_canceled) cancelled->fetch_add(1);
          ended->fetch_add(1);
        }(&*l, &waiting, &ended, &cancelled),
        rt);
  ASSERT_TRUE(eventually([&] { return waiting.load() == 2; }));
  std::this_thread::sleep_for(50ms);  // both accepts armed and in the kernel
  l->close();
  EXPECT_TRUE(eventually([&] { return ended.load() == 2; }, 2000ms)) << ended.load() << " of 2 takers ended";
  EXPECT_EQ(cancelled.load(), 2);
  EXPECT_TRUE(eventually([&] { return ::fcntl(fd, F_GETFD) == -1; }, 2000ms))
      << "the listener's number is still open after both accepts ended";
}

// An operation made on a Socket that is closed before the operation is
// awaited fails with ECANCELED (the close cancelled it), and touches no
// freed memory (the operation holds the Socket's scope; ASAN checks).
TEST(Io, AnOperationAwaitedAfterItsSocketClosedIsCancelled) {
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  auto s = std::make_unique<io::Socket>(::dup(p.a));
  auto r = parkway::sync_wait(rt, [](std::unique_ptr<io::Socket>* s) -> Task<io::Result<std::size_t>> {
    std::byte b[16];
    auto op = (*s)->recv(b, {.timeout = 2s});
    s->reset();  // closes it
    co_return co_await op;
  }(&s));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
}

// An open of a FIFO with nobody at the other end ends by its timeout or
// cancel, whatever the kernel does with it: io_uring tries an open
// without blocking first, so on Linux 6.18 a read-only open returns at
// once and a write-only one fails with ENXIO; with O_CREAT the kernel
// opens it in its worker thread, where it waits, and a timeout or cancel
// interrupts it. Those end with ETIMEDOUT or ECANCELED (io.hpp,
// File::open), not the kernel's restart code (512), EINTR or a hang.
TEST(Io, AFifoOpenEndsByItsTimeoutOrCancel) {
  pwtest::Watchdog wd("Io.AFifoOpenEndsByItsTimeoutOrCancel", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  char dir[] = "/tmp/parkway-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/f";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto open_it = [](const char* p, int flags, io::OpOptions o) -> Task<std::string> {
    auto f = co_await io::File::open(p, flags, 0644, AT_FDCWD, o);
    if (f) co_return "opened";
    if (f.error() == std::errc::timed_out) co_return "ETIMEDOUT";
    if (f.error() == std::errc::operation_canceled) co_return "ECANCELED";
    if (f.error() == std::errc::no_such_device_or_address) co_return "ENXIO";
    co_return f.error().message();
  };
  auto t0 = std::chrono::steady_clock::now();
  const std::string rd = parkway::sync_wait(rt, open_it(path.c_str(), O_RDONLY, {.timeout = 50ms}));
  EXPECT_TRUE(rd == "opened" || rd == "ETIMEDOUT") << rd;
  const std::string wr = parkway::sync_wait(rt, open_it(path.c_str(), O_WRONLY, {.timeout = 50ms}));
  EXPECT_TRUE(wr == "ENXIO" || wr == "ETIMEDOUT") << wr;
  io::CancelSource cs;
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    cs.cancel();
  });
  const std::string wc = parkway::sync_wait(rt, open_it(path.c_str(), O_WRONLY, {.cancel = &cs}));
  canceller.join();
  EXPECT_TRUE(wc == "ENXIO" || wc == "ECANCELED") << wc;
  // Waiting in the kernel's thread.
  const std::string cw = parkway::sync_wait(rt, open_it(path.c_str(), O_WRONLY | O_CREAT, {.timeout = 50ms}));
  EXPECT_EQ(cw, "ETIMEDOUT");
  io::CancelSource cs2;
  std::thread canceller2([&] {
    std::this_thread::sleep_for(50ms);
    cs2.cancel();
  });
  const std::string cr = parkway::sync_wait(rt, open_it(path.c_str(), O_RDONLY | O_CREAT, {.cancel = &cs2}));
  canceller2.join();
  EXPECT_EQ(cr, "ECANCELED");
  EXPECT_LT(ms_since(t0), 3000.0);
  ::unlink(path.c_str());
  ::rmdir(dir);
}

// Address: what parse() takes and refuses, and what to_string() prints
// for each family (IPv6 zones by name or index, Unix paths).
TEST(IoAddress, ParseAndPrint) {
  auto text = [](const char* ip, std::uint16_t port) -> std::string {
    auto a = io::Address::parse(ip, port);
    return a ? a->to_string() : "nullopt";
  };
  EXPECT_EQ(text("127.0.0.1", 8080), "127.0.0.1:8080");
  EXPECT_EQ(text("::1", 80), "[::1]:80");
  EXPECT_EQ(text("::ffff:10.0.0.1", 1), "[::ffff:10.0.0.1]:1");
  EXPECT_EQ(text("fe80::1%lo", 80), "[fe80::1%lo]:80");
  EXPECT_EQ(text("fe80::1%1", 80), "[fe80::1%lo]:80");  // index 1 is lo
  const auto scoped = io::Address::parse("fe80::1%lo", 80);
  ASSERT_TRUE(scoped);
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(scoped->get())->sin6_scope_id, if_nametoindex("lo"));
  for (const char* bad : {"", "localhost", "1.2.3", "256.0.0.1", "::1%", "fe80::1%no-such-interface", "fe80::1%0",
                          "fe80::1%99999999999", "1.2.3.4%lo", "[::1]"})
    EXPECT_EQ(text(bad, 1), "nullopt") << bad;
  EXPECT_EQ(io::Address::loopback(7).to_string(), "127.0.0.1:7");
  EXPECT_EQ(io::Address().to_string(), "(no address)");
  EXPECT_EQ(io::Address::unix_path("/run/x.sock")->to_string(), "unix:/run/x.sock");
  EXPECT_FALSE(io::Address::unix_path(""));
  EXPECT_FALSE(io::Address::unix_path(std::string("a\0b", 3)));
}

// Socket::connect to a Unix listener whose backlog is full waits, as a
// TCP connect does, for room (an accept 200 ms later), its timeout
// (ETIMEDOUT) or its cancel (ECANCELED). A non-blocking Unix connect
// fails with EAGAIN at once instead: the call returned that in 0 ms.
TEST(Io, AUnixConnectWaitsForRoomInAFullBacklog) {
  pwtest::Watchdog wd("Io.AUnixConnectWaitsForRoomInAFullBacklog", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const std::string path = "/tmp/parkway-full-backlog-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  const auto un = io::Address::unix_path(path);
  ASSERT_TRUE(un);
  EXPECT_EQ(un->to_string(), "unix:" + path);
  EXPECT_FALSE(io::Address::unix_path(std::string(200, 'x')));
  auto l = io::Listener::bind(*un, {.backlog = 1});
  ASSERT_TRUE(l) << l.error().message();
  std::vector<int> fill;  // non-blocking connects until the backlog refuses one
  for (int i = 0; i < 8; ++i) {
    int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (::connect(c, un->get(), un->size()) != 0) {
      EXPECT_EQ(errno, EAGAIN);
      ::close(c);
      break;
    }
    fill.push_back(c);
  }
  ASSERT_FALSE(fill.empty());
  auto outcome = [](io::Result<io::Socket> r) -> std::string {
    if (r) return "connected";
    if (r.error() == std::errc::timed_out) return "ETIMEDOUT";
    if (r.error() == std::errc::operation_canceled) return "ECANCELED";
    return r.error().message();
  };
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(outcome(parkway::sync_wait(rt, io::Socket::connect(*un, {.timeout = 100ms}))), "ETIMEDOUT");
  EXPECT_GE(ms_since(t0), 90.0);
  io::CancelSource cs;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cs.cancel();
  });
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(outcome(parkway::sync_wait(rt, io::Socket::connect(*un, {.cancel = &cs}))), "ECANCELED");
  EXPECT_GE(ms_since(t0), 90.0);
  canceller.join();
  std::thread acceptor([&] {
    std::this_thread::sleep_for(200ms);
    int a = ::accept4(l->fd(), nullptr, nullptr, SOCK_CLOEXEC);  // makes room
    if (a >= 0) ::close(a);
  });
  t0 = std::chrono::steady_clock::now();
  auto s = parkway::sync_wait(rt, io::Socket::connect(*un, {.timeout = 5s}));
  acceptor.join();
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_GE(ms_since(t0), 150.0);
  EXPECT_NE(::fcntl(s->fd(), F_GETFL) & O_NONBLOCK, 0);  // made non-blocking like the others
  for (int c : fill) ::close(c);
  ::unlink(path.c_str());
}

// A child forked by a continuation returns into the worker loop, which
// ends there (the runtime is the parent's) and drops the child's copy of
// the ring. The ring's queues are mappings shared with the parent: the
// child must not submit into them, nor reap the parent's completions.
// 300 sleeps end while a task holds the only worker; then each look at
// the ring posts their completions 20 at a time (Linux 6.13's cap on the
// task work one enter runs) and the worker reaps what its ready queue (256)
// has room for, so the queue fills and completions wait in the
// completion queue while the 30th continuation forks and waits for the
// child to end. Every sleeper must still resume in the parent.
TEST(Io, AChildForkedByAContinuationLeavesTheParentsRingAlone) {
  if (pwtest::kSanitized) GTEST_SKIP() << "the sanitizers' runtimes do not support a worker thread ending in a forked child";
  pwtest::Watchdog wd("Io.AChildForkedByAContinuationLeavesTheParentsRingAlone", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  constexpr int kSleepers = 300;
  std::atomic<int> started{0}, resumed{0}, forked{0};
  std::atomic<int> child_status{-1};
  // Counted in both processes (a shared mapping): a continuation the child
  // ran would be counted twice.
  auto* ran_anywhere = static_cast<std::atomic<int>*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(ran_anywhere, MAP_FAILED);
  new (ran_anywhere) std::atomic<int>(0);
  const auto at = std::chrono::steady_clock::now() + 150ms;
  auto sleeper = [](std::chrono::steady_clock::time_point at, std::atomic<int>* started, std::atomic<int>* resumed,
                    std::atomic<int>* forked, std::atomic<int>* child_status,
                    std::atomic<int>* ran_anywhere) -> Task<void> {
    started->fetch_add(1);
    (void)co_await io::sleep_until(at);
    ran_anywhere->fetch_add(1);
    if (forked->fetch_add(1) == 30) {
      const pid_t p = ::fork();
      if (p == 0) co_return;  // the child: back into the worker loop, which ends
      int st = 0;
      ::waitpid(p, &st, 0);
      child_status->store(st);
    }
    resumed->fetch_add(1);
  };
  {  // an owned receive makes the ring's buffer pool
    Pair p;
    ASSERT_EQ(::write(p.b, "x", 1), 1);
    auto got = parkway::sync_wait(rt, [](int fd) -> Task<io::Result<io::Bytes>> {
      co_return co_await io::recv_owned(fd, 64, {.timeout = 2s});
    }(p.a));
    ASSERT_TRUE(got) << got.error().message();
  }
  for (int i = 0; i < kSleepers; ++i)
    parkway::detach(sleeper(at, &started, &resumed, &forked, &child_status, ran_anywhere), rt);
  ASSERT_TRUE(eventually([&] { return started.load() == kSleepers; }));
  std::this_thread::sleep_for(20ms);  // the worker parks in its ring: the sleeps are in the kernel
  rt.submit([at] { std::this_thread::sleep_until(at + 50ms); }).get();  // they end meanwhile
  EXPECT_TRUE(eventually([&] { return resumed.load() == kSleepers; }, 5000ms))
      << resumed.load() << " of " << kSleepers << " sleepers resumed in the parent";
  const int st = child_status.load();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child's status: " << st;
  EXPECT_EQ(ran_anywhere->load(), kSleepers) << "the child ran continuations of the parent's";
  ::munmap(ran_anywhere, 4096);
  // The ring's buffer pool (made by the first owned receive, before the
  // fork) is still registered: owned receives still get their bytes.
  for (int round = 0; round < 2; ++round) {
    Pair p;
    ASSERT_EQ(::write(p.b, "pool", 4), 4);
    auto got = parkway::sync_wait(rt, [](int fd) -> Task<io::Result<io::Bytes>> {
      co_return co_await io::recv_owned(fd, 64, {.timeout = 2s});
    }(p.a));
    ASSERT_TRUE(got) << "owned receive " << round << ": " << got.error().message();
    EXPECT_EQ(got->size(), 4u);
  }
}

// A thread that shares nothing with the coroutine but the Socket (a
// watchdog) closes it while its send_all waits for room: the send ends
// with ECANCELED. The coroutine read the Socket's number and scope when it
// began, with nothing ordering that read before the close: the fields are
// atomic, so ThreadSanitizer (test-tsan) sees no data race; they were
// plain, and it reported one.
TEST(Io, ACloseOnAnotherThreadEndsASendAllInFlight) {
  pwtest::Watchdog wd("Io.ACloseOnAnotherThreadEndsASendAllInFlight", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;  // p.b is never read: the send_all waits for room
  io::Socket s(::dup(p.a));
  std::vector<std::byte> big(16 << 20);
  // Made before the closer starts: the call reads the number and scope
  // (and would throw std::logic_error on a closed Socket); a close before
  // its first step, on a slow machine, still ends it with ECANCELED.
  auto send = s.send_all(big);
  std::thread closer([&s] {
    std::this_thread::sleep_for(50ms);
    s.close();
  });
  auto r = parkway::sync_wait(rt, std::move(send));
  closer.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
  EXPECT_FALSE(s.is_open());
}

// A send done at the co_await (the socket has room) races a close of its
// Socket on another thread, which then makes a new socket pair: the
// kernel gives it the lowest free number, often the one just closed. The
// send must reach its own peer or fail with ECANCELED, never the socket
// that now has its number (the close leaves a number open while a call
// is under way on it: DescriptorPin). Under test-chaos a random pause
// between the check that the Socket is open and the call widens the
// window.
TEST(Io, ASendRacingACloseNeverReachesTheNumbersNextOwner) {
  pwtest::Watchdog wd("Io.ASendRacingACloseNeverReachesTheNumbersNextOwner", 120);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  static constexpr char kSecret[] = "SECRET";
  int reused = 0, delivered = 0, cancelled = 0, leaked = 0, closes_deferred = 0;
  for (int round = 0; round < 400; ++round) {
    Pair p;
    const int number = ::dup(p.a);
    auto s = std::make_unique<io::Socket>(number);
    std::atomic<bool> made{false};
    Pair* next = nullptr;
    bool deferred = false;
    std::thread closer([&] {
      while (!made.load(std::memory_order_acquire)) std::this_thread::yield();
      s->close();
      deferred = ::fcntl(number, F_GETFD) != -1;  // a send under way keeps it open
      next = new Pair;  // takes the lowest free numbers
    });
    auto r = parkway::sync_wait(rt, [](io::Socket* s, std::atomic<bool>* made) -> Task<io::Result<std::size_t>> {
      auto op = s->send(std::as_bytes(std::span(kSecret, 6)));
      made->store(true, std::memory_order_release);
      co_return co_await op;
    }(s.get(), &made));
    closer.join();
    if (deferred) ++closes_deferred;
    if (r)
      ++delivered;
    else if (r.error() == std::errc::operation_canceled)
      ++cancelled;
    else
      ADD_FAILURE() << "round " << round << ": " << r.error().message();
    // Whichever end of the new pair has the old number, its peer must
    // have received nothing.
    int peer = next->a == number ? next->b : next->b == number ? next->a : -1;
    if (peer >= 0) {
      ++reused;
      char b[16];
      if (::recv(peer, b, sizeof b, MSG_DONTWAIT) > 0) ++leaked;
    }
    delete next;
  }
  std::printf(
      "400 sends raced a close: %d delivered, %d cancelled; %d closes waited for a send under way; the number was "
      "reused %d times, %d leaked\n",
      delivered, cancelled, closes_deferred, reused, leaked);
  EXPECT_EQ(leaked, 0) << "a send went to the socket that took its closed Socket's number";
  // The close met the send in some round: it waited for the send, or it
  // came first and the number went to the new pair.
  EXPECT_GT(closes_deferred + reused, 0) << "the close never met the send: the test saw no race";
}

// A negative timeout has passed already: ETIMEDOUT at once. The largest
// one does not overflow into the past: the operation waits until its
// CancelSource fires.
TEST(Io, NegativeAndHugeTimeouts) {
  pwtest::Watchdog wd("Io.NegativeAndHugeTimeouts", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  Pair p;
  auto t0 = std::chrono::steady_clock::now();
  auto r = parkway::sync_wait(rt, recv_once(p.a, {.timeout = -1ms}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  EXPECT_LT(ms_since(t0), 1000.0);
  io::CancelSource cs;
  std::thread canceller([&] {
    std::this_thread::sleep_for(100ms);
    cs.cancel();
  });
  t0 = std::chrono::steady_clock::now();
  r = parkway::sync_wait(rt, recv_once(p.a, {.timeout = std::chrono::nanoseconds::max(), .cancel = &cs}));
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
  EXPECT_GE(ms_since(t0), 90.0);
}

// OpOptions take at most one of a timeout and a deadline: one given both
// (here a 50 ms timeout beside a deadline an hour away) is refused by
// name, a std::invalid_argument, before anything runs, so that neither is
// silently ignored: an operation on a raw descriptor, calls of many steps
// (nothing is sent) and an accept stream's next() alike.
TEST(Io, ATimeoutBesideADeadlineIsRefusedByName) {
  pwtest::Watchdog wd("Io.ATimeoutBesideADeadlineIsRefusedByName", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  const io::OpOptions both{.timeout = 50ms, .deadline = std::chrono::steady_clock::now() + 1h};
  auto refused = [](auto&& run, const char* name) {
    try {
      run();
      ADD_FAILURE() << name << " ran with both a timeout and a deadline";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::strstr(e.what(), name), nullptr) << e.what();
      EXPECT_NE(std::strstr(e.what(), "both a timeout and a deadline"), nullptr) << e.what();
    }
  };
  Pair p;
  refused([&] { (void)run_on(rt, recv_once(p.a, both)); }, "recv");
  const std::byte data[4] = {};
  refused([&] { (void)run_on(rt, io::send_all(p.a, data, both)); }, "send_all");
  char got[8];
  EXPECT_EQ(::read(p.b, got, sizeof got), -1) << "the send_all sent its bytes";
  const int file = ::memfd_create("parkway-both", MFD_CLOEXEC);
  ASSERT_GE(file, 0);
  ASSERT_EQ(::write(file, "abcd", 4), 4);
  refused([&] { (void)run_on(rt, io::send_file(p.a, file, 0, 4, both)); }, "send_file");
  EXPECT_EQ(::read(p.b, got, sizeof got), -1) << "the send_file sent its bytes";
  ::close(file);
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  refused([&] {
    (void)parkway::sync_wait(rt, take_one(&st, both));
  }, "AcceptStream::next");
  // Either alone is taken.
  auto r = run_on(rt, recv_once(p.a, {.deadline = std::chrono::steady_clock::now() + 20ms}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
}

// AcceptStream::next(OpOptions): a deadline ends the wait with
// ETIMEDOUT, a CancelSource with ECANCELED (also one fired before the
// wait), and a connection that comes first is taken while its guard is
// cancelled; a connection that comes after a timeout waits for the next
// call. ASAN checks the guard's references.
TEST(Io, AcceptStreamNextTakesATimeoutAndACancel) {
  pwtest::Watchdog wd("Io.AcceptStreamNextTakesATimeoutAndACancel", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  auto take = [&](io::OpOptions o) {
    return parkway::sync_wait(rt, take_one(&st, o));
  };
  auto t0 = std::chrono::steady_clock::now();
  auto r = take({.timeout = 50ms});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  EXPECT_GE(ms_since(t0), 45.0);
  EXPECT_LT(ms_since(t0), 2000.0);

  const int c1 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c1, l->local_address().get(), l->local_address().size()), 0);
  r = take({.timeout = 5s});
  EXPECT_TRUE(r) << "a connection made after a timed-out wait was not delivered";

  io::CancelSource cs;
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    cs.cancel();
  });
  t0 = std::chrono::steady_clock::now();
  r = take({.cancel = &cs});
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
  EXPECT_LT(ms_since(t0), 2000.0);
  r = take({.cancel = &cs});  // fired already: at once
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), std::errc::operation_canceled);

  io::CancelSource idle;
  std::thread connector([&] {
    std::this_thread::sleep_for(50ms);
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)!::connect(c, l->local_address().get(), l->local_address().size());
    std::this_thread::sleep_for(200ms);
    ::close(c);
  });
  r = take({.timeout = 10s, .cancel = &idle});
  connector.join();
  EXPECT_TRUE(r) << r.error().message();
  ::close(c1);
}

// A taker's guard (io.md, "The accept stream") never ends a wait by
// itself: its timer is the longest relative one there is, and the kernel
// takes it (a refused timer would end the wait at once with ETIMEDOUT).
// A wait with a CancelSource and no timeout, and one whose timeout or
// deadline is too far away to add to the clock, ends by its cancel only.
TEST(Io, AnAcceptStreamGuardNeverEndsAWaitByItself) {
  pwtest::Watchdog wd("Io.AnAcceptStreamGuardNeverEndsAWaitByItself", 60);
  EXPECT_GE(io::detail::kAcceptGuardNs,
            std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::years(292)).count()));
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  const io::OpOptions waits[] = {
      {},
      {.timeout = std::chrono::nanoseconds::max()},
      {.deadline = std::chrono::steady_clock::time_point::max()},
  };
  for (io::OpOptions o : waits) {
    io::CancelSource cs;
    o.cancel = &cs;
    std::thread canceller([&] {
      std::this_thread::sleep_for(100ms);
      cs.cancel();
    });
    const auto t0 = std::chrono::steady_clock::now();
    auto r = parkway::sync_wait(rt, take_one(&st, o));
    canceller.join();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
    EXPECT_GE(ms_since(t0), 90.0);
  }
}

// Cancelling the TaskGroup of a coroutine waiting in next() ends the
// wait: the taker sees ECANCELED, its next co_await throws Cancelled, and
// the group's wait() returns without a connection.
TEST(Io, AGroupCancelEndsAnAcceptStreamWait) {
  pwtest::Watchdog wd("Io.AGroupCancelEndsAnAcceptStreamWait", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  std::atomic<int> stage{0}, error{0};
  parkway::TaskGroup g(rt);
  g.spawn([&] {
    try {
      parkway::sync_wait(*parkway::Runtime::current(), [](io::Listener* l, std::atomic<int>* stage,
                                                          std::atomic<int>* error) -> Task<void> {
        io::AcceptStream st = l->stream();
        stage->store(1);
        auto c = co_await st.next();
        error->store(c ? 0 : c.error().value());
        (void)co_await io::sleep_for(1ms);  // throws Cancelled
        stage->store(2);
      }(&*l, &stage, &error));
    } catch (const parkway::Cancelled&) {
    }
  });
  ASSERT_TRUE(eventually([&] { return stage.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  const auto t0 = std::chrono::steady_clock::now();
  g.cancel();
  EXPECT_NO_THROW(g.wait());
  EXPECT_LT(ms_since(t0), 2000.0);
  EXPECT_EQ(error.load(), ECANCELED);
  EXPECT_EQ(stage.load(), 1) << "the coroutine went on after its group was cancelled";
}

namespace {
Bare take_in_group(io::AcceptStream* st, std::atomic<int>* stage) {
  stage->store(1);
  auto c = co_await st->next();
  stage->store(c ? 2 : 3);
}
}  // namespace

// A taker of a group destroyed while it waits, with both workers busy (so
// no ring reaps its guard's cancel yet): the guard leaves the group's
// registry entry at once, so the group may go and a later cancel of
// another group walks no freed group (ASAN checks).
TEST(Io, ATakersGuardDoesNotOutliveItsGroup) {
  pwtest::Watchdog wd("Io.ATakersGuardDoesNotOutliveItsGroup", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  io::AcceptStream st = l->stream();
  std::atomic<int> stage{0};
  Bare b = take_in_group(&st, &stage);
  auto g = std::make_unique<parkway::TaskGroup>(rt);
  g->spawn([&] { b.h.resume(); });  // waits in next(): its guard is in g's entry
  g->wait();
  ASSERT_EQ(stage.load(), 1);
  std::atomic<bool> stop{false};
  std::atomic<int> busy{0};
  parkway::TaskGroup spin(rt);
  for (int i = 0; i < 2; ++i)
    spin.spawn([&] {
      busy.fetch_add(1);
      while (!stop.load()) std::this_thread::yield();
    });
  ASSERT_TRUE(eventually([&] { return busy.load() == 2; }));
  b.h.destroy();
  g.reset();
  parkway::TaskGroup other(rt);
  other.cancel();  // walks the registry
  stop.store(true);
  spin.wait();
  EXPECT_EQ(stage.load(), 1);
}

// Destroying a stream while a coroutine waits in its next() ends the wait
// with ECANCELED (it never ended before); the taker's awaiter holds the
// queue, so its destruction afterwards touches no freed memory.
TEST(Io, DestroyingAStreamEndsItsTakersWait) {
  pwtest::Watchdog wd("Io.DestroyingAStreamEndsItsTakersWait", 60);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  auto st = std::make_unique<io::AcceptStream>(l->stream());
  std::atomic<int> stage{0};
  Bare b = take_in_group(st.get(), &stage);
  rt.run([&] { b.h.resume(); });
  ASSERT_EQ(stage.load(), 1);
  std::this_thread::sleep_for(20ms);
  st.reset();
  EXPECT_TRUE(eventually([&] { return stage.load() == 3; }, 2000ms)) << "stage " << stage.load();
  ASSERT_TRUE(eventually([&] { return b.h.promise().finished.load(); }, 2000ms));
  b.h.destroy();
}

namespace {
struct Taken {
  int fd = -1;  // the Socket's number, if it got one
  int err = 0;  // its error's value, if not
};
// What a recv on a client socket returns within 2 s: 0 once the server
// closed its end.
ssize_t recv_within_2s(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  if (::poll(&pfd, 1, 2000) != 1) return -2;
  char byte;
  return ::recv(fd, &byte, 1, MSG_DONTWAIT);
}
// Takes one connection and records it; a Socket it got closes at the end.
Bare take_into(io::AcceptStream* st, Taken* out) {
  auto c = co_await st->next();
  if (c) out->fd = c->fd();
  else out->err = c.error().value();
}
}  // namespace

// The stream destroyed after a connection was handed to its taker (the
// accept's CQE reaped, the taker's resume queued) but before the taker
// ran: the destructor closes the connection and the taker gets ECANCELED,
// not a Socket for the closed number, and nothing closes that number
// again. One worker, busy in a task that reaps its ring itself and then
// waits for the test to destroy the stream, so the queued resume cannot
// run before.
TEST(Io, DestroyingAStreamWhileItsTakersResumeIsQueued) {
  pwtest::Watchdog wd("Io.DestroyingAStreamWhileItsTakersResumeIsQueued", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  auto st = std::make_unique<io::AcceptStream>(l->stream());
  Taken out;
  Bare b = take_into(st.get(), &out);
  const std::uint64_t parks = rt.stats().total.ring_parks;
  rt.run([&] { b.h.resume(); });
  // The worker parks in its ring: its accept goes to the kernel with that entry.
  ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks != parks; }));
  std::atomic<int> stage{0};  // 1 busy, 2 the taker's resume queued, 3 the stream destroyed
  auto busy = rt.submit([&] {
    stage.store(1);
    auto& ring = parkway::detail::Worker::current()->io_ring();
    const auto t0 = std::chrono::steady_clock::now();
    while (ring.poll() == 0 && ms_since(t0) < 5000) std::this_thread::yield();  // the accept's CQE
    stage.store(2);
    while (stage.load() != 3 && ms_since(t0) < 10000) std::this_thread::yield();
  });
  ASSERT_TRUE(eventually([&] { return stage.load() == 1; }));
  const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, l->local_address().get(), l->local_address().size()), 0);
  ASSERT_TRUE(eventually([&] { return stage.load() == 2; }));
  EXPECT_FALSE(b.h.promise().finished.load()) << "the taker ran on a busy worker";
  st.reset();
  // The lowest free number, which the accepted connection had: a second
  // close of that number would close this.
  const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(probe, 0);
  stage.store(3);
  busy.get();
  ASSERT_TRUE(eventually([&] { return b.h.promise().finished.load(); }, 2000ms));
  EXPECT_EQ(out.fd, -1) << "the taker got a Socket for number " << out.fd << ", closed by the stream's destructor";
  EXPECT_EQ(out.err, ECANCELED);
  b.h.destroy();
  EXPECT_EQ(recv_within_2s(c), 0) << "the accepted connection was not closed";
  EXPECT_NE(::fcntl(probe, F_GETFD), -1) << "the connection's number was closed a second time";
  ::close(probe);
  ::close(c);
}

// An awaiter made by next() keeps the stream's queue: destroyed between
// its await_ready() (true: a connection queued) and its await_resume(),
// or before it is awaited at all, the stream ends it with ECANCELED, and
// the queued connection is closed by the destructor. The stream's accept
// is ended first (the listener closed), so that the destructor drops the
// queue's last reference but the awaiter's.
TEST(Io, AnAwaiterOutlivingItsStreamIsCancelled) {
  pwtest::Watchdog wd("Io.AnAwaiterOutlivingItsStreamIsCancelled", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  const int lfd = l->fd();
  auto st = std::make_unique<io::AcceptStream>(l->stream());
  Taken out;
  Bare b = take_into(st.get(), &out);
  rt.run([&] { b.h.resume(); });
  std::this_thread::sleep_for(20ms);  // armed
  const int c1 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c1, l->local_address().get(), l->local_address().size()), 0);
  ASSERT_TRUE(eventually([&] { return b.h.promise().finished.load(); }, 2000ms));
  EXPECT_GE(out.fd, 0) << out.err;
  b.h.destroy();
  const int c2 = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c2, l->local_address().get(), l->local_address().size()), 0);
  // await_ready is asked on the worker: off a worker it is false, so
  // that await_suspend refuses the call.
  auto queued = [&](io::AcceptStream::Next& n) {
    bool ready = false;
    rt.run([&] { ready = n.await_ready(); });
    return ready;
  };
  ASSERT_TRUE(eventually([&] {
    io::AcceptStream::Next n = st->next();
    return queued(n);
  }, 2000ms)) << "the connection was not queued";
  l->close();  // ends the accept: nobody waits, so nothing more is queued
  ASSERT_TRUE(eventually([&] { return ::fcntl(lfd, F_GETFD) == -1; }, 2000ms)) << "the accept did not end";

  io::AcceptStream::Next n = st->next();
  ASSERT_TRUE(queued(n));
  st.reset();
  io::Result<io::Socket> r = n.await_resume();
  ASSERT_FALSE(r) << "got a Socket for number " << r->fd() << ", closed by the stream's destructor";
  EXPECT_EQ(r.error(), std::errc::operation_canceled) << r.error().message();
  EXPECT_EQ(recv_within_2s(c2), 0) << "the queued connection was not closed";

  // A fresh stream destroyed before its awaiter is awaited: ECANCELED at
  // once, and no accept armed for the destroyed stream.
  auto l2 = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l2) << l2.error().message();
  st = std::make_unique<io::AcceptStream>(l2->stream());
  auto r2 = parkway::sync_wait(rt, [](std::unique_ptr<io::AcceptStream>* st) -> Task<io::Result<io::Socket>> {
    io::AcceptStream::Next n = (*st)->next();
    st->reset();
    co_return co_await n;
  }(&st));
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error(), std::errc::operation_canceled) << r2.error().message();
  ::close(c1);
  ::close(c2);
}

// A cancel that reaches an operation on a Socket while the operation
// completes on another worker: the canceller walks its scope (the
// group's, or the CancelSource's) and reads each operation's other
// links to find the one in that scope, while the reaper clears the
// operation's link in the Socket's scope under that scope's lock. Those
// reads were of a plain pointer written under a lock the reader did not
// hold: a data race, which `make test-tsan` reports here (the value read
// never mattered). Each round races a write to the peer (the receive
// completes) against a cancel of the receive's group, then of its
// CancelSource.
TEST(Io, AGroupCancelRacingACompletionOnASocketReadsNoLinkItDoesNotHold) {
  pwtest::Watchdog wd("Io.AGroupCancelRacingACompletionOnASocketReadsNoLinkItDoesNotHold", 120);
  parkway::Runtime rt(parkway::Options{.workers = 2});
  auto receive = [](io::Socket* s, io::CancelSource* cs, std::atomic<bool>* started) -> Task<void> {
    std::byte b[16];
    started->store(true, std::memory_order_release);
    auto r = co_await s->recv(b, {.cancel = cs});
    (void)r;
  };
  const int rounds = 300 / pwtest::kSlow;
  for (int round = 0; round < rounds; ++round) {
    for (bool by_group : {true, false}) {
      Pair p;
      io::Socket s(::dup(p.a));
      io::CancelSource cs;
      std::atomic<bool> started{false};
      parkway::TaskGroup g(rt);
      g.spawn([&] {
        try {
          parkway::sync_wait(*parkway::Runtime::current(), receive(&s, by_group ? nullptr : &cs, &started));
        } catch (const parkway::Cancelled&) {
        }
      });
      while (!started.load(std::memory_order_acquire)) std::this_thread::yield();
      std::thread writer([&] { ASSERT_EQ(::write(p.b, "x", 1), 1); });
      if (by_group)
        g.cancel();
      else
        cs.cancel();
      writer.join();
      EXPECT_NO_THROW(g.wait());
    }
  }
}

// io::Bytes: "size() of them at data()". A Bytes moved from (by a move
// out of its Result, `io::Bytes b = *std::move(r);`) is empty, as after
// release(); it kept its size and capacity beside a null block before,
// so that span() promised size() bytes at nullptr and empty() said false.
TEST(Io, AMovedFromBytesIsEmpty) {
  auto block = std::make_unique<std::byte[]>(8);
  std::memcpy(block.get(), "hello", 5);
  io::Bytes a(std::move(block), 5, 8);
  io::Bytes b = std::move(a);
  EXPECT_EQ(b.size(), 5u);
  EXPECT_EQ(b.capacity(), 8u);
  EXPECT_EQ(std::memcmp(b.data(), "hello", 5), 0);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_TRUE(a.empty()) << "a moved-from Bytes claims " << a.size() << " bytes at nullptr";
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.capacity(), 0u);
  EXPECT_TRUE(a.span().empty());
  io::Bytes c;
  c = std::move(b);
  EXPECT_EQ(c.size(), 5u);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), 0u);
  io::Result<io::Bytes> r(std::move(c));
  io::Bytes d = *std::move(r);
  EXPECT_EQ(d.size(), 5u);
  EXPECT_TRUE(r->empty()) << "the Bytes left in the Result claims " << r->size() << " bytes";
}

namespace {
Task<void> take_all(io::Listener* l, int want, std::atomic<int>* accepted, std::atomic<int>* errors) {
  std::vector<io::Socket> held;
  io::AcceptStream s = l->stream();
  while (accepted->load() < want && errors->load() < 100) {
    io::Result<io::Socket> c = co_await s.next();
    if (c) {
      accepted->fetch_add(1);
      held.push_back(std::move(*c));
    } else {
      errors->fetch_add(1);
    }
  }
}
}  // namespace

// A CQ overflow ends the stream's multishot accept (its last CQE has no
// F_MORE): the stream re-arms and takes every connection, none reported
// as an error, and the ring's count of operations comes back to zero
// (io.md, "Backpressure"). With an 8-entry CQ and 40 connections queued
// while the worker spins, the accept lost F_MORE four times (counted by
// hand with a print in accept_cqe).
TEST(Io, AStreamWhoseCqOverflowedTakesEveryConnection) {
  pwtest::Watchdog wd("Io.AStreamWhoseCqOverflowedTakesEveryConnection", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1, .io_sq_entries = 4, .io_cq_entries = 8});
  auto l = io::Listener::bind(io::Address::loopback(0), {.backlog = 256});
  ASSERT_TRUE(l);
  const int want = 40;
  std::atomic<int> accepted{0}, errors{0};
  auto server = parkway::spawn(take_all(&*l, want, &accepted, &errors), rt);
  std::this_thread::sleep_for(50ms);  // the taker waits: the accept is armed
  std::atomic<bool> spinning{false};
  auto blocker = rt.submit([&spinning] {
    spinning = true;
    const auto end = std::chrono::steady_clock::now() + 150ms;
    while (std::chrono::steady_clock::now() < end) {
    }
  });
  while (!spinning) std::this_thread::yield();
  const std::vector<int> clients = connect_clients(l->local_address(), want);
  ASSERT_EQ(int(clients.size()), want);
  blocker.get();
  server.get();
  for (int c : clients) ::close(c);
  EXPECT_EQ(accepted.load(), want);
  EXPECT_EQ(errors.load(), 0);
  unsigned ops = 1;
  for (int i = 0; i < 200 && ops != 0; ++i) {
    ops = rt.submit([] { return parkway::detail::Worker::current()->io_ring().ops(); }).get();
    if (ops) std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(ops, 0u);
}

// A next() whose time has passed when it is awaited, with no connection
// queued, fails with ETIMEDOUT before it begins, as any operation does
// (io.md, "An operation's life") and as a fired CancelSource does: it arms
// no accept, so a connection waiting in the listener's backlog is not
// taken for it. Before, the accept went in ahead of the guard's cancel and
// the expired call returned the connection.
TEST(Io, AnAcceptStreamNextWhoseTimeHasPassedFailsBeforeItBegins) {
  pwtest::Watchdog wd("Io.AnAcceptStreamNextWhoseTimeHasPassedFailsBeforeItBegins", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1});
  auto l = io::Listener::bind(io::Address::loopback(0));
  ASSERT_TRUE(l) << l.error().message();
  const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(c, l->local_address().get(), l->local_address().size()), 0);  // in the backlog
  io::AcceptStream st = l->stream();
  auto take = [&](io::OpOptions o) {
    return parkway::sync_wait(rt, take_one(&st, o));
  };
  for (const io::OpOptions& o : {io::OpOptions{.timeout = -1ns},
                                 io::OpOptions{.deadline = std::chrono::steady_clock::now() - 1ms}}) {
    auto r = take(o);
    ASSERT_FALSE(r) << "an expired next() took the waiting connection";
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
  }
  auto r = take({.timeout = 5s});
  EXPECT_TRUE(r) << r.error().message();
  ::close(c);
}

namespace {
// Receives one byte, then (the continuation) waits up to 300 ms for *other
// to be set by a task submitted meanwhile; how long it waited, in ms.
Task<double> recv_then_wait_for(int fd, std::atomic<bool>* other) {
  std::byte b[8];
  auto r = co_await io::recv(fd, b);
  if (!r) co_return -1.0;
  const auto t0 = std::chrono::steady_clock::now();
  while (!other->load(std::memory_order_acquire) && ms_since(t0) < 300) parkway::detail::cpu_relax();
  co_return ms_since(t0);
}
}  // namespace

// A worker parked in its ring and handed off by a producer (so counted as
// a searcher) that reaps a completion runs the continuation as a found
// task: it stops searching first ([S2], and the baton [S3]). Counted as a
// searcher while the continuation ran, it kept every producer from waking
// the idle worker: a task submitted meanwhile waited until the
// continuation returned, with a worker asleep. Every thread shares one
// CPU, and the test thread holds it (SCHED_FIFO) from the completion to
// the hand-off, so the receiver is still on the idle list when the
// submit's wake takes it.
TEST(Io, AHandedOffWorkerStopsSearchingBeforeItRunsAContinuation) {
  pwtest::Watchdog wd("Io.AHandedOffWorkerStopsSearchingBeforeItRunsAContinuation", 120);
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) cpu = c;
  ASSERT_GE(cpu, 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // the workers inherit it
  struct Restore {
    cpu_set_t* all;
    ~Restore() {
      sched_param other{};
      sched_setscheduler(0, SCHED_OTHER, &other);
      sched_setaffinity(0, sizeof(*all), all);
    }
  } restore{&all};
  parkway::Runtime rt(parkway::Options{.workers = 2});
  using parkway::detail::Parking;
  auto both_idle = [&rt] {
    const std::uint64_t s = rt.impl().parking.snapshot();
    return Parking::idle_of(s) == 2 && Parking::searching_of(s) == 0;
  };
  int slow = 0, rounds = 0;
  for (int round = 0; round < 10; ++round) {
    Pair p;
    std::atomic<bool> other{false};
    // Both workers asleep, then the receiver's worker (the one the spawn
    // wakes) sleeps in its ring, the other one plainly: the receiver is the
    // most recently parked, the one the next wake takes.
    ASSERT_TRUE(eventually([&] { return both_idle(); }));
    const auto parks0 = rt.stats().total.ring_parks;
    auto f = parkway::spawn(recv_then_wait_for(p.a, &other), rt);
    ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks > parks0 && both_idle(); }));
    sched_param fifo{};
    fifo.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
      ASSERT_EQ(::write(p.b, "x", 1), 1);
      f.get();
      GTEST_SKIP() << "sched_setscheduler(SCHED_FIFO) refused here";
    }
    ASSERT_EQ(::write(p.b, "x", 1), 1);  // the completion, then a task: its wake hands off to the receiver
    auto g = rt.submit([&other] { other.store(true, std::memory_order_release); });
    sched_param normal{};
    ASSERT_EQ(sched_setscheduler(0, SCHED_OTHER, &normal), 0);
    const double waited = f.get();
    g.get();
    ASSERT_GE(waited, 0.0);
    ++rounds;
    if (waited > 250) ++slow;
  }
  EXPECT_EQ(slow, 0) << "of " << rounds
                     << " rounds, those in which a task waited behind a continuation with a worker idle";
}

namespace {
Task<parkway::detail::WorkerState> recv_then_published(int fd) {
  std::byte b[8];
  auto r = co_await io::recv(fd, b);
  if (!r) co_return parkway::detail::WorkerState::Off;
  co_return parkway::detail::Worker::current()->published();
}
}  // namespace

// A worker that a completion wakes from its ring park published Searching
// when it woke; the continuation it reaps is work, so the sched_ext
// scheduler must see it Busy (a thief gives way to busy siblings). It ran
// as Searching: in every round, with one worker and with two.
TEST(Io, AContinuationRunsWithItsWorkerPublishedBusy) {
  pwtest::Watchdog wd("Io.AContinuationRunsWithItsWorkerPublishedBusy", 60);
  using parkway::detail::Parking;
  using parkway::detail::WorkerState;
  for (unsigned workers : {1u, 2u}) {
    parkway::Runtime rt(parkway::Options{.workers = workers});
    int searching = 0, busy = 0;
    for (int round = 0; round < 10; ++round) {
      Pair p;
      auto all_idle = [&rt, workers] {
        const std::uint64_t s = rt.impl().parking.snapshot();
        return Parking::idle_of(s) == workers && Parking::searching_of(s) == 0;
      };
      ASSERT_TRUE(eventually(all_idle));
      const auto parks0 = rt.stats().total.ring_parks;
      auto f = parkway::spawn(recv_then_published(p.a), rt);
      ASSERT_TRUE(eventually([&] { return rt.stats().total.ring_parks > parks0 && all_idle(); }));
      ASSERT_EQ(::write(p.b, "x", 1), 1);  // the completion wakes the ring-parked worker
      const WorkerState s = f.get();
      ASSERT_NE(s, WorkerState::Off) << "the receive failed";
      if (s == WorkerState::Busy) ++busy;
      if (s == WorkerState::Searching) ++searching;
    }
    EXPECT_EQ(busy, 10) << workers << " workers: " << searching
                        << " of 10 continuations ran with their worker published Searching";
  }
}

// Receives held for want of a pool buffer (ENOBUFS) on a worker whose
// completion queue never empties: 600 coroutines writing to /dev/null
// without pause (urgent SQEs, flushed mid-batch) keep more completions
// waiting than one reap takes. Eight owned receives, one pool buffer,
// and their bytes arrive at once: one takes the buffer, the others are
// held. A held receive goes in again only once a reap leaves the queue
// empty, but its deadline, and a close of its Socket, must still end it
// at once (io.md, "Limits"): not when the flood stops, 1.5 s later, with
// its descriptor left open until then.
TEST(Io, AHeldReceiveEndsAtItsDeadlineOrCloseWhileTheCompletionQueueStaysFull) {
  pwtest::Watchdog wd("Io.AHeldReceiveEndsAtItsDeadlineOrCloseWhileTheCompletionQueueStaysFull", 60);
  parkway::Runtime rt(parkway::Options{.workers = 1, .io_recv_pool_buffers = 1, .io_recv_pool_buffer_bytes = 64});
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  constexpr int kReceivers = 8, kFlooders = 600;
  std::vector<Pair> pairs(kReceivers);
  // Even ones: a raw descriptor with a 300 ms timeout; odd ones: a Socket,
  // closed from outside 300 ms after the bytes came.
  std::vector<io::Socket> sockets;
  for (int i = 1; i < kReceivers; i += 2) sockets.emplace_back(std::exchange(pairs[std::size_t(i)].a, -1));
  std::atomic<bool> stop{false};
  std::atomic<int> started{0}, waiting{0};
  std::atomic<double> bytes_at{-1};
  std::array<std::atomic<double>, kReceivers> ended_ms{};
  std::array<std::atomic<int>, kReceivers> outcome{};  // bytes received, or -errno
  const auto t0 = std::chrono::steady_clock::now();
  auto flood = [&]() -> Task<void> {
    const std::byte b[1] = {};
    started.fetch_add(1);
    while (!stop.load(std::memory_order_relaxed)) {
      auto w = co_await io::write(devnull, b, 0);
      if (!w) co_return;
    }
  };
  auto receive = [&](int i) -> Task<void> {
    io::Result<io::Bytes> r = io::Error();
    waiting.fetch_add(1);
    if (i % 2 == 0)  // an if, not ?: (io.md, "Limits": GCC 12)
      r = co_await io::recv_owned(pairs[std::size_t(i)].a, 64, {.timeout = 300ms});
    else
      r = co_await sockets[std::size_t(i / 2)].recv_owned(64);
    outcome[std::size_t(i)].store(r ? int(r->size()) : -r.error().value());
    ended_ms[std::size_t(i)].store(ms_since(t0));
  };
  auto all = [&]() -> Task<void> {
    std::vector<parkway::Spawned<void>> ts;
    for (int i = 0; i < kFlooders; ++i) ts.push_back(parkway::spawn(flood()));
    (void)co_await io::sleep_for(20ms);  // the flood under way: the receives' timeouts start with them
    for (int i = 0; i < kReceivers; ++i) ts.push_back(parkway::spawn(receive(i)));
    for (auto& s : ts) co_await std::move(s);
  };
  std::thread driver([&] {
    while (started.load() < kFlooders || waiting.load() < kReceivers) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // their receives in the kernel
    bytes_at.store(ms_since(t0));
    for (auto& p : pairs) (void)!::write(p.b, "0123456789", 10);  // all at once: one buffer for eight
    std::this_thread::sleep_for(300ms);
    for (auto& s : sockets) s.close();
    std::this_thread::sleep_for(1200ms);
    stop.store(true);
  });
  parkway::sync_wait(rt, all());
  driver.join();
  ::close(devnull);
  int held = 0;
  for (int i = 0; i < kReceivers; ++i) {
    const int got = outcome[std::size_t(i)].load();
    const double late = ended_ms[std::size_t(i)].load() - bytes_at.load();
    SCOPED_TRACE(i % 2 == 0 ? "a raw descriptor's receive, 300 ms timeout" : "a Socket's receive, closed after 300 ms");
    std::printf("receive %d: %d after %.0f ms\n", i, got, late);
    if (got == 10) continue;  // it had the buffer (or one given back, then went in again)
    ++held;
    EXPECT_EQ(got, i % 2 == 0 ? -ETIMEDOUT : -ECANCELED) << "receive " << i;
    EXPECT_LT(late, 700.0) << "receive " << i << " was held until the flood stopped, " << late
                           << " ms after its bytes came";
  }
  EXPECT_GT(held, 0) << "no receive was held: the test did not reach the path it is for";
}

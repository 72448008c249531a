// trace_ground_truth.cpp -- a program whose schedule is known, for
// check-trace.py to hold `parkway trace report` against (run it with
// PARKWAY_TRACE=FILE). It prints what it knows as key=value lines.
//
//   trace_ground_truth schedule   two workers; both idle (parked) for
//       kIdleMs; then one root task spawns kChildren children of kChildMs
//       each (busy for that long by the clock, so a preemption does not
//       change their length) and stays busy itself until the other worker
//       has started one of them, which it can only have stolen; then
//       idle for kIdleMs again.
//   trace_ground_truth fib N      fib(N) by spawning: many task events
//   trace_ground_truth slices N   one worker with a ring (a sleep first)
//       runs N tasks of 50 us one after another: its slice yields
//   trace_ground_truth io N       a coroutine sleeps N times through the
//       io_uring layer: N operations submitted and completed
//   trace_ground_truth runtimes N N runtimes one after another, each
//       running fib(12): threads end and new ones take their trace
//       buffers over
//   trace_ground_truth fork       a task forks; the child exits normally
//       (its atexit handlers run) while the parent goes on: the parent's
//       trace must still be complete
//   trace_ground_truth dag        a task graph of known work and span:
//       the root spawns a chain (kLinks tasks of kLinkMs, each spawning
//       the next and waiting for it) and a fan-out (kFan children of
//       kFanMs), waits, then stays busy kTailMs. Span: the chain plus the
//       tail; work: every task's busy time.
//   trace_ground_truth two        two runtimes at once, both parked, then
//       given fib(16) and fib(13) in turn from main (a, b, a): each
//       runtime's own counts of spawned and run tasks
//   trace_ground_truth rounds N   N rounds 20 ms apart, each a task whose
//       child the other worker must steal: a process that lives N * 20 ms
//       with a known number of steals, for `parkway trace record -p`
//   trace_ground_truth wakes      20 submissions from main, 3 ms apart,
//       each of a task that returns at once: each wakes a parked worker,
//       which runs it and parks again, often before its waker is done
//   trace_ground_truth exec       fib(15), then this program again (fib 18,
//       through system(), with this environment), then fib(15): the
//       trace is the parent's, complete
//   trace_ground_truth cross      a worker of runtime a submits 5 tasks to
//       runtime b, 5 ms apart (b's workers park in between): its
//       submissions and wakes are about b
//   trace_ground_truth tls-exit N runtimes a and b; N threads in turn each
//       make a thread_local object, then submit a task to b; the object's
//       destructor, at the thread's exit, submits another to b: those
//       are b's too, and in the thread's one stream
//   trace_ground_truth switch     run with a stalled writer (check-trace.py):
//       3000 tasks submitted to runtime a while the writer cannot write (main
//       drops its events), then one to b (its runtime event dropped too),
//       then, 3 s later (the writer caught up), 5 more to b: those are b's
//   trace_ground_truth wait-stdin fib(10) from a thread on a runtime left
//       running, then reads its stdin to its end before it exits (so that
//       the trace's reader can go, or its file size limit be set, first)
#include <parkway/io.hpp>
#include <parkway/parkway.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kChildren = 12;
constexpr double kChildMs = 1.5;
constexpr double kRootMinMs = 10.0;
constexpr int kIdleMs = 60;

void busy_for(double ms) {
  const auto until = Clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (Clock::now() < until) {
  }
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

int schedule() {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  std::this_thread::sleep_for(std::chrono::milliseconds(kIdleMs));  // both workers park
  std::atomic<int> on[2] = {0, 0};
  double child_ms[kChildren] = {};  // each child's own measure of its length
  int root = -1;
  double root_busy_ms = 0, root_total_ms = 0;
  rt.run([&] {
    root = parkway::Runtime::current_worker_index();
    const auto t0 = Clock::now();
    parkway::TaskGroup g;
    for (int i = 0; i < kChildren; ++i)
      g.spawn([&, i] {
        const auto c0 = Clock::now();
        const int w = parkway::Runtime::current_worker_index();
        on[w].fetch_add(1);
        busy_for(kChildMs);
        child_ms[i] = ms_since(c0);
      });
    // Busy until the other worker has started a child (it stole it), and
    // at least kRootMinMs.
    const auto deadline = t0 + std::chrono::seconds(30);
    while (ms_since(t0) < kRootMinMs || on[1 - root].load() == 0) {
      if (Clock::now() > deadline) {
        std::fprintf(stderr, "trace_ground_truth: no child was stolen within 30 s\n");
        std::exit(1);
      }
    }
    root_busy_ms = ms_since(t0);
    g.wait();
    root_total_ms = ms_since(t0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(kIdleMs));  // parked again
  rt.shutdown();
  // Work (time inside tasks, not counting a task's time searching or
  // parked in its wait): the root's busy part and every child; the root's
  // few microseconds between children in its wait are not in it.
  double work = root_busy_ms;
  for (int i = 0; i < kChildren; ++i) work += child_ms[i];
  std::printf("workers=2\nroot_worker=%d\nother_worker=%d\nchildren=%d\nroot_busy_ms=%.3f\nroot_total_ms=%.3f\n", root,
              1 - root, kChildren, root_busy_ms, root_total_ms);
  std::printf("tasks_w%d=%d\ntasks_w%d=%d\nstolen_children=%d\nidle_ms=%d\nwork_ms=%.3f\nchild_min_ms=%.3f\n", root,
              1 + on[root].load(), 1 - root, on[1 - root].load(), on[1 - root].load(), kIdleMs, work, kChildMs);
  std::printf("task_ms=%.4f", root_total_ms);
  for (double c : child_ms) std::printf(",%.4f", c);
  std::printf("\n");
  return 0;
}

constexpr int kLinks = 8;
constexpr double kLinkMs = 2.0;
constexpr int kFan = 24;
constexpr double kFanMs = 1.0;
constexpr double kTailMs = 3.0;

// Each task's busy time as it measured it: [0, kLinks) the chain,
// [kLinks, kLinks + kFan) the fan-out.
double dag_ms[kLinks + kFan];

void chain_link(int i) {
  const auto t0 = Clock::now();
  busy_for(kLinkMs);
  dag_ms[i] = ms_since(t0);
  if (i + 1 == kLinks) return;
  parkway::TaskGroup g;
  g.spawn([i] { chain_link(i + 1); });
  g.wait();
}

int dag_mode() {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  double tail_ms = 0;
  rt.run([&] {
    parkway::TaskGroup g;
    g.spawn([] { chain_link(0); });
    g.spawn([] {
      parkway::TaskGroup fan;
      for (int i = 0; i < kFan; ++i)
        fan.spawn([i] {
          const auto t0 = Clock::now();
          busy_for(kFanMs);
          dag_ms[kLinks + i] = ms_since(t0);
        });
      fan.wait();
    });
    g.wait();
    const auto t0 = Clock::now();
    busy_for(kTailMs);
    tail_ms = ms_since(t0);
  });
  rt.shutdown();
  double chain = 0, work = tail_ms;
  for (int i = 0; i < kLinks; ++i) chain += dag_ms[i];
  for (double ms : dag_ms) work += ms;
  // The longest path: the root's spawn of the chain, each link's spawn of
  // the next (kLinks spawn edges), the links, the tail.
  std::printf("dag_work_ms=%.3f\ndag_span_ms=%.3f\ndag_span_spawns=%d\ndag_tasks=%d\n", work, chain + tail_ms, kLinks,
              1 + kLinks + 1 + kFan);
  std::printf("dag_tail_ms=%.3f\ndag_task_ms=", tail_ms);
  for (double ms : dag_ms) std::printf("%.3f,", ms);
  std::printf("\n");
  return 0;
}

long fib(int n) {
  if (n < 2) return n;
  long a = 0;
  parkway::TaskGroup g;
  g.spawn([&] { a = fib(n - 1); });
  long b = fib(n - 2);
  g.wait();
  return a + b;
}

int fib_mode(int n) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  long r = rt.run([n] { return fib(n); });
  rt.shutdown();
  parkway::Stats s = rt.stats();
  std::printf("fib=%ld\nspawned=%llu\nexecuted=%llu\n", r, (unsigned long long)s.total.spawned,
              (unsigned long long)s.total.executed);
  return 0;
}

parkway::Task<int> sleeps(int n) {
  int ok = 0;
  for (int i = 0; i < n; ++i) {
    auto r = co_await parkway::io::sleep_for(std::chrono::microseconds(200));
    ok += r.ok();
  }
  co_return ok;
}

// A multishot accept that takes 3 connections, each answered with a send
// (done at its co_await: io_sent_now), then ends when its listener
// closes: its last CQE completes the one operation it submitted.
parkway::Task<int> accepts() {
  auto l = parkway::io::Listener::bind(parkway::io::Address::loopback(0));
  if (!l) co_return 0;
  parkway::io::AcceptStream st = l->stream();
  int clients[3], got = 0;
  for (int& c : clients) {
    c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const parkway::io::Address a = l->local_address();
    if (::connect(c, a.get(), a.size()) != 0) co_return 0;
  }
  for (int i = 0; i < 3; ++i) {
    auto s = co_await st.next();
    if (!s) break;
    static const char hi[] = "hi";
    auto w = co_await s->send(std::as_bytes(std::span(hi, 2)));
    got += w.ok();
  }
  l->close();
  auto end = co_await st.next();  // the accept's end (ECANCELED) reaches the taker
  for (int c : clients) ::close(c);
  co_return end ? 0 : got;
}

int io_mode(int n) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  const int ok = parkway::sync_wait(rt, sleeps(n));
  const int accepted = parkway::sync_wait(rt, accepts());
  rt.shutdown();
  // Every operation the trace counts: on the rings, and done at the co_await.
  const parkway::Stats s = rt.stats();
  const unsigned long long all = s.total.io_ops + s.total.io_sent_now + s.total.io_read_now;
  std::printf("io_ops=%llu\nio_sleeps=%d\nio_sleeps_ok=%d\naccepted=%d\n", all, n, ok, accepted);
  return ok == n && accepted == 3 ? 0 : 1;
}

// One worker with a ring (a sleep first), then n tasks of 50 us one after
// another: the worker ends its kernel slice between tasks ([Y1]).
parkway::Task<void> spin_50us() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (std::chrono::steady_clock::now() < end) {
  }
  co_return;
}

parkway::Task<void> task_stream(int n) {
  (void)co_await parkway::io::sleep_for(std::chrono::milliseconds(1));
  for (int i = 0; i < n; ++i) co_await parkway::spawn(spin_50us());
}

int slices_mode(int n) {
  parkway::Runtime rt(parkway::Options{.workers = 1, .worker_slice_us = 300});
  parkway::sync_wait(rt, task_stream(n));
  rt.shutdown();
  const unsigned long long y = rt.stats().total.slice_yields;
  std::printf("slice_yields=%llu\n", y);
  return y > 0 ? 0 : 1;
}

int runtimes_mode(int n) {
  unsigned long long executed = 0;
  for (int i = 0; i < n; ++i) {
    parkway::Runtime rt(parkway::Options{.workers = 2});
    if (rt.run([] { return fib(12); }) != 144) return 1;
    rt.shutdown();
    executed += rt.stats().total.executed;
  }
  std::printf("runtimes=%d\nexecuted=%llu\n", n, executed);
  return 0;
}

int two_mode() {
  parkway::Runtime a(parkway::Options{.workers = 2, .name = "alpha"});
  parkway::Runtime b(parkway::Options{.workers = 2, .name = "beta"});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // all four workers park
  long r = a.run([] { return fib(16); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  r += b.run([] { return fib(13); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  r += a.run([] { return fib(16); });
  a.shutdown();
  b.shutdown();
  const parkway::Stats sa = a.stats(), sb = b.stats();
  std::printf("sum=%ld\na_executed=%llu\na_spawned=%llu\nb_executed=%llu\nb_spawned=%llu\n", r,
              (unsigned long long)sa.total.executed, (unsigned long long)sa.total.spawned,
              (unsigned long long)sb.total.executed, (unsigned long long)sb.total.spawned);
  return 0;
}

int wakes_mode() {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  int n = 0;
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));  // both workers park
    n += rt.run([] { return 1; });
  }
  rt.shutdown();
  std::printf("submissions=%d\ngap_ms=3\n", n);
  return 0;
}

int cross_mode() {
  parkway::Runtime a(parkway::Options{.workers = 2});
  parkway::Runtime b(parkway::Options{.workers = 2});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int n = a.run([&] {
    int done = 0;
    for (int i = 0; i < 5; ++i) {
      done += b.submit([] { return 1; }).get();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return done;
  });
  a.shutdown();
  b.shutdown();
  std::printf("cross=%d\nb_submitted=%llu\nb_executed=%llu\n", n, (unsigned long long)b.stats().submitted,
              (unsigned long long)b.stats().total.executed);
  return 0;
}

// A thread_local object whose destructor submits to a runtime (and waits
// for the task) at its thread's exit, after any thread_local object made
// after it.
struct SubmitAtExit {
  parkway::Runtime* rt = nullptr;
  std::atomic<int>* done = nullptr;
  ~SubmitAtExit() {
    if (rt) done->fetch_add(rt->run([] { return 1; }));
  }
};
thread_local SubmitAtExit tls_submit_at_exit;

int tls_exit_mode(int n) {
  parkway::Runtime a(parkway::Options{.workers = 1});
  parkway::Runtime b(parkway::Options{.workers = 1});
  int r = a.run([] { return 1; });
  std::atomic<int> at_exit{0};
  for (int i = 0; i < n; ++i)
    std::thread([&] {
      tls_submit_at_exit.done = &at_exit;  // made before the thread's first event
      tls_submit_at_exit.rt = &b;
      r += b.run([] { return 1; });
    }).join();
  a.shutdown();
  b.shutdown();
  std::printf("threads=%d\nran=%d\nat_exit=%d\nb_executed=%llu\n", n, r, at_exit.load(),
              (unsigned long long)b.stats().total.executed);
  return at_exit.load() == n ? 0 : 1;
}

int switch_mode() {
  parkway::Runtime a(parkway::Options{.workers = 1});
  parkway::Runtime b(parkway::Options{.workers = 1});
  int r = 0;
  for (int i = 0; i < 3000; ++i) r += a.run([] { return 1; });
  r += b.run([] { return 1; });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (int i = 0; i < 5; ++i) r += b.run([] { return 1; });
  a.shutdown();
  b.shutdown();
  std::printf("ran=%d\n", r);
  return 0;
}

int wait_stdin_mode() {
  // Never shut down, and main records nothing: no thread ends (and pokes
  // the trace's writer) after the tasks' thread, so the exit's writes are
  // the trace's first after its reader went.
  static parkway::Runtime* rt = new parkway::Runtime(parkway::Options{.workers = 2});
  long r = 0;
  std::thread([&] { r = rt->run([] { return fib(10); }); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the writer wrote that thread's events
  std::printf("fib=%ld\n", r);
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  return 0;
}

int exec_mode(const char* self) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  long r = rt.run([] { return fib(15); });
  const std::string cmd = std::string(self) + " fib 18 >/dev/null";
  const int rc = std::system(cmd.c_str());
  r += rt.run([] { return fib(15); });
  rt.shutdown();
  std::printf("sum=%ld\nchild_rc=%d\nexecuted=%llu\npid=%d\n", r, rc, (unsigned long long)rt.stats().total.executed,
              int(getpid()));
  return 0;
}

int fork_mode() {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  pid_t child = rt.run([] { return fork(); });
  if (child == 0) std::exit(0);  // the child: atexit handlers, the trace's included
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("fib=%ld\nchild_status=%d\n", rt.run([] { return fib(15); }), status);
  return 0;
}

int rounds(int n) {
  parkway::Runtime rt(parkway::Options{.workers = 2});
  int stolen = 0;
  for (int r = 0; r < n; ++r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rt.run([&] {
      const int me = parkway::Runtime::current_worker_index();
      std::atomic<int> ran_on{-1};
      parkway::TaskGroup g;
      g.spawn([&] { ran_on.store(parkway::Runtime::current_worker_index()); });
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (ran_on.load() < 0) {  // only a thief can run it while we spin
        if (Clock::now() > deadline) {
          std::fprintf(stderr, "trace_ground_truth: no child was stolen within 30 s\n");
          std::exit(1);
        }
      }
      g.wait();
      stolen += ran_on.load() != me;
    });
  }
  rt.shutdown();
  std::printf("rounds=%d\nstolen=%d\nsteals_at_least=%d\n", n, stolen, stolen);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && !std::strcmp(argv[1], "schedule")) return schedule();
  if (argc == 3 && !std::strcmp(argv[1], "fib")) return fib_mode(std::atoi(argv[2]));
  if (argc == 3 && !std::strcmp(argv[1], "rounds")) return rounds(std::atoi(argv[2]));
  if (argc == 2 && !std::strcmp(argv[1], "fork")) return fork_mode();
  if (argc == 2 && !std::strcmp(argv[1], "dag")) return dag_mode();
  if (argc == 2 && !std::strcmp(argv[1], "two")) return two_mode();
  if (argc == 3 && !std::strcmp(argv[1], "runtimes")) return runtimes_mode(std::atoi(argv[2]));
  if (argc == 3 && !std::strcmp(argv[1], "io")) return io_mode(std::atoi(argv[2]));
  if (argc == 3 && !std::strcmp(argv[1], "slices")) return slices_mode(std::atoi(argv[2]));
  if (argc == 2 && !std::strcmp(argv[1], "wakes")) return wakes_mode();
  if (argc == 2 && !std::strcmp(argv[1], "cross")) return cross_mode();
  if (argc == 2 && !std::strcmp(argv[1], "exec")) return exec_mode(argv[0]);
  if (argc == 3 && !std::strcmp(argv[1], "tls-exit")) return tls_exit_mode(std::atoi(argv[2]));
  if (argc == 2 && !std::strcmp(argv[1], "switch")) return switch_mode();
  if (argc == 2 && !std::strcmp(argv[1], "wait-stdin")) return wait_stdin_mode();
  std::fprintf(stderr,
               "usage: trace_ground_truth schedule | dag | two | fib N | rounds N | fork | io N | slices N | "
               "runtimes N | wakes | cross | exec | tls-exit N | switch | wait-stdin\n");
  return 2;
}

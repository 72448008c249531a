// pw_linkprobe -- exercises SchedExtLink without the runtime.
//
//   pw_linkprobe NTHREADS SECONDS   NTHREADS plain threads register, cycle
//       Busy (spin) -> Searching (spin) -> Parked (sleep) for SECONDS,
//       unregister. The VM test reads the map while it runs.
//   pw_linkprobe bws NBUSY NSEARCH SECONDS   NBUSY threads stay Busy and
//       NSEARCH stay Searching, all spinning; prints the CPU time each group
//       got. Under the parkway scheduler the busy ones should get most of
//       it (thieves give way to preempted busy siblings); under a fair
//       per-thread scheduler each thread gets the same.
//   pw_linkprobe leave SECONDS   one Busy and one Searching worker, both
//       spinning, the whole process on CPU 0; after 1 s the main thread
//       (running, so the busy worker waits in the queue, preempted) moves
//       the busy worker to SCHED_FIFO, where it blocks; the searcher spins
//       on for SECONDS. The scheduler must stop counting the busy worker as
//       waiting, or the searcher yields at every tick (VM case 15).
//   pw_linkprobe rt SECONDS   one Busy and one Searching worker, both
//       spinning, free to run on any CPU, and a SCHED_FIFO thread, asleep;
//       after 1 s the busy worker pins the RT thread to its own CPU and
//       wakes it, and the RT thread spins there for SECONDS (at least 1);
//       prints the CPU time each worker, the RT thread and the process got
//       in that window, and the workers' time on the RT thread's CPU and
//       elsewhere, over the window and over its first 800 ms (before RT
//       throttling first lets that CPU run anything else). The busy worker, preempted by an RT task, must move to the
//       other CPU (ahead of its searching sibling), not wait for the RT task
//       (VM case 16).
//   pw_linkprobe bursts CPU_MS   no link: spins in 300 us bursts with
//       200 us sleeps until it has used CPU_MS of CPU, then exits; most of
//       its wakeups find an idle CPU and no burst outlasts a slice, so the
//       scheduler seldom or never queues it (VM case 17).
// Exit 1 if the link is inactive (scheduler not loaded).
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sched_ext_link.hpp"

using parkway::detail::SchedExtLink;
using parkway::detail::WorkerState;
using Clock = std::chrono::steady_clock;

static void spin_for(std::chrono::microseconds d) {
  auto end = Clock::now() + d;
  while (Clock::now() < end) {
  }
}

static long thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int cycle(unsigned n, int seconds) {
  SchedExtLink link(n);
  std::printf("linkprobe pid %d: link %s\n", static_cast<int>(getpid()), link.active() ? "active" : "inactive");
  if (!link.active()) return 1;
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      link.register_worker(i);
      while (Clock::now() < end) {
        link.publish(i, WorkerState::Busy);
        spin_for(std::chrono::milliseconds(40));
        link.publish(i, WorkerState::Searching);
        spin_for(std::chrono::milliseconds(10));
        link.publish(i, WorkerState::Parked);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      link.unregister_worker(i);
    });
  for (auto& t : ts) t.join();
  std::printf("linkprobe ok: %u threads registered, published, unregistered\n", n);
  return 0;
}

static int bws(unsigned nbusy, unsigned nsearch, int seconds) {
  const unsigned n = nbusy + nsearch;
  SchedExtLink link(n);
  std::printf("linkprobe bws pid %d: link %s\n", static_cast<int>(getpid()), link.active() ? "active" : "inactive");
  std::vector<long> cpu(n, 0);
  auto end = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      link.register_worker(i);
      link.publish(i, i < nbusy ? WorkerState::Busy : WorkerState::Searching);
      while (Clock::now() < end) spin_for(std::chrono::milliseconds(1));
      cpu[i] = thread_cpu_ms();
      link.unregister_worker(i);
    });
  for (auto& t : ts) t.join();
  long busy = 0, search = 0;
  for (unsigned i = 0; i < n; ++i) (i < nbusy ? busy : search) += cpu[i];
  std::printf("bws busy_ms=%ld searching_ms=%ld busy_share=%ld%%\n", busy, search,
              busy + search ? busy * 100 / (busy + search) : 0);
  return 0;
}

static int leave(int seconds) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  // One CPU for all threads: while the main thread runs, the spinning busy
  // worker cannot, so it waits in the scheduler's queue.
  if (sched_setaffinity(0, sizeof(one), &one) != 0) {
    std::perror("leave: sched_setaffinity");
    return 2;
  }
  SchedExtLink link(2);
  std::printf("linkprobe leave pid %d: link %s\n", static_cast<int>(getpid()), link.active() ? "active" : "inactive");
  if (!link.active()) return 1;
  std::atomic<bool> left{false}, done{false};
  std::atomic<pid_t> busy_tid{0};
  std::thread busy([&] {
    busy_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    link.register_worker(0);
    link.publish(0, WorkerState::Busy);
    while (!left.load()) spin_for(std::chrono::microseconds(100));
    // Now SCHED_FIFO: block (still Busy) until the end.
    while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    link.unregister_worker(0);
  });
  std::thread search([&] {
    link.register_worker(1);
    link.publish(1, WorkerState::Searching);
    while (!done.load()) spin_for(std::chrono::milliseconds(1));
    link.unregister_worker(1);
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));
  sched_param sp{};
  sp.sched_priority = 1;
  left = true;  // before the switch: once FIFO, the worker runs at once
  int rc = sched_setscheduler(busy_tid.load(), SCHED_FIFO, &sp);
  std::printf("leave: busy worker %d to SCHED_FIFO: %s\n", static_cast<int>(busy_tid.load()),
              rc == 0 ? "ok" : std::strerror(errno));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  done = true;
  busy.join();
  search.join();
  std::printf("leave done\n");
  return rc == 0 ? 0 : 1;
}

static long clock_ms(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int rt(int seconds) {
  SchedExtLink link(2);
  std::printf("linkprobe rt pid %d: link %s\n", static_cast<int>(getpid()), link.active() ? "active" : "inactive");
  if (!link.active()) return 1;
  std::atomic<bool> done{false};
  std::atomic<int> go{0}, cpu{-1}, rc{0};
  std::atomic<pid_t> hog_tid{0};
  std::atomic<bool> in_window{false};
  // CPU time in the window per worker, on the RT thread's CPU and on the
  // other ones: sampled at each pass of the spin loops.
  std::atomic<long> on_rt_cpu[2] = {0, 0}, elsewhere[2] = {0, 0};
  long early_rt[2] = {0, 0}, early_else[2] = {0, 0};  // the first 800 ms
  auto account = [&](int w, long& last) {
    long now = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    if (in_window.load()) (sched_getcpu() == cpu.load() ? on_rt_cpu[w] : elsewhere[w]) += now - last;
    last = now;
  };
  std::atomic<clockid_t> busy_clk{CLOCK_THREAD_CPUTIME_ID}, search_clk{CLOCK_THREAD_CPUTIME_ID};
  long b0 = 0, s0 = 0, b1 = 0, s1 = 0, ms = 0, p0 = 0, p1 = 0, h0 = 0, h1 = 0;
  // The RT thread: SCHED_FIFO from the start, asleep until the busy worker
  // wakes it on its own CPU.
  std::thread hog([&] {
    sched_param sp{};
    sp.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      std::perror("rt: SCHED_FIFO");
      rc = 2;
    }
    hog_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    go.wait(0);
    if (rc) return;
    // Running now on the busy worker's CPU, which it took from it.
    b0 = clock_ms(busy_clk);
    s0 = clock_ms(search_clk);
    p0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    h0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    in_window = true;
    auto t0 = Clock::now();
    // RT throttling first lets the ext tasks of this CPU run 950 ms after
    // the RT thread took it (the default 950 ms of RT time per 1 s): until
    // then a task left on this CPU's own queue cannot run at all.
    spin_for(std::chrono::milliseconds(800));
    for (int w = 0; w < 2; ++w) {
      early_rt[w] = on_rt_cpu[w].load();
      early_else[w] = elsewhere[w].load();
    }
    spin_for(std::chrono::seconds(seconds) - std::chrono::milliseconds(800));
    in_window = false;
    b1 = clock_ms(busy_clk);
    s1 = clock_ms(search_clk);
    p1 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    h1 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  });
  while (!hog_tid.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // After 1 s the busy worker pins the sleeping RT thread to the CPU it is
  // running on and wakes it: the RT thread preempts it there at once, with
  // slice left (as an RT thread woken by anyone on that CPU would).
  std::thread busy([&] {
    link.register_worker(0);
    link.publish(0, WorkerState::Busy);
    auto wake_at = Clock::now() + std::chrono::seconds(1);
    long last = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    while (!done.load()) {
      spin_for(std::chrono::microseconds(200));
      account(0, last);
      if (!go.load() && Clock::now() >= wake_at) {
        cpu_set_t one;
        CPU_ZERO(&one);
        cpu = sched_getcpu();
        CPU_SET(cpu.load(), &one);
        if (sched_setaffinity(hog_tid.load(), sizeof(one), &one) != 0) {
          std::perror("rt: pin the RT thread");
          rc = 2;
        }
        go = 1;
        go.notify_one();
      }
    }
    link.unregister_worker(0);
  });
  std::thread search([&] {
    link.register_worker(1);
    link.publish(1, WorkerState::Searching);
    long last = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    while (!done.load()) {
      spin_for(std::chrono::microseconds(200));
      account(1, last);
    }
    link.unregister_worker(1);
  });
  clockid_t clk;
  pthread_getcpuclockid(busy.native_handle(), &clk);
  busy_clk = clk;
  pthread_getcpuclockid(search.native_handle(), &clk);
  search_clk = clk;
  hog.join();
  done = true;
  busy.join();
  search.join();
  if (rc) return rc;
  std::printf("rt cpu %d window_ms=%ld busy_ms=%ld searching_ms=%ld rt_ms=%ld process_ms=%ld; elsewhere/on the RT "
              "thread's CPU: busy %ld/%ld searching %ld/%ld; in the first 800 ms: early_busy_elsewhere_ms=%ld "
              "early_searching_elsewhere_ms=%ld early_busy_on_rt_cpu_ms=%ld early_searching_on_rt_cpu_ms=%ld\n",
              cpu.load(), ms, b1 - b0, s1 - s0, h1 - h0, p1 - p0, elsewhere[0].load(), on_rt_cpu[0].load(),
              elsewhere[1].load(), on_rt_cpu[1].load(), early_else[0], early_else[1], early_rt[0], early_rt[1]);
  return 0;
}

// Spins in 300 us bursts with 200 us sleeps until it has used cpu_ms of
// CPU. A burst is shorter than the scheduler's shortest slice (500 us), so
// the program never loses its CPU at the end of a slice either.
static int bursts(long cpu_ms) {
  std::printf("bursts pid %d\n", static_cast<int>(getpid()));
  std::fflush(stdout);
  while (clock_ms(CLOCK_PROCESS_CPUTIME_ID) < cpu_ms) {
    spin_for(std::chrono::microseconds(300));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::printf("bursts done cpu_ms=%ld\n", clock_ms(CLOCK_PROCESS_CPUTIME_ID));
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "rt")) return rt(std::atoi(argv[2]));
  if (argc == 3 && !std::strcmp(argv[1], "bursts")) return bursts(std::atol(argv[2]));
  if (argc == 3 && !std::strcmp(argv[1], "leave")) return leave(std::atoi(argv[2]));
  if (argc > 1 && !std::strcmp(argv[1], "bws")) {
    if (argc != 5) return 2;
    return bws(static_cast<unsigned>(std::atoi(argv[2])), static_cast<unsigned>(std::atoi(argv[3])), std::atoi(argv[4]));
  }
  unsigned n = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 2;
  return cycle(n, seconds);
}

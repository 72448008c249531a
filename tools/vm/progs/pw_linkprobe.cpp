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

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "leave")) return leave(std::atoi(argv[2]));
  if (argc > 1 && !std::strcmp(argv[1], "bws")) {
    if (argc != 5) return 2;
    return bws(static_cast<unsigned>(std::atoi(argv[2])), static_cast<unsigned>(std::atoi(argv[3])), std::atoi(argv[4]));
  }
  unsigned n = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 2;
  int seconds = argc > 2 ? std::atoi(argv[2]) : 2;
  return cycle(n, seconds);
}

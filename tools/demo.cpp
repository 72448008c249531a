// demo.cpp -- parkway at work, then at rest, with the numbers it measured.
//
// Built against an installed parkway found by pkg-config (make demo).
#include <parkway/parkway.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

long fib(int n) {
  if (n < 2) return n;
  long a = 0, b = 0;
  parkway::TaskGroup g;
  g.spawn([&] { a = fib(n - 1); });
  b = fib(n - 2);
  g.wait();
  return a + b;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

template <class F>
double timed(F f) {
  double t0 = now_s();
  f();
  return now_s() - t0;
}

}  // namespace

int main() {
  const unsigned cpus = parkway::online_cpus();
  std::printf("parkway demo: %u CPUs\n\n", cpus);

  // 1. Parallel work: fib(32) with one spawn per call (3.5 million
  // spawns; the best of three runs, a run being tens of milliseconds),
  // and a reduction.
  double t1 = 1e9, tn = 1e9;
  long r1 = 0, rn = 0;
  {
    parkway::Runtime one(parkway::Options{.workers = 1});
    for (int i = 0; i < 3; ++i) t1 = std::min(t1, timed([&] { r1 = one.run([] { return fib(32); }); }));
  }
  parkway::Runtime rt;  // one worker per CPU
  for (int i = 0; i < 3; ++i) tn = std::min(tn, timed([&] { rn = rt.run([] { return fib(32); }); }));
  std::printf("fib(32) = %ld: %.3f s on 1 worker, %.3f s on %u workers (best of 3; speed-up %.2fx)\n", r1, t1,
              tn, rt.workers(), t1 / tn);
  if (r1 != 2178309 || rn != 2178309) {
    std::printf("WRONG RESULT\n");
    return 1;
  }

  const std::size_t n = 50'000'000;
  std::vector<double> partial(rt.workers() * 8, 0.0);
  double tr = timed([&] {
    parkway::parallel_for(rt, 0, partial.size(), 1, [&](std::size_t c) {
      std::size_t lo = n * c / partial.size(), hi = n * (c + 1) / partial.size();
      double s = 0;
      for (std::size_t i = lo; i < hi; ++i) s += 1.0 / double((i + 1) * (i + 1));
      partial[c] = s;
    });
  });
  double sum = 0;
  for (double p : partial) sum += p;
  std::printf("parallel_for: sum 1/i^2 for i <= %zu = %.9f (pi^2/6 = 1.644934067) in %.3f s\n", n, sum, tr);

  // 2. Rest: the pool goes idle; its workers park on their futex words.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  parkway::Stats before = rt.stats();
  double c0 = cpu_s(), w0 = now_s();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  double idle_cpu = cpu_s() - c0, idle_wall = now_s() - w0;
  parkway::Stats after = rt.stats();
  std::printf("idle for %.2f s: the process used %.3f ms of CPU (%.3f ms per idle second); %llu parks during it\n",
              idle_wall, idle_cpu * 1e3, idle_cpu * 1e3 / idle_wall,
              (unsigned long long)(after.total.parks - before.total.parks));

  // 3. Trickle: one tiny task per millisecond from this thread.
  const int ticks = 500;
  double tc0 = cpu_s(), tw0 = now_s();
  for (int i = 0; i < ticks; ++i) {
    rt.submit([] {});
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double trickle_cpu = cpu_s() - tc0, trickle_wall = now_s() - tw0;
  std::printf("trickle: %d tiny tasks, one per ms, over %.2f s: %.1f us of CPU per task\n", ticks, trickle_wall,
              trickle_cpu * 1e6 / ticks);

  parkway::Stats s = rt.stats();
  std::printf("\n%-8s %10s %10s %8s %10s %8s %8s %8s %8s %8s\n", "worker", "spawned", "executed", "steals", "failed",
              "parks", "wakeups", "w.wakes", "st.fence", "pk.fence");
  auto row = [](const char* name, const parkway::WorkerStats& w) {
    std::printf("%-8s %10llu %10llu %8llu %10llu %8llu %8llu %8llu %8llu %8llu\n", name, (unsigned long long)w.spawned,
                (unsigned long long)w.executed, (unsigned long long)w.steals, (unsigned long long)w.failed_steals,
                (unsigned long long)w.parks, (unsigned long long)w.wakeups, (unsigned long long)w.waiter_wakeups,
                (unsigned long long)w.steal_fences, (unsigned long long)w.park_fences);
  };
  for (std::size_t i = 0; i < s.workers.size(); ++i) row(std::to_string(i).c_str(), s.workers[i]);
  row("total", s.total);
  std::printf("(w.wakes: sleeping waiters woken by a task the worker finished, tracing.md;\n"
              " st.fence: steals for which the thief called membarrier, docs/design/deque.md;\n"
              " pk.fence: parking rechecks that called it because another worker was busy, parking.md)\n");
  std::printf("submitted from outside: %llu, workers woken by outside threads: %llu\n",
              (unsigned long long)s.submitted, (unsigned long long)s.external_wakeups);
  return 0;
}

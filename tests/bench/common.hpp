// common.hpp -- the benchmark kernels and the measurement driver that every
// bench_<runtime> binary shares.
//
// Each binary is one runtime (parkway, tbb, omp, futex floor) behind the
// same small Backend interface; `bench_main<Backend>(argc, argv)` parses one
// command, runs ONE repetition of it and prints one JSON object on stdout.
// tests/bench/run_bench.py interleaves the repetitions of all binaries,
// takes medians and prints the ratio table. One process per measurement
// keeps the runtimes apart: OpenMP's and TBB's spinning threads never share
// a process (or a getrusage total) with the runtime being measured.
//
// A Backend provides:
//   static constexpr const char* kName;
//   explicit Backend(unsigned workers);        // builds the pool
//   long fib(int n);                           // fib, one spawn per call, on the pool
//   std::uint64_t reduce(std::uint64_t nchunks, std::uint64_t chunk); // sum of chunk partial sums
//   std::uint64_t uts(const UtsParams& p);    // node count of the tree
//   static constexpr bool kExternal;           // can a non-pool thread post work?
//   template <class F> void post(F f);         // fire-and-forget from outside (when kExternal)
//   static unsigned min_threads(unsigned w);   // threads (besides main) the pool has once used
//   std::string extra();                       // JSON members with runtime counters ("" if none)
#pragma once

#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// ---------------------------------------------------------------- clocks

inline std::int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline std::int64_t thread_cpu_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// User + system CPU of the whole process (every thread), in ns.
inline std::int64_t process_cpu_ns() noexcept {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (std::int64_t(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1000000000 +
         (std::int64_t(ru.ru_utime.tv_usec) + ru.ru_stime.tv_usec) * 1000;
}

inline void sleep_until_ns(std::int64_t t) noexcept {
  timespec ts{time_t(t / 1000000000), long(t % 1000000000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

inline void sleep_ns(std::int64_t d) noexcept { sleep_until_ns(now_ns() + d); }

// Burns `ns` of this thread's CPU time (not wall time: preemption does not
// shorten the work). Returns the CPU time actually burnt.
inline std::int64_t burn_cpu_ns(std::int64_t ns) noexcept {
  std::int64_t t0 = thread_cpu_ns(), t;
  do {
    t = thread_cpu_ns();
  } while (t - t0 < ns);
  return t - t0;
}

// ---------------------------------------------------------------- futex

inline void futex_wait(std::atomic<std::uint32_t>* w, std::uint32_t expected) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(w), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
inline void futex_wake(std::atomic<std::uint32_t>* w, int n = 1) noexcept {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(w), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// A one-shot flag another thread sets; the waiter sleeps on it.
struct Flag {
  std::atomic<std::uint32_t> word{0};
  void set() noexcept {
    word.store(1, std::memory_order_release);
    futex_wake(&word);
  }
  void wait() noexcept {
    while (word.load(std::memory_order_acquire) == 0) futex_wait(&word, 0);
  }
  void reset() noexcept { word.store(0, std::memory_order_relaxed); }
};

// ---------------------------------------------------------------- kernels

inline std::uint64_t mix64(std::uint64_t x) noexcept {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Sequential fib: the T(seq) baseline. noipa: without it g++ infers the
// function is const and folds the timed call into the warm-up call.
__attribute__((noipa)) inline long fib_seq(int n) noexcept {
  return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}

// The same recursion with g++'s tail-recursion-with-accumulator rewrite
// turned off (fib_seq above becomes a loop of fib(n-1) calls, ~1.6x faster):
// a second, more conservative T(seq) for the T(1)/T(seq) ratio.
__attribute__((noipa, optimize("no-optimize-sibling-calls"))) inline long fib_seq_plain(int n) noexcept {
  return n < 2 ? n : fib_seq_plain(n - 1) + fib_seq_plain(n - 2);
}

inline long fib_iter(int n) noexcept {
  long a = 0, b = 1;
  for (int i = 0; i < n; ++i) {
    long c = a + b;
    a = b;
    b = c;
  }
  return a;
}

// Spawns of the spawning fib(n): one per call with n >= 2.
inline std::uint64_t fib_spawns(int n) noexcept {
  std::uint64_t a = 0, b = 0;  // spawns(k-1), spawns(k)  (spawns(0)=spawns(1)=0)
  for (int k = 2; k <= n; ++k) {
    std::uint64_t c = a + b + 1;
    a = b;
    b = c;
  }
  return n < 2 ? 0 : b;
}

// Reduction: sum of mix64(i) >> 32 over [c*chunk, (c+1)*chunk).
inline std::uint64_t reduce_chunk(std::uint64_t c, std::uint64_t chunk) noexcept {
  std::uint64_t s = 0;
  for (std::uint64_t i = c * chunk, e = i + chunk; i < e; ++i) s += mix64(i) >> 32;
  return s;
}

__attribute__((noipa)) inline std::uint64_t reduce_seq(std::uint64_t nchunks, std::uint64_t chunk) noexcept {
  std::uint64_t s = 0;
  for (std::uint64_t c = 0; c < nchunks; ++c) s += reduce_chunk(c, chunk);
  return s;
}

// Unbalanced tree search, UTS binomial shape (Olivier et al., LCPC 2006,
// tree T3's parameters): the root has b0 children; every other node has m
// children with probability q, else none (q*m just under 1: a few long,
// deep chains). A node is its 64-bit state; child i of s is
// mix64(s ^ (i+1)*K). splitmix replaces UTS's SHA-1 (so the per-node work
// is tiny and the benchmark is spawn-bound), so node counts differ from
// the published T3's.
struct UtsParams {
  std::uint64_t seed = 6;  // 4,535,937 nodes (T3 proper has 4.1M)
  unsigned b0 = 2000;
  unsigned m = 8;
  double q = 0.124875;
};

inline std::uint64_t uts_child(std::uint64_t s, unsigned i) noexcept {
  return mix64(s ^ ((i + 1) * 0xd1342543de82ef95ull));
}

inline unsigned uts_nchildren(std::uint64_t s, const UtsParams& p) noexcept {
  double u = double(mix64(s) >> 11) * 0x1.0p-53;
  return u < p.q ? p.m : 0;
}

inline std::uint64_t uts_seq_node(std::uint64_t s, const UtsParams& p) noexcept {
  std::uint64_t n = 1;
  unsigned k = uts_nchildren(s, p);
  for (unsigned i = 0; i < k; ++i) n += uts_seq_node(uts_child(s, i), p);
  return n;
}

__attribute__((noipa)) inline std::uint64_t uts_seq(const UtsParams& p) noexcept {
  std::uint64_t root = mix64(p.seed), n = 1;
  for (unsigned i = 0; i < p.b0; ++i) n += uts_seq_node(uts_child(root, i), p);
  return n;
}

// Tasks the parallel versions spawn for a tree: every root child, and m-1
// children of every other inner node (the last child runs inline).
inline std::uint64_t uts_spawns(const UtsParams& p) {
  std::uint64_t root = mix64(p.seed), n = p.b0;
  std::vector<std::uint64_t> stack;
  for (unsigned i = 0; i < p.b0; ++i) stack.push_back(uts_child(root, i));
  while (!stack.empty()) {
    std::uint64_t s = stack.back();
    stack.pop_back();
    unsigned k = uts_nchildren(s, p);
    if (k) n += k - 1;
    for (unsigned i = 0; i < k; ++i) stack.push_back(uts_child(s, i));
  }
  return n;
}

// ---------------------------------------------------------------- stats

// NaN for an empty list (Json::num prints it as null): a wake run that kept
// no samples must not report a latency of 0.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  double pos = p * double(v.size() - 1);
  std::size_t i = std::size_t(pos);
  double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// ---------------------------------------------------------------- /proc

// Threads of this process other than the caller, and how many of them are
// asleep (state S or D in /proc/self/task/<tid>/stat). The benchmark's
// independent check that a pool's workers are parked, for any runtime.
struct ThreadStates {
  int others = 0;
  int sleeping = 0;
};

inline ThreadStates thread_states() {
  ThreadStates r;
  pid_t self = pid_t(syscall(SYS_gettid));
  DIR* d = opendir("/proc/self/task");
  if (!d) return r;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    pid_t tid = pid_t(atoi(e->d_name));
    if (tid == self) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE* f = fopen(path, "r");
    if (!f) continue;
    std::size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char* rp = strrchr(buf, ')');  // comm may contain spaces
    if (!rp || rp[1] == 0) continue;
    char st = rp[2];
    ++r.others;
    if (st == 'S' || st == 'D') ++r.sleeping;
  }
  closedir(d);
  return r;
}

// ---------------------------------------------------------------- output

struct Json {
  std::string s;
  explicit Json(const char* bench, const char* runtime) {
    s = std::string("{\"bench\":\"") + bench + "\",\"runtime\":\"" + runtime + "\"";
  }
  // A value that is not finite (NaN: nothing was measured) is JSON null.
  Json& num(const char* k, double v) {
    char b[96];
    if (!std::isfinite(v))
      snprintf(b, sizeof b, ",\"%s\":null", k);
    else
      snprintf(b, sizeof b, ",\"%s\":%.6g", k, v);
    s += b;
    return *this;
  }
  Json& u64(const char* k, std::uint64_t v) {
    char b[96];
    snprintf(b, sizeof b, ",\"%s\":%" PRIu64, k, v);
    s += b;
    return *this;
  }
  Json& str(const char* k, const char* v) {
    s += std::string(",\"") + k + "\":\"" + v + "\"";
    return *this;
  }
  Json& raw(const std::string& members) {
    if (!members.empty()) s += "," + members;
    return *this;
  }
  void print() {
    s += "}\n";
    fputs(s.c_str(), stdout);
    fflush(stdout);
  }
};

[[noreturn]] inline void die(const char* msg) {
  fprintf(stderr, "bench: %s\n", msg);
  exit(2);
}

// ---------------------------------------------------------------- driver

inline void usage(const char* prog) {
  fprintf(stderr,
          "usage: %s COMMAND ARGS   (prints one JSON line)\n"
          "  fib N WORKERS              seq fib(N) then spawning fib(N) on the pool\n"
          "  fibonce N WORKERS          spawning fib(N) once, nothing else (for callgrind)\n"
          "  seqfib N                   fib_seq(N) once (for callgrind)\n"
          "  reduce NCHUNKS CHUNK WORKERS\n"
          "  uts WORKERS\n"
          "  utsonce B0 WORKERS         the tree cut to B0 root children, once (for callgrind)\n"
          "  utsinfo B0                 spawn count of that tree\n"
          "  idle WORKERS SECONDS       some work, then CPU used while idle\n"
          "  trickle WORKERS SECONDS WORK_US   one task per ms from this (outside) thread\n"
          "  wake WORKERS SAMPLES GAP_US       submit-to-start latency into a parked pool\n",
          prog);
  exit(2);
}

template <class B>
void run_fib(int n, unsigned w, bool once) {
  // fibonce (under callgrind) must not run fib_seq: its instructions would
  // land in the fib(22) - fib(18) difference. The loop costs ~n steps.
  long expect = fib_iter(n);
  std::int64_t seq = 0, seq_plain = 0;
  // The median of `runs` (at most 5) timings after a warm-up run: the
  // per-process T(1)/T(seq) rests on it, and one ~5 ms run is noisier than
  // the pool's.
  auto median_ns = [&](long (*fib)(int), const char* what, int runs) {
    fib(n);  // warm the code
    std::int64_t t[5];
    for (int i = 0; i < runs; ++i) {
      std::int64_t t0 = now_ns();
      long r = fib(n);
      t[i] = now_ns() - t0;
      if (r != expect) die(what);
    }
    std::sort(t, t + runs);
    return t[runs / 2];
  };
  if (!once) {
    seq = median_ns(&fib_seq, "fib_seq mismatch", 5);
    seq_plain = median_ns(&fib_seq_plain, "fib_seq_plain mismatch", 5);
  }
  B b(w);
  if (!once) b.fib(n > 20 ? 20 : n);  // warm the pool (threads started, caches)
  std::int64_t t0 = now_ns();
  long r = b.fib(n);
  std::int64_t par = now_ns() - t0;
  if (r != expect) die("fib result mismatch");
  if (once) return;
  // The same sequential work once more, after the pool's run: a sensor for
  // a CPU slowed around it (run_bench.py, the slow-CPU rule), not part of
  // T(seq).
  std::int64_t seq_after = median_ns(&fib_seq, "fib_seq mismatch", 3);
  std::uint64_t sp = fib_spawns(n);
  Json(once ? "fibonce" : "fib", B::kName)
      .num("n", n).num("workers", w).u64("spawns", sp)
      .num("seq_s", seq * 1e-9).num("par_s", par * 1e-9)
      .num("ns_per_spawn", double(par) / double(sp))
      .num("t_over_seq", double(par) / double(seq))
      .num("seq_plain_s", seq_plain * 1e-9)
      .num("seq_after_s", seq_after * 1e-9)
      .num("t_over_seq_plain", double(par) / double(seq_plain))
      .raw(b.extra())
      .print();
}

template <class B>
void run_reduce(std::uint64_t nchunks, std::uint64_t chunk, unsigned w) {
  std::int64_t t0 = now_ns();
  std::uint64_t expect = reduce_seq(nchunks, chunk);
  std::int64_t seq = now_ns() - t0;
  B b(w);
  b.reduce(nchunks / 16 + 1, chunk / 16 + 1);  // warm
  t0 = now_ns();
  std::uint64_t r = b.reduce(nchunks, chunk);
  std::int64_t par = now_ns() - t0;
  if (r != expect) die("reduce result mismatch");
  Json("reduce", B::kName)
      .num("workers", w).u64("n", nchunks * chunk).u64("chunks", nchunks)
      .num("seq_s", seq * 1e-9).num("par_s", par * 1e-9)
      .num("speedup", double(seq) / double(par))
      .raw(b.extra())
      .print();
}

template <class B>
void run_uts(unsigned w) {
  UtsParams p;
  std::int64_t t0 = now_ns();
  std::uint64_t expect = uts_seq(p);
  std::int64_t seq = now_ns() - t0;
  B b(w);
  b.fib(18);  // warm
  t0 = now_ns();
  std::uint64_t r = b.uts(p);
  std::int64_t par = now_ns() - t0;
  if (r != expect) die("uts node count mismatch");
  Json("uts", B::kName)
      .num("workers", w).u64("nodes", r)
      .num("seq_s", seq * 1e-9).num("par_s", par * 1e-9)
      .num("speedup", double(seq) / double(par))
      .num("ns_per_node", double(par) / double(r))
      .raw(b.extra())
      .print();
}

template <class B>
void run_idle(unsigned w, double secs) {
  B b(w);
  b.fib(27);  // some work (~300k spawns)
  std::int64_t wall0 = now_ns(), cpu0 = process_cpu_ns();
  sleep_ns(std::int64_t(secs * 1e9));
  std::int64_t cpu = process_cpu_ns() - cpu0, wall = now_ns() - wall0;
  ThreadStates ts = thread_states();
  Json("idle", B::kName)
      .num("workers", w).num("idle_s", wall * 1e-9)
      .num("cpu_ms", cpu * 1e-6)
      .num("cpu_ms_per_idle_s", cpu * 1e-6 / (wall * 1e-9))
      .num("threads", ts.others).num("threads_sleeping", ts.sleeping)
      .raw(b.extra())
      .print();
}

// Posts one task per pool thread that waits (up to 1 s) until all of them
// run at once: afterwards every thread the pool uses for outside work
// exists (oneTBB starts its workers lazily).
template <class B>
void warm_external(B& b, unsigned w) {
  unsigned n = B::min_threads(w);
  std::atomic<unsigned> in{0}, out{0};
  for (unsigned i = 0; i < n; ++i)
    b.post([&, n] {
      in.fetch_add(1);
      std::int64_t end = now_ns() + 1000000000;
      while (in.load() < n && now_ns() < end) {
      }
      out.fetch_add(1);
    });
  while (out.load() < n) sleep_ns(100000);
}

// The caller ticks every millisecond (absolute deadlines) and posts one
// task per tick. CPU beyond the work, per task, in two parts:
//   pool:      process CPU - the posting thread's CPU - the tasks' own CPU
//              (their thread-CPU time, measured inside each task);
//   submitter: the posting thread's CPU inside post() (thread-CPU clock
//              read around each call, minus the cost of an empty pair of
//              reads).
// The posting thread's CPU outside post() is the tick loop itself (tens of
// us per tick on this VM: timer exits); it is not the runtime's, and the
// same with or without a pool. As a cross-check the JSON also has the
// posting thread's whole CPU minus a bare tick loop's (measured before and
// after without posting); that difference is much noisier.
template <class B>
void run_trickle(unsigned w, double secs, double work_us) {
  constexpr std::int64_t kTick = 1000000;
  auto tick_cost = [](int n) {  // posting thread's CPU per bare tick
    std::int64_t c0 = thread_cpu_ns(), t = now_ns();
    for (int i = 0; i < n; ++i) sleep_until_ns(t += kTick);
    return double(thread_cpu_ns() - c0) / n;
  };
  double empty_pair = 0;  // cost of two back-to-back thread_cpu_ns() reads
  {
    std::int64_t best = INT64_MAX;
    for (int i = 0; i < 200; ++i) {
      std::int64_t a = thread_cpu_ns(), b = thread_cpu_ns();
      best = std::min(best, b - a);
    }
    empty_pair = double(best);
  }
  B b(w);
  b.fib(20);
  warm_external(b, w);
  double base0 = tick_cost(300);  // pool idle (parked) meanwhile
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::int64_t> work_ns{0};
  std::int64_t work = std::int64_t(work_us * 1000);
  int ticks = int(secs * 1000);
  std::int64_t in_post = 0;
  std::int64_t cpu0 = process_cpu_ns(), me0 = thread_cpu_ns();
  std::int64_t wall0 = now_ns(), t = wall0;
  for (int i = 0; i < ticks; ++i) {
    sleep_until_ns(t += kTick);
    std::int64_t p0 = thread_cpu_ns();
    b.post([&done, &work_ns, work] {
      if (work > 0) work_ns.fetch_add(burn_cpu_ns(work), std::memory_order_relaxed);
      done.fetch_add(1, std::memory_order_release);
    });
    in_post += thread_cpu_ns() - p0;
  }
  while (done.load(std::memory_order_acquire) < std::uint64_t(ticks)) sleep_ns(100000);
  std::int64_t me = thread_cpu_ns() - me0;
  std::int64_t cpu = process_cpu_ns() - cpu0, wall = now_ns() - wall0;
  double base1 = tick_cost(300);
  double base = (base0 + base1) / 2;
  double pool = (double(cpu - me) - double(work_ns.load())) / ticks;
  double sub = std::max(0.0, double(in_post) / ticks - empty_pair);
  double sub_vs_loop = (double(me) - base * ticks) / ticks;
  Json("trickle", B::kName)
      .num("workers", w).num("work_us", work_us).num("tasks", ticks)
      .num("wall_s", wall * 1e-9).num("cpu_ms", cpu * 1e-6)
      .num("work_ms", work_ns.load() * 1e-6)
      .num("pool_us_per_task", pool * 1e-3)
      .num("submitter_us_per_task", sub * 1e-3)
      .num("cpu_us_per_task_beyond_work", (pool + sub) * 1e-3)
      .num("tick_loop_us", base * 1e-3).num("tick_loop_spread_us", (base1 - base0) * 1e-3)
      .num("submitter_vs_tick_loop_us", sub_vs_loop * 1e-3)
      .raw(b.extra())
      .print();
}

// Wake latency: with every pool thread asleep (checked in /proc before each
// sample; samples where one is not are dropped and counted), time from just
// before post() to the first instruction of the task. "samples" is the
// number kept (at most 3x SAMPLES attempts); with none, every percentile is
// null. run_bench.py counts a run that kept < 90% of SAMPLES as failed.
template <class B>
void run_wake(unsigned w, int samples, std::int64_t gap_ns) {
  B b(w);
  b.fib(20);
  warm_external(b, w);
  sleep_ns(200000000);
  std::vector<double> lat, post_us;  // submit-to-start; duration of the post() call
  lat.reserve(samples);
  post_us.reserve(samples);
  int dropped = 0, attempts = 0, same_cpu = 0;
  std::atomic<int> cpu_task{-1};
  Flag started;
  std::atomic<std::int64_t> t1{0};
  while (int(lat.size()) < samples && attempts < samples * 3) {
    ++attempts;
    sleep_ns(gap_ns);
    ThreadStates ts = thread_states();
    if (ts.others < int(B::min_threads(w)) || ts.sleeping != ts.others) {
      ++dropped;
      continue;
    }
    started.reset();
    int cpu_post = sched_getcpu();
    std::int64_t t0 = now_ns();
    b.post([&] {
      t1.store(now_ns(), std::memory_order_relaxed);
      cpu_task.store(sched_getcpu(), std::memory_order_relaxed);
      started.set();
    });
    std::int64_t tp = now_ns();
    started.wait();
    same_cpu += cpu_task.load(std::memory_order_relaxed) == cpu_post;
    lat.push_back(double(t1.load(std::memory_order_relaxed) - t0) * 1e-3);
    post_us.push_back(double(tp - t0) * 1e-3);
  }
  Json("wake", B::kName)
      .num("workers", w).num("samples", double(lat.size())).num("gap_ms", gap_ns * 1e-6)
      .num("dropped_not_parked", dropped)
      .num("median_us", percentile(lat, 0.5)).num("p90_us", percentile(lat, 0.9))
      .num("p99_us", percentile(lat, 0.99)).num("min_us", percentile(lat, 0))
      .num("max_us", percentile(lat, 1))
      .num("post_call_median_us", percentile(post_us, 0.5))
      .num("task_on_poster_cpu_frac", lat.empty() ? std::nan("") : double(same_cpu) / double(lat.size()))
      .raw(b.extra())
      .print();
}

template <class B>
int bench_main(int argc, char** argv) {
  if (argc < 2) usage(argv[0]);
  std::string cmd = argv[1];
  auto arg = [&](int i) -> const char* {
    if (i >= argc) usage(argv[0]);
    return argv[i];
  };
  if (cmd == "fib" || cmd == "fibonce") {
    run_fib<B>(atoi(arg(2)), unsigned(atoi(arg(3))), cmd == "fibonce");
  } else if (cmd == "seqfib") {
    volatile long r = fib_seq(atoi(arg(2)));
    (void)r;
  } else if (cmd == "reduce") {
    run_reduce<B>(strtoull(arg(2), nullptr, 0), strtoull(arg(3), nullptr, 0), unsigned(atoi(arg(4))));
  } else if (cmd == "utsonce") {
    UtsParams p;
    p.b0 = unsigned(atoi(arg(2)));
    B b(unsigned(atoi(arg(3))));
    volatile std::uint64_t r = b.uts(p);  // unchecked: a check would add its own instructions
    (void)r;
  } else if (cmd == "utsinfo") {
    UtsParams p;
    p.b0 = unsigned(atoi(arg(2)));
    Json("utsinfo", B::kName).num("b0", p.b0).u64("nodes", uts_seq(p)).u64("spawns", uts_spawns(p)).print();
  } else if (cmd == "uts") {
    run_uts<B>(unsigned(atoi(arg(2))));
  } else if (cmd == "idle") {
    run_idle<B>(unsigned(atoi(arg(2))), atof(arg(3)));
  } else if (cmd == "trickle" || cmd == "wake") {
    if constexpr (B::kExternal) {
      if (cmd == "trickle")
        run_trickle<B>(unsigned(atoi(arg(2))), atof(arg(3)), atof(arg(4)));
      else
        run_wake<B>(unsigned(atoi(arg(2))), atoi(arg(3)), std::int64_t(atof(arg(4)) * 1000));
    } else {
      Json(cmd.c_str(), B::kName).str("na", "no submission from outside the pool").print();
    }
  } else {
    usage(argv[0]);
  }
  return 0;
}

}  // namespace bench

// bench_parkway.cpp -- parkway through its public API only: TaskGroup
// spawn/wait inside Runtime::run, parallel_for, Runtime::submit from the
// outside thread (the Future is dropped), Runtime::stats for counters.
#include <parkway/parkway.hpp>

#include "common.hpp"

namespace {

long fib_pw(int n) {
  if (n < 2) return n;
  long a, b;
  parkway::TaskGroup g;
  g.spawn([&] { a = fib_pw(n - 1); });
  b = fib_pw(n - 2);
  g.wait();
  return a + b;
}

std::uint64_t uts_pw(std::uint64_t s, const bench::UtsParams& p) {
  unsigned k = bench::uts_nchildren(s, p);
  if (k == 0) return 1;
  std::uint64_t counts[64];
  parkway::TaskGroup g;
  for (unsigned i = 0; i + 1 < k; ++i) g.spawn([&counts, &p, s, i] { counts[i] = uts_pw(bench::uts_child(s, i), p); });
  counts[k - 1] = uts_pw(bench::uts_child(s, k - 1), p);
  g.wait();
  std::uint64_t n = 1;
  for (unsigned i = 0; i < k; ++i) n += counts[i];
  return n;
}

struct Parkway {
  static constexpr const char* kName = "parkway";
  static constexpr bool kExternal = true;
  parkway::Runtime rt;
  parkway::Stats base;
  explicit Parkway(unsigned w) : rt(options(w)) {}
  // PARKWAY_BENCH_SEARCH_ROUNDS overrides Options::search_rounds (for
  // measuring the spin-before-park trade-off; run_bench.py never sets it,
  // but records it in the JSON's conditions.parkway_env when it is set).
  static parkway::Options options(unsigned w) {
    parkway::Options o{.workers = w};
    if (const char* e = getenv("PARKWAY_BENCH_SEARCH_ROUNDS")) o.search_rounds = unsigned(atoi(e));
    return o;
  }
  static unsigned min_threads(unsigned w) { return w; }

  long fib(int n) {
    base = rt.stats();
    return rt.run([n] { return fib_pw(n); });
  }
  std::uint64_t reduce(std::uint64_t nchunks, std::uint64_t chunk) {
    base = rt.stats();
    std::vector<std::uint64_t> part(nchunks);
    parkway::parallel_for(rt, 0, nchunks, 1, [&](std::size_t c) { part[c] = bench::reduce_chunk(c, chunk); });
    std::uint64_t s = 0;
    for (auto v : part) s += v;
    return s;
  }
  std::uint64_t uts(const bench::UtsParams& p) {
    base = rt.stats();
    std::uint64_t root = bench::mix64(p.seed);
    std::vector<std::uint64_t> counts(p.b0);
    rt.run([&] {
      parkway::TaskGroup g;
      for (unsigned i = 0; i < p.b0; ++i) g.spawn([&, i] { counts[i] = uts_pw(bench::uts_child(root, i), p); });
      g.wait();
    });
    std::uint64_t n = 1;
    for (auto c : counts) n += c;
    return n;
  }
  template <class F>
  void post(F f) {
    (void)rt.submit(std::move(f));
  }
  // Counters since the last fib/reduce/uts call began (for idle, trickle
  // and wake: since the warm-up began).
  std::string extra() {
    parkway::WorkerStats t = rt.stats().total;
    const parkway::WorkerStats& b = base.total;
    char buf[320];
    snprintf(buf, sizeof buf,
             "\"stats\":{\"spawned\":%llu,\"executed\":%llu,\"steals\":%llu,\"failed_steals\":%llu,"
             "\"injected\":%llu,\"parks\":%llu,\"wakeups\":%llu,\"steal_fences\":%llu,\"park_fences\":%llu}",
             (unsigned long long)(t.spawned - b.spawned), (unsigned long long)(t.executed - b.executed),
             (unsigned long long)(t.steals - b.steals), (unsigned long long)(t.failed_steals - b.failed_steals),
             (unsigned long long)(t.injected - b.injected), (unsigned long long)(t.parks - b.parks),
             (unsigned long long)(t.wakeups - b.wakeups), (unsigned long long)(t.steal_fences - b.steal_fences),
             (unsigned long long)(t.park_fences - b.park_fences));
    return buf;
  }
};

}  // namespace

int main(int argc, char** argv) { return bench::bench_main<Parkway>(argc, argv); }

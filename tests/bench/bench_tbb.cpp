// bench_tbb.cpp -- oneTBB (2021.8, Debian) as a peer: tbb::task_group inside
// a task_arena of `workers` slots (the calling thread takes one slot, as a
// parkway::Runtime's caller does not; the parallelism is the same).
// Outside submission (trickle, wake) uses task_arena::enqueue into a second
// arena with no slot reserved for the main thread, and a global_control that
// lets the market run `workers` worker threads (the default is CPUs - 1).
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include "common.hpp"

namespace {

long fib_tbb(int n) {
  if (n < 2) return n;
  long a, b;
  tbb::task_group g;
  g.run([&] { a = fib_tbb(n - 1); });
  b = fib_tbb(n - 2);
  g.wait();
  return a + b;
}

std::uint64_t uts_tbb(std::uint64_t s, const bench::UtsParams& p) {
  unsigned k = bench::uts_nchildren(s, p);
  if (k == 0) return 1;
  std::uint64_t counts[64];
  tbb::task_group g;
  for (unsigned i = 0; i + 1 < k; ++i) g.run([&counts, &p, s, i] { counts[i] = uts_tbb(bench::uts_child(s, i), p); });
  counts[k - 1] = uts_tbb(bench::uts_child(s, k - 1), p);
  g.wait();
  std::uint64_t n = 1;
  for (unsigned i = 0; i < k; ++i) n += counts[i];
  return n;
}

struct Tbb {
  static constexpr const char* kName = "tbb";
  static constexpr bool kExternal = true;
  tbb::global_control gc;
  tbb::task_arena arena;
  tbb::task_arena ext;
  explicit Tbb(unsigned w)
      : gc(tbb::global_control::max_allowed_parallelism, w + 1), arena(int(w)), ext(int(w), 0) {}
  static unsigned min_threads(unsigned w) { return w; }

  long fib(int n) {
    long r;
    arena.execute([&] { r = fib_tbb(n); });
    return r;
  }
  std::uint64_t reduce(std::uint64_t nchunks, std::uint64_t chunk) {
    std::vector<std::uint64_t> part(nchunks);
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<std::uint64_t>(0, nchunks, 1),
                        [&](const tbb::blocked_range<std::uint64_t>& r) {
                          for (std::uint64_t c = r.begin(); c != r.end(); ++c) part[c] = bench::reduce_chunk(c, chunk);
                        },
                        tbb::simple_partitioner());
    });
    std::uint64_t s = 0;
    for (auto v : part) s += v;
    return s;
  }
  std::uint64_t uts(const bench::UtsParams& p) {
    std::uint64_t root = bench::mix64(p.seed);
    std::vector<std::uint64_t> counts(p.b0);
    arena.execute([&] {
      tbb::task_group g;
      for (unsigned i = 0; i < p.b0; ++i) g.run([&, i] { counts[i] = uts_tbb(bench::uts_child(root, i), p); });
      g.wait();
    });
    std::uint64_t n = 1;
    for (auto c : counts) n += c;
    return n;
  }
  template <class F>
  void post(F f) {
    ext.enqueue(std::move(f));
  }
  std::string extra() { return ""; }
};

}  // namespace

int main(int argc, char** argv) { return bench::bench_main<Tbb>(argc, argv); }

// bench_omp.cpp -- OpenMP tasks (libgomp, g++ -fopenmp) as a peer:
// `#pragma omp task` + `taskwait` inside `parallel num_threads(W)` +
// `single`. OpenMP has no way for a thread outside the team to hand it
// work, so trickle and wake report N/A. Environment as Debian ships it
// (OMP_WAIT_POLICY and GOMP_SPINCOUNT unset) unless the caller sets them.
#include <omp.h>

#include "common.hpp"

namespace {

long fib_omp(int n) {
  if (n < 2) return n;
  long a, b;
#pragma omp task shared(a) firstprivate(n)
  a = fib_omp(n - 1);
  b = fib_omp(n - 2);
#pragma omp taskwait
  return a + b;
}

std::uint64_t uts_omp(std::uint64_t s, const bench::UtsParams& p) {
  unsigned k = bench::uts_nchildren(s, p);
  if (k == 0) return 1;
  std::uint64_t counts[64];
  for (unsigned i = 0; i + 1 < k; ++i) {
#pragma omp task shared(counts, p) firstprivate(s, i)
    counts[i] = uts_omp(bench::uts_child(s, i), p);
  }
  counts[k - 1] = uts_omp(bench::uts_child(s, k - 1), p);
#pragma omp taskwait
  std::uint64_t n = 1;
  for (unsigned i = 0; i < k; ++i) n += counts[i];
  return n;
}

struct Omp {
  static constexpr const char* kName = "omp";
  static constexpr bool kExternal = false;
  int w;
  explicit Omp(unsigned workers) : w(int(workers)) {}
  static unsigned min_threads(unsigned w) { return w - 1; }

  long fib(int n) {
    long r = 0;
#pragma omp parallel num_threads(w)
#pragma omp single
    r = fib_omp(n);
    return r;
  }
  std::uint64_t reduce(std::uint64_t nchunks, std::uint64_t chunk) {
    std::vector<std::uint64_t> part(nchunks);
#pragma omp parallel for num_threads(w) schedule(dynamic, 1)
    for (std::uint64_t c = 0; c < nchunks; ++c) part[c] = bench::reduce_chunk(c, chunk);
    std::uint64_t s = 0;
    for (auto v : part) s += v;
    return s;
  }
  std::uint64_t uts(const bench::UtsParams& p) {
    std::uint64_t root = bench::mix64(p.seed);
    std::vector<std::uint64_t> counts(p.b0);
#pragma omp parallel num_threads(w)
#pragma omp single
    {
      for (unsigned i = 0; i < p.b0; ++i) {
#pragma omp task shared(counts, p) firstprivate(i)
        counts[i] = uts_omp(bench::uts_child(root, i), p);
      }
#pragma omp taskwait
    }
    std::uint64_t n = 1;
    for (auto c : counts) n += c;
    return n;
  }
  template <class F>
  void post(F) {}
  std::string extra() { return ""; }
};

}  // namespace

int main(int argc, char** argv) { return bench::bench_main<Omp>(argc, argv); }

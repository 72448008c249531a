// trace_sketch_check.cpp -- QuantileSketch (tools/trace/trace_sketch.hpp)
// against the sorted list: for durations spread over nine decades and for
// a narrow cluster, each quantile the report prints within 2^-kSubBits of
// the exact value at the same rank, the maximum and values under 512 exact.
// Prints one line per case, "ok: ..." or "FAIL: ...", and exits 1 on a FAIL.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "trace_sketch.hpp"

using parkway::tracetool::QuantileSketch;

namespace {

int failures = 0;

void check_case(const char* what, const std::vector<std::uint64_t>& values) {
  QuantileSketch s;
  for (std::uint64_t v : values) s.add(v);
  std::vector<std::uint64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  const double bound = 1.0 / double(1u << QuantileSketch::kSubBits);
  double worst = 0;
  bool ok = s.count() == values.size() && s.max() == sorted.back();
  for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    const std::uint64_t exact = sorted[std::size_t(q * double(sorted.size() - 1) + 0.5)];
    const std::uint64_t got = s.quantile(q);
    const double err = exact ? std::fabs(double(got) - double(exact)) / double(exact) : double(got);
    worst = std::max(worst, err);
    if (exact < 512 ? got != exact : err > bound) ok = false;
  }
  std::printf("%s: %s: %zu values, worst relative error %.5f (bound %.5f)\n", ok ? "ok" : "FAIL", what,
              values.size(), worst, bound);
  failures += !ok;
}

}  // namespace

int main() {
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> v;
  std::uniform_real_distribution<double> decades(0.0, 9.0);
  for (int i = 0; i < 1000000; ++i) v.push_back(std::uint64_t(std::pow(10.0, decades(rng))));
  check_case("log-uniform 1 ns .. 1 s", v);
  v.clear();
  std::normal_distribution<double> around(1.5e6, 2e3);
  for (int i = 0; i < 200000; ++i) v.push_back(std::uint64_t(std::max(0.0, around(rng))));
  check_case("1.5 ms +- 2 us", v);
  v.clear();
  for (int i = 0; i < 100000; ++i) v.push_back(rng() % 600);
  check_case("0 .. 600 ns", v);
  v.assign({7, 3, 120000});
  check_case("three values", v);
  return failures ? 1 : 0;
}

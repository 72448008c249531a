// trace_sketch.hpp -- quantiles of durations in bounded memory: a
// log-linear histogram (HdrHistogram's layout).
//
// A value below 2^kSubBits is its own bucket (exact). Above, each power of
// two [2^e, 2^(e+1)) is cut into 2^(kSubBits-1) equal buckets; a quantile
// is the middle of its bucket, clamped to the smallest and largest value
// seen, so it is within 2^-kSubBits (0.2%) of the value the sorted list
// would give at the same rank (docs/design/tracing.md, "Bounded memory").
// Buckets are kept only where values fell: a few hundred for one kind of
// duration, at most 64 * 2^(kSubBits-1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace parkway::tracetool {

class QuantileSketch {
 public:
  static constexpr int kSubBits = 9;

  void add(std::uint64_t v) {
    ++buckets_[bucket_of(v)];
    ++n_;
    lo_ = std::min(lo_, v);
    hi_ = std::max(hi_, v);
  }
  std::uint64_t count() const { return n_; }
  std::uint64_t max() const { return n_ ? hi_ : 0; }
  bool empty() const { return n_ == 0; }

  // The value of rank round(q * (n - 1)) (0-based, nearest rank), within
  // the bound above.
  std::uint64_t quantile(double q) const {
    if (!n_) return 0;
    const auto k = std::uint64_t(q * double(n_ - 1) + 0.5);
    std::vector<std::pair<std::uint32_t, std::uint64_t>> sorted(buckets_.begin(), buckets_.end());
    std::sort(sorted.begin(), sorted.end());
    std::uint64_t seen = 0;
    for (const auto& [b, c] : sorted) {
      seen += c;
      if (seen > k) return std::clamp(middle_of(b), lo_, hi_);
    }
    return hi_;
  }

 private:
  static constexpr std::uint64_t kExact = std::uint64_t(1) << kSubBits;

  static std::uint32_t bucket_of(std::uint64_t v) {
    if (v < kExact) return std::uint32_t(v);
    const int e = 63 - __builtin_clzll(v);  // v in [2^e, 2^(e+1)), e >= kSubBits
    const int shift = e - (kSubBits - 1);   // 2^(kSubBits-1) buckets in the octave
    return std::uint32_t(kExact + std::uint64_t(e - kSubBits) * (kExact / 2) + ((v >> shift) - kExact / 2));
  }
  static std::uint64_t middle_of(std::uint32_t b) {
    if (b < kExact) return b;
    const std::uint64_t i = b - kExact;
    const int e = int(i / (kExact / 2)) + kSubBits;
    const int shift = e - (kSubBits - 1);
    const std::uint64_t lo = ((i % (kExact / 2)) + kExact / 2) << shift;
    return lo + (std::uint64_t(1) << shift) / 2;
  }

  std::unordered_map<std::uint32_t, std::uint64_t> buckets_;
  std::uint64_t n_ = 0, lo_ = UINT64_MAX, hi_ = 0;
};

}  // namespace parkway::tracetool

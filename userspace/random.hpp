// random.hpp -- victim selection: a random start and a coprime stride, so
// one pass visits every other worker exactly once in a random order.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace parkway::detail {

class VictimOrder {
 public:
  VictimOrder(unsigned n, std::uint64_t seed) : n_(n), x_(seed | 1) {
    for (unsigned k = 1; k <= n; ++k)
      if (std::gcd(k, n) == 1) strides_.push_back(k);
  }
  // Start a pass: returns the first index; next() gives the rest.
  unsigned begin() noexcept {
    std::uint64_t r = step();
    cur_ = unsigned(r % n_);
    stride_ = strides_[(r >> 32) % strides_.size()];
    return cur_;
  }
  unsigned next() noexcept {
    cur_ += stride_;
    if (cur_ >= n_) cur_ -= n_;
    return cur_;
  }

 private:
  std::uint64_t step() noexcept {  // xorshift64*
    x_ ^= x_ >> 12;
    x_ ^= x_ << 25;
    x_ ^= x_ >> 27;
    return x_ * 0x2545F4914F6CDD1Dull;
  }
  unsigned n_;
  std::uint64_t x_;
  unsigned cur_ = 0, stride_ = 1;
  std::vector<unsigned> strides_;
};

}  // namespace parkway::detail

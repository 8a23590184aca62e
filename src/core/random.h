// The seeded generator behind every random choice in crossover (initial weights, data, shuffling,
// dropout masks): std::mt19937_64, whose sequence the C++ standard fixes, with conversions written
// here because the standard library's distributions differ between implementations.
#pragma once

#include <cstdint>
#include <random>

namespace xo {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n), without modulo bias (rejection sampling).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = engine_();
    while (x >= limit);
    return x % n;
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace xo

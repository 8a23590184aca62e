// The seeded generator behind every random choice in crossover (initial weights, data, shuffling,
// dropout masks): std::mt19937_64, whose sequence the C++ standard fixes, with conversions written
// here because the standard library's distributions differ between implementations.
#pragma once

#include <cstdint>
#include <random>
#include <sstream>
#include <string>

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

  // The generator's whole state as text (the standard's 312 words), for checkpoints; restore()
  // returns false when `text` is not such a state.
  std::string state() const {
    std::ostringstream os;
    os << engine_;
    return os.str();
  }
  bool restore(const std::string& text) {
    std::istringstream is(text);
    std::mt19937_64 engine;
    if (!(is >> engine)) return false;
    engine_ = engine;
    return true;
  }

 private:
  std::mt19937_64 engine_;
};

// SplitMix64's finalizer: a bijective mix of 64 bits, for counter-based random numbers.
constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Counter-based dropout masks: whether element `index` survives step `step` of a layer seeded with
// `seed`. A pure function of its arguments (no generator state), so every backend and every batch
// sharding draws the same mask. `threshold` = round(p * 2^24): 24 random bits against it.
constexpr uint32_t dropout_threshold(double p) {
  return static_cast<uint32_t>(p * static_cast<double>(1u << 24) + 0.5);
}
// The same in two parts: the stream of a layer's step, drawn once for all its elements, and an
// element's 24 random bits from it, kept where they reach the threshold (a loop over one step's
// elements that compares them itself vectorises; one through a function returning bool does not).
constexpr uint64_t dropout_stream(uint64_t seed, uint64_t step) {
  return mix64(seed ^ mix64(step + 0x9e3779b97f4a7c15ULL));
}
constexpr uint32_t dropout_draw(uint64_t stream, uint64_t index) {
  return static_cast<uint32_t>(mix64(stream + index) >> 40);
}
constexpr bool dropout_keep(uint64_t seed, uint64_t step, uint64_t index, uint32_t threshold) {
  return dropout_draw(dropout_stream(seed, step), index) >= threshold;
}

}  // namespace xo

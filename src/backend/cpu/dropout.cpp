// Inverted dropout on the CPU: the mask comes from dropout_keep() (core/random.h), a pure function
// of (seed, step, element), and is kept as the per-element scale (0 or 1/(1-p)) for backward.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/random.h"

namespace xo::cpu {
namespace {

class CpuDropout final : public DropoutKernel {
 public:
  explicit CpuDropout(const DropoutShape& s)
      : s_(s),
        threshold_(dropout_threshold(s.p)),
        keep_scale_(static_cast<float>(1.0 / (1.0 - s.p))),
        scale_(s.elements) {}

  void forward(const float* src, float* dst, const uint64_t* step_counter) override {
    float* scale = scale_.data();
    const uint64_t step = *step_counter;
    parallel_for(s_.elements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t index = static_cast<uint64_t>(s_.element_offset + i);
        scale[i] = dropout_keep(s_.seed, step, index, threshold_) ? keep_scale_ : 0.0f;
      }
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) dst[i] = src[i] * scale[i];
    });
  }

  void backward(const float* d_dst, float* d_src) override {
    const float* scale = scale_.data();
    parallel_for(s_.elements, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) d_src[i] = d_dst[i] * scale[i];
    });
  }

 private:
  DropoutShape s_;
  uint32_t threshold_;
  float keep_scale_;
  std::vector<float> scale_;  // the last forward's mask as scales, allocated at plan time
};

}  // namespace

std::unique_ptr<DropoutKernel> make_dropout(const DropoutShape& shape) {
  return std::make_unique<CpuDropout>(shape);
}

}  // namespace xo::cpu

// Inverted dropout on the CPU: the mask comes from dropout_keep() (core/random.h), a pure function
// of (seed, step, element), and is kept as the per-element scale (0 or 1/(1-p)) for backward.
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/random.h"

namespace xo::cpu {
namespace {

// Elements [begin, end) of a forward: the mask drawn from `from` (the step's stream plus the first
// element's index) as scales, and the kept inputs scaled; vectorised (AVX-512's 64-bit multiplies).
void mask_and_scale(const float* __restrict src, float* __restrict dst, float* __restrict scale,
                    uint64_t from, uint32_t threshold, float keep, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float k = dropout_draw(from, static_cast<uint64_t>(i)) >= threshold ? keep : 0.0f;
    scale[i] = k;
    dst[i] = src[i] * k;
  }
}

class CpuDropout final : public DropoutKernel {
 public:
  explicit CpuDropout(const DropoutShape& s)
      : s_(s),
        threshold_(dropout_threshold(s.p)),
        keep_scale_(static_cast<float>(1.0 / (1.0 - s.p))),
        scale_(s.elements) {}

  void forward(const float* src, float* dst, const uint64_t* step_counter) override {
    float* scale = scale_.data();
    // The step's stream drawn once; each element's draw from it, the loop vectorised (the mask
    // dropout_keep draws, bit for bit).
    const uint64_t stream = dropout_stream(s_.seed, *step_counter);
    const auto first = static_cast<uint64_t>(s_.element_offset);
    const uint32_t threshold = threshold_;
    const float keep = keep_scale_;
    parallel_for(s_.elements, [=](int64_t begin, int64_t end) {
      mask_and_scale(src, dst, scale, stream + first, threshold, keep, begin, end);
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

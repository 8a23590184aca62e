// Element-wise activations on the CPU (ReLU, Tanh, Sigmoid, LeakyReLU), forward and backward, with
// the formulas of backend/activation_math.h (derivatives computed from the output).
#include <algorithm>

#include "backend/activation_math.h"
#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {
namespace {

template <Activation A>
void derivative_times_inplace(const float* dst, float* d_dst, int64_t n, ActivationParams p) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d_dst[i] = derivative_times<A>(dst[i], d_dst[i], p);
}

// dst[begin, end) = act(src[begin, end)); SIMD only where it rounds as the scalar loop does.
template <Activation A>
void activate_range(const float* src, float* dst, int64_t begin, int64_t end, ActivationParams p) {
  if constexpr (A == Activation::None) {
    std::copy(src + begin, src + end, dst + begin);
  } else if constexpr (exact_in_simd<A>()) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) dst[i] = activate<A>(src[i], p);
  } else {
    for (int64_t i = begin; i < end; ++i) dst[i] = activate<A>(src[i], p);
  }
}

}  // namespace

void activation_backward_inplace(Activation act, const float* dst, float* d_dst, int64_t n,
                                 float negative_slope) {
  with_activation(act, [&](auto a) {
    constexpr Activation A = decltype(a)::value;
    if constexpr (A != Activation::None) {
      derivative_times_inplace<A>(dst, d_dst, n, {negative_slope});
    }
  });
}

namespace {

class CpuActivation final : public ActivationKernel {
 public:
  CpuActivation(Activation act, int64_t elements, float negative_slope)
      : act_(act), n_(elements), params_{negative_slope} {}

  void forward(const float* src, float* dst) override {
    const Activation act = act_;
    const ActivationParams p = params_;
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      with_activation(act,
                      [&](auto a) { activate_range<decltype(a)::value>(src, dst, begin, end, p); });
    });
  }

  void backward(const float* dst, const float* d_dst, float* d_src) override {
    const Activation act = act_;
    const float slope = params_.negative_slope;
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      if (d_src != d_dst) std::copy(d_dst + begin, d_dst + end, d_src + begin);
      activation_backward_inplace(act, dst + begin, d_src + begin, end - begin, slope);
    });
  }

 private:
  Activation act_;
  int64_t n_;
  ActivationParams params_;
};

}  // namespace

std::unique_ptr<ActivationKernel> make_activation(Activation act, int64_t elements,
                                                  float negative_slope) {
  return std::make_unique<CpuActivation>(act, elements, negative_slope);
}

}  // namespace xo::cpu

// Element-wise activations on the CPU (ReLU, Tanh, Sigmoid), forward and backward. Derivatives are
// computed from the output: relu' = [y > 0], tanh' = 1 - y^2, sigmoid' = y (1 - y).
#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {

void activation_backward_inplace(Activation act, const float* dst, float* d_dst, int64_t n) {
  switch (act) {
    case Activation::ReLU:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) d_dst[i] = dst[i] > 0.0f ? d_dst[i] : 0.0f;
      return;
    case Activation::Tanh:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) d_dst[i] *= 1.0f - dst[i] * dst[i];
      return;
    case Activation::Sigmoid:
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) d_dst[i] *= dst[i] * (1.0f - dst[i]);
      return;
    case Activation::None:
      return;
  }
}

namespace {

class CpuActivation final : public ActivationKernel {
 public:
  CpuActivation(Activation act, int64_t elements) : act_(act), n_(elements) {}

  void forward(const float* src, float* dst) override {
    const Activation act = act_;
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      switch (act) {
        case Activation::ReLU:
#pragma omp simd
          for (int64_t i = begin; i < end; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
          return;
        case Activation::Tanh:
          for (int64_t i = begin; i < end; ++i) dst[i] = std::tanh(src[i]);
          return;
        case Activation::Sigmoid:
          for (int64_t i = begin; i < end; ++i) dst[i] = 1.0f / (1.0f + std::exp(-src[i]));
          return;
        case Activation::None:
          std::copy(src + begin, src + end, dst + begin);
          return;
      }
    });
  }

  void backward(const float* dst, const float* d_dst, float* d_src) override {
    const Activation act = act_;
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      if (d_src != d_dst) std::copy(d_dst + begin, d_dst + end, d_src + begin);
      activation_backward_inplace(act, dst + begin, d_src + begin, end - begin);
    });
  }

 private:
  Activation act_;
  int64_t n_;
};

}  // namespace

std::unique_ptr<ActivationKernel> make_activation(Activation act, int64_t elements) {
  return std::make_unique<CpuActivation>(act, elements);
}

}  // namespace xo::cpu

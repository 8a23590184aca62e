// Element-wise activations on the CPU (ReLU, Tanh, Sigmoid), forward and backward, with the
// formulas of backend/activation_math.h (derivatives computed from the output).
#include <algorithm>

#include "backend/activation_math.h"
#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {
namespace {

template <Activation A>
void derivative_times_inplace(const float* dst, float* d_dst, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d_dst[i] = derivative_times<A>(dst[i], d_dst[i]);
}

}  // namespace

void activation_backward_inplace(Activation act, const float* dst, float* d_dst, int64_t n) {
  switch (act) {
    case Activation::ReLU:
      return derivative_times_inplace<Activation::ReLU>(dst, d_dst, n);
    case Activation::Tanh:
      return derivative_times_inplace<Activation::Tanh>(dst, d_dst, n);
    case Activation::Sigmoid:
      return derivative_times_inplace<Activation::Sigmoid>(dst, d_dst, n);
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
          for (int64_t i = begin; i < end; ++i) dst[i] = activate<Activation::ReLU>(src[i]);
          return;
        // Scalar loops: glibc's vector tanh and exp need not round as its scalar ones do.
        case Activation::Tanh:
          for (int64_t i = begin; i < end; ++i) dst[i] = activate<Activation::Tanh>(src[i]);
          return;
        case Activation::Sigmoid:
          for (int64_t i = begin; i < end; ++i) dst[i] = activate<Activation::Sigmoid>(src[i]);
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

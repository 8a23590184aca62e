// Element-wise activations on the GPU (ReLU, Tanh, Sigmoid, LeakyReLU, None), forward and
// backward, with the formulas the CPU shares (backend/activation_math.h). One grid-stride kernel
// per call, the activation a template parameter so the loop body has no branch.
#include "backend/activation_math.h"
#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

template <Activation A>
__global__ void forward_kernel(const float* src, float* dst, int64_t n, ActivationParams p) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = activate<A>(src[i], p);
  }
}

// d_src may be d_dst (in place): each element is read before it is written, by the same thread.
template <Activation A>
__global__ void backward_kernel(const float* dst, const float* d_dst, float* d_src, int64_t n,
                                ActivationParams p) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    d_src[i] = derivative_times<A>(dst[i], d_dst[i], p);
  }
}

template <Activation A>
class GpuActivation final : public ActivationKernel {
 public:
  GpuActivation(CudaBackend& be, int64_t elements, float negative_slope)
      : be_(be), n_(elements), params_{negative_slope} {}

  void forward(const float* src, float* dst) override {
    if (n_ == 0) return;
    if constexpr (A == Activation::None) {
      if (src != dst) {
        XO_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n_) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, be_.stream()));
      }
    } else {
      XO_CUDA_LAUNCH(forward_kernel<A>, blocks_for(n_), kThreads, 0, be_.stream(), src, dst, n_,
                     params_);
    }
  }

  void backward(const float* dst, const float* d_dst, float* d_src) override {
    if (n_ == 0) return;
    if constexpr (A == Activation::None) {
      if (d_src != d_dst) {
        XO_CUDA_CHECK(cudaMemcpyAsync(d_src, d_dst, static_cast<size_t>(n_) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, be_.stream()));
      }
    } else {
      XO_CUDA_LAUNCH(backward_kernel<A>, blocks_for(n_), kThreads, 0, be_.stream(), dst, d_dst,
                     d_src, n_, params_);
    }
  }

 private:
  CudaBackend& be_;
  int64_t n_;
  ActivationParams params_;
};

}  // namespace

std::unique_ptr<ActivationKernel> make_activation(CudaBackend& be, Activation act,
                                                  int64_t elements, float negative_slope) {
  return with_activation(act, [&](auto a) -> std::unique_ptr<ActivationKernel> {
    return std::make_unique<GpuActivation<decltype(a)::value>>(be, elements, negative_slope);
  });
}

}  // namespace xo::cuda

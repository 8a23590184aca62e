// Inverted dropout on the GPU, drawing the same mask as the CPU: element i of a call survives when
// dropout_keep(seed, step, element_offset + i, threshold) (core/random.h, a pure counter-based
// function, constexpr so it runs in device code) and is then scaled by 1/(1-p). The step is read
// from device memory by the kernel itself, so a recorded step (CUDA Graph) draws a new mask on each
// launch without the host. The mask is kept as one byte per element (a quarter of the traffic of
// the CPU's float scales) for backward; the products are the same: x * (keep ? 1/(1-p) : 0).
#include "backend/cuda/cuda_backend.h"
#include "core/random.h"

namespace xo::cuda {
namespace {

__global__ void dropout_forward_kernel(const float* src, float* dst, uint8_t* mask, int64_t n,
                                       int64_t offset, uint64_t seed, uint32_t threshold,
                                       float keep_scale, const uint64_t* step_counter) {
  const uint64_t step = *step_counter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const bool keep = ::xo::dropout_keep(seed, step, static_cast<uint64_t>(offset + i), threshold);
    mask[i] = keep ? 1 : 0;
    // Multiplying by 0 rather than writing 0 keeps the CPU's result for inf/NaN inputs too.
    dst[i] = src[i] * (keep ? keep_scale : 0.0f);
  }
}

// d_src may be d_dst (in place): each element is read before it is written, by the same thread.
__global__ void dropout_backward_kernel(const float* d_dst, float* d_src, const uint8_t* mask,
                                        int64_t n, float keep_scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    d_src[i] = d_dst[i] * (mask[i] ? keep_scale : 0.0f);
  }
}

class GpuDropout final : public DropoutKernel {
 public:
  GpuDropout(CudaBackend& be, const DropoutShape& s)
      : be_(be),
        s_(s),
        threshold_(dropout_threshold(s.p)),
        keep_scale_(static_cast<float>(1.0 / (1.0 - s.p))),
        mask_(be.allocate(static_cast<size_t>(s.elements > 0 ? s.elements : 0))) {}

  void forward(const float* src, float* dst, const uint64_t* step) override {
    if (s_.elements <= 0) return;
    XO_CUDA_LAUNCH(dropout_forward_kernel, blocks_for(s_.elements), kThreads, 0, be_.stream(), src,
                   dst, mask_.as<uint8_t>(), s_.elements, s_.element_offset, s_.seed, threshold_,
                   keep_scale_, step);
  }

  void backward(const float* d_dst, float* d_src) override {
    if (s_.elements <= 0) return;
    XO_CUDA_LAUNCH(dropout_backward_kernel, blocks_for(s_.elements), kThreads, 0, be_.stream(),
                   d_dst, d_src, mask_.as<const uint8_t>(), s_.elements, keep_scale_);
  }

 private:
  CudaBackend& be_;
  DropoutShape s_;
  uint32_t threshold_;
  float keep_scale_;
  DeviceBuffer mask_;  // the last forward's mask, one byte per element
};

}  // namespace

std::unique_ptr<DropoutKernel> make_dropout(CudaBackend& be, const DropoutShape& shape) {
  return std::make_unique<GpuDropout>(be, shape);
}

}  // namespace xo::cuda

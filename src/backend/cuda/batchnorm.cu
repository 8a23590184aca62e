// Batch normalisation on the GPU (PyTorch's BatchNorm1d/2d, affine, tracking running statistics),
// forward and backward, as kernels of our own rather than cuDNN's batch-norm calls, because:
//  - they are deterministic by construction (fixed block size, fixed reduction tree: the same
//    bits every run), which cuDNN does not promise for every mode;
//  - they take any eps (cuDNN refuses eps < CUDNN_BN_MIN_EPSILON) and need no spare d_src buffer
//    where no gradient flows below;
//  - the semantics are ours to read: training normalises with the batch mean and the biased
//    variance (two passes, sum of (x - mean)^2, not E[x^2] - mean^2), moves the running statistics
//    by momentum with the unbiased variance (var * M / (M - 1), M = batch * spatial, as
//    batchnorm.cpp computes it: the factor in double), and adds 1 to batches_tracked; inference
//    normalises with the running statistics.
// Tensors are [N, C, S] (S = 1 for BatchNorm1d on [N, C], L for [N, C, L], H*W for NCHW): one
// statistic per channel over N * S values, so [N, C] and [N, C, L] are one case (what cuDNN calls
// SPATIAL with S as the spatial extent; PER_ACTIVATION would wrongly keep one statistic per
// (channel, position) of [N, C, L]). Statistics and updates are f32 whatever be.precision():
// that setting is about matmuls and convolutions.
// Training kernels run one block per channel; the saved batch mean and 1/sqrt(var + eps) are kept
// (allocated at plan time) for backward, which uses PyTorch's formula
//   d_bias = sum dy, d_weight = sum dy xhat, dx = weight invstd (dy - d_bias/M - xhat d_weight/M).
// One block per channel leaves SMs idle when C is small; a split reduction would use them, at the
// cost of a second kernel per pass.
#include <cmath>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

constexpr int kBlock = 512;  // threads per channel block; a multiple of 32
constexpr int kWarps = kBlock / 32;

// The sum of v over the block, returned to every thread. Warp sums by shuffles, then every thread
// adds the warps' sums in the same order, so all get the same bits. `shared` holds kWarps floats;
// the leading barrier lets a previous call's readers finish before it is overwritten.
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) total += shared[w];
  return total;
}

// Element j of channel c's M = N * S values: (n, s) = (j / S, j % S) at x[(n C + c) S + s].
// Indices fit 32 bits (checked at plan time), whose division is cheaper than 64-bit's.
__device__ __forceinline__ int64_t channel_index(uint32_t j, uint32_t c, uint32_t channels,
                                                 uint32_t spatial) {
  const uint32_t n = j / spatial, s = j - n * spatial;
  return (int64_t{n} * channels + c) * spatial + s;
}

// One block per channel: batch mean and biased variance, the normalised output, the saved
// statistics and the running statistics' update.
__global__ void __launch_bounds__(kBlock)
    bn_forward_train_kernel(const float* x, const float* weight, const float* bias,
                            float* running_mean, float* running_var, float* batches_tracked,
                            float* y, float* saved_mean, float* saved_invstd, uint32_t batch,
                            uint32_t channels, uint32_t spatial, float eps, float momentum,
                            double unbias) {
  __shared__ float shared[kWarps];
  const uint32_t c = blockIdx.x, m = batch * spatial;
  const float inv_m = 1.0f / static_cast<float>(m);

  float sum = 0.0f;
  for (uint32_t j = threadIdx.x; j < m; j += kBlock)
    sum += x[channel_index(j, c, channels, spatial)];
  const float mean = block_sum(sum, shared) * inv_m;

  float squares = 0.0f;
  for (uint32_t j = threadIdx.x; j < m; j += kBlock) {
    const float d = x[channel_index(j, c, channels, spatial)] - mean;
    squares += d * d;
  }
  const float var = block_sum(squares, shared) * inv_m;
  const float invstd = 1.0f / sqrtf(var + eps);

  const float scale = weight[c] * invstd, shift = bias[c];
  for (uint32_t j = threadIdx.x; j < m; j += kBlock) {
    const int64_t at = channel_index(j, c, channels, spatial);
    y[at] = (x[at] - mean) * scale + shift;
  }

  if (threadIdx.x == 0) {
    saved_mean[c] = mean;
    saved_invstd[c] = invstd;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
    running_var[c] = (1.0f - momentum) * running_var[c] +
                     momentum * static_cast<float>(static_cast<double>(var) * unbias);
    if (c == 0) *batches_tracked += 1.0f;
  }
}

// Inference: element-wise with the running statistics.
__global__ void bn_forward_inference_kernel(const float* x, const float* weight, const float* bias,
                                            const float* running_mean, const float* running_var,
                                            float* y, int64_t n, int64_t channels, int64_t spatial,
                                            float eps) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = (i / spatial) % channels;
    const float invstd = 1.0f / sqrtf(running_var[c] + eps);
    y[i] = (x[i] - running_mean[c]) * (weight[c] * invstd) + bias[c];
  }
}

// One block per channel: the parameter gradients, then (when dx is wanted) the input gradient.
// dx may be dy (in place): every dy is read by pass 1 before the barriers in block_sum, and in
// pass 2 each element is read and written by the same thread.
__global__ void __launch_bounds__(kBlock)
    bn_backward_kernel(const float* x, const float* weight, const float* dy,
                       const float* saved_mean, const float* saved_invstd, float* dx,
                       float* d_weight, float* d_bias, uint32_t batch, uint32_t channels,
                       uint32_t spatial) {
  __shared__ float shared[kWarps];
  const uint32_t c = blockIdx.x, m = batch * spatial;
  const float mean = saved_mean[c], invstd = saved_invstd[c];

  float sum_dy = 0.0f, sum_dy_xhat = 0.0f;
  for (uint32_t j = threadIdx.x; j < m; j += kBlock) {
    const int64_t at = channel_index(j, c, channels, spatial);
    const float g = dy[at];
    sum_dy += g;
    sum_dy_xhat += g * ((x[at] - mean) * invstd);
  }
  sum_dy = block_sum(sum_dy, shared);
  sum_dy_xhat = block_sum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    d_bias[c] = sum_dy;
    d_weight[c] = sum_dy_xhat;
  }
  if (dx == nullptr) return;

  const float inv_m = 1.0f / static_cast<float>(m);
  const float mean_dy = sum_dy * inv_m, mean_dy_xhat = sum_dy_xhat * inv_m;
  const float k = weight[c] * invstd;
  for (uint32_t j = threadIdx.x; j < m; j += kBlock) {
    const int64_t at = channel_index(j, c, channels, spatial);
    const float xhat = (x[at] - mean) * invstd;
    dx[at] = k * (dy[at] - mean_dy - xhat * mean_dy_xhat);
  }
}

class GpuBatchNorm final : public BatchNormKernel {
 public:
  GpuBatchNorm(CudaBackend& be, const BatchNormShape& s) : be_(be), s_(s) {
    XO_ASSERT(s.batch >= 0 && s.channels >= 0 && s.spatial >= 1);
    // 32-bit indices inside the kernels: N * S and the channel counts fit with room to spare.
    XO_ASSERT(s.batch * s.channels * s.spatial < (int64_t{1} << 31));
    if (s.training && s.channels > 0) {
      saved_mean_ = be.allocate(static_cast<size_t>(s.channels) * sizeof(float));
      saved_invstd_ = be.allocate(static_cast<size_t>(s.channels) * sizeof(float));
    }
  }

  void forward(const float* src, const float* weight, const float* bias, float* running_mean,
               float* running_var, float* batches_tracked, float* dst) override {
    const int64_t n = s_.batch * s_.channels * s_.spatial;
    if (n == 0) return;
    const auto eps = static_cast<float>(s_.eps);
    if (!s_.training) {
      XO_CUDA_LAUNCH(bn_forward_inference_kernel, blocks_for(n), kThreads, 0, be_.stream(), src,
                     weight, bias, running_mean, running_var, dst, n, s_.channels, s_.spatial, eps);
      return;
    }
    const double m = static_cast<double>(s_.batch * s_.spatial);
    const double unbias = m > 1 ? m / (m - 1) : 1.0;
    XO_CUDA_LAUNCH(bn_forward_train_kernel, static_cast<unsigned>(s_.channels), kBlock, 0,
                   be_.stream(), src, weight, bias, running_mean, running_var, batches_tracked, dst,
                   saved_mean_.as<float>(), saved_invstd_.as<float>(),
                   static_cast<uint32_t>(s_.batch), static_cast<uint32_t>(s_.channels),
                   static_cast<uint32_t>(s_.spatial), eps, static_cast<float>(s_.momentum), unbias);
  }

  void backward(const float* src, const float* weight, const float* d_dst, float* d_src,
                float* d_weight, float* d_bias) override {
    XO_ASSERT(s_.training && "batch-norm kernel built for inference");
    if (s_.batch * s_.channels * s_.spatial == 0) return;
    XO_CUDA_LAUNCH(bn_backward_kernel, static_cast<unsigned>(s_.channels), kBlock, 0, be_.stream(),
                   src, weight, d_dst, saved_mean_.as<const float>(),
                   saved_invstd_.as<const float>(), d_src, d_weight, d_bias,
                   static_cast<uint32_t>(s_.batch), static_cast<uint32_t>(s_.channels),
                   static_cast<uint32_t>(s_.spatial));
  }

 private:
  CudaBackend& be_;
  BatchNormShape s_;
  DeviceBuffer saved_mean_, saved_invstd_;  // [C]: the last training forward's batch statistics
};

}  // namespace

std::unique_ptr<BatchNormKernel> make_batch_norm(CudaBackend& be, const BatchNormShape& shape) {
  return std::make_unique<GpuBatchNorm>(be, shape);
}

}  // namespace xo::cuda

// Linear (+ fused activation) on the GPU as three cuBLASLt matmuls planned once per shape (see
// matmul.cpp for the row-major mapping):
//   forward   dst [batch, out] = act(src [batch, in] W^T + b)   (W [out, in] read transposed)
//   backward  d_pre = d_dst * act'(dst), in place in d_dst (the contract: it holds d_pre after)
//             d_W [out, in] = d_pre^T src                      (d_pre read transposed)
//             d_b [out]     = column sums of d_pre
//             d_src [batch, in] = d_pre W
//
// What is fused, and why:
// - Forward: the bias and ReLU run in the matmul's epilogue (BIAS, RELU, RELU_BIAS), so a ReLU
//   layer is one kernel. cuBLASLt has no tanh/sigmoid epilogue: those layers take the BIAS
//   epilogue and one element-wise pass over dst in place.
// - Backward: the bias gradient is the sum over the batch of d_pre, which is exactly what the
//   BGRADB epilogue of the d_W matmul reduces (its B operand is our d_pre^T; matmul.h's BGradA),
//   so it costs no pass of its own. The activation derivative needs one element-wise pass before
//   the matmuls (both read d_pre); a Linear with no activation has none. Where cuBLASLt offers no
//   BGRAD algorithm (some versions, layouts or precisions, or unaligned pointers), that pass also
//   sums the columns (deterministically, as the CPU does) and d_W is a plain matmul.
// - Not used: DRELU_BGRAD. It applies ReLU's derivative (from a bit mask written by the forward's
//   RELU_AUX epilogue) to the *output* of a matmul: in a chain of layers, to the d_src matmul of
//   the layer above, producing this layer's d_pre and d_b in one go. Under the per-layer contract
//   the d_src matmul belongs to the layer above, which does not know this layer's activation, and
//   this layer receives d_dst already computed; there is no matmul of ours whose output is d_pre,
//   so DRELU_BGRAD would need an extra identity matmul, dearer than the element-wise pass it saves.
#include "backend/cuda/activation.cuh"
#include "backend/cuda/matmul.h"

namespace xo::cuda {
namespace {

// Column tile of the bias-gradient kernel: 32 columns (one warp, coalesced rows) by 16 row lanes.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 16;

// dst = act(dst) in place, after the matmul added the bias.
template <Activation A>
__global__ void activate_kernel(float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] = activate<A>(dst[i]);
  }
}

// d *= act'(dst) in place.
template <Activation A>
__global__ void derivative_kernel(const float* dst, float* d, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    d[i] = derivative_times<A>(dst[i], d[i]);
  }
}

// d *= act'(dst) in place and d_bias[c] = sum over rows of d[:, c]. A block owns 32 columns; its
// 16 row lanes each sum every 16th row, and the 16 partial sums are added in lane order, so the
// result does not depend on scheduling (no atomics).
template <Activation A>
__global__ void derivative_bias_kernel(const float* dst, float* d, int64_t rows, int64_t cols,
                                       float* d_bias) {
  __shared__ float partial[kRowLanes][kColumnTile + 1];  // +1: no bank conflicts on the way back
  const int64_t c = int64_t{blockIdx.x} * kColumnTile + threadIdx.x;
  float sum = 0.0f;
  if (c < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      const int64_t i = r * cols + c;
      const float v = derivative_times<A>(dst[i], d[i]);
      d[i] = v;
      sum += v;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
    d_bias[c] = total;
  }
}

MatmulEpilogue forward_epilogue(const LinearShape& s) {
  if (s.activation == Activation::ReLU) {
    return s.has_bias ? MatmulEpilogue::ReluBias : MatmulEpilogue::Relu;
  }
  return s.has_bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
}

MatmulShape forward_shape(const LinearShape& s) {
  MatmulShape m;
  m.m = s.batch;
  m.n = s.out_features;
  m.k = s.in_features;
  m.trans_b = true;  // W [out, in] is B^T
  m.epilogue = forward_epilogue(s);
  return m;
}

MatmulShape d_weights_shape(const LinearShape& s, MatmulEpilogue epilogue) {
  MatmulShape m;
  m.m = s.out_features;
  m.n = s.in_features;
  m.k = s.batch;
  m.trans_a = true;  // d_pre [batch, out] is A^T
  m.epilogue = epilogue;
  return m;
}

MatmulShape d_src_shape(const LinearShape& s) {
  MatmulShape m;
  m.m = s.batch;
  m.n = s.in_features;
  m.k = s.out_features;
  return m;
}

template <Activation A>
class GpuLinear final : public LinearKernel {
 public:
  GpuLinear(CudaBackend& be, const LinearShape& s)
      : be_(be),
        shape_(s),
        forward_(be, forward_shape(s)),
        d_weights_(be, d_weights_shape(s, MatmulEpilogue::None)) {
    XO_ASSERT(s.batch > 0 && s.in_features > 0 && s.out_features > 0);
    if (s.has_bias)
      d_weights_bias_ = Matmul::try_create(be, d_weights_shape(s, MatmulEpilogue::BGradA));
    if (s.need_d_src) d_src_ = std::make_unique<Matmul>(be, d_src_shape(s));
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    XO_ASSERT((bias != nullptr) == shape_.has_bias);
    forward_.run(src, weights, dst, bias);
    if constexpr (A == Activation::Tanh || A == Activation::Sigmoid) {
      const int64_t n = shape_.batch * shape_.out_features;
      XO_CUDA_LAUNCH(activate_kernel<A>, blocks_for(n), kThreads, 0, be_.stream(), dst, n);
    }
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    XO_ASSERT(d_bias == nullptr || shape_.has_bias);
    const bool fused_bias = d_bias != nullptr && d_weights_bias_ != nullptr &&
                            d_weights_bias_->can_run(d_dst, src, d_weights, d_bias);
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    if (d_bias != nullptr && !fused_bias) {
      const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile));
      XO_CUDA_LAUNCH(derivative_bias_kernel<A>, grid, dim3(kColumnTile, kRowLanes), 0, be_.stream(),
                     dst, d_dst, rows, cols, d_bias);
    } else if constexpr (A != Activation::None) {
      XO_CUDA_LAUNCH(derivative_kernel<A>, blocks_for(rows * cols), kThreads, 0, be_.stream(), dst,
                     d_dst, rows * cols);
    }
    if (fused_bias) {
      d_weights_bias_->run(d_dst, src, d_weights, nullptr, nullptr, d_bias);
    } else {
      d_weights_.run(d_dst, src, d_weights);
    }
    if (d_src != nullptr) d_src_->run(d_dst, weights, d_src);
  }

 private:
  CudaBackend& be_;
  LinearShape shape_;
  Matmul forward_;
  Matmul d_weights_;                        // d_W alone
  std::unique_ptr<Matmul> d_weights_bias_;  // d_W with d_b fused (null: cuBLASLt has none)
  std::unique_ptr<Matmul> d_src_;
};

}  // namespace

std::unique_ptr<LinearKernel> make_linear(CudaBackend& be, const LinearShape& shape) {
  switch (shape.activation) {
    case Activation::ReLU:
      return std::make_unique<GpuLinear<Activation::ReLU>>(be, shape);
    case Activation::Tanh:
      return std::make_unique<GpuLinear<Activation::Tanh>>(be, shape);
    case Activation::Sigmoid:
      return std::make_unique<GpuLinear<Activation::Sigmoid>>(be, shape);
    case Activation::None:
      return std::make_unique<GpuLinear<Activation::None>>(be, shape);
  }
  return nullptr;
}

}  // namespace xo::cuda

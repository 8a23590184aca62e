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
// - Small layers (batch * in * out <= kSmallMacs = 2^22 and each of the three at most 512: every
//   disc-L layer up to disc-8) skip cuBLASLt: its kernels for such shapes cost microseconds each
//   however little they compute, and come in pairs (split-K and a reduction, BGRAD as a kernel of
//   its own), so a disc-2 step was a long chain of them (docs/benchmarks.md, "On an NVIDIA H100:
//   crossover's CUDA backend vs PyTorch 2.11"). Here forward is one kernel (matmul, bias and
//   activation) and backward is one launch whose blocks split into two roles: d_W tiles
//   (with d_b from the same pass) and d_src tiles, both recomputing d_pre = d_dst * act'(dst) as
//   they load it. Tiles are 32 x 32 in f32 FMA, sums in a fixed order (deterministic), whatever
//   the precision: tensor cores buy nothing at this size. d_dst is then left as it came.
// - Not used: DRELU_BGRAD. It applies ReLU's derivative (from a bit mask written by the forward's
//   RELU_AUX epilogue) to the *output* of a matmul: in a chain of layers, to the d_src matmul of
//   the layer above, producing this layer's d_pre and d_b in one go. Under the per-layer contract
//   the d_src matmul belongs to the layer above, which does not know this layer's activation, and
//   this layer receives d_dst already computed; there is no matmul of ours whose output is d_pre,
//   so DRELU_BGRAD would need an extra identity matmul, dearer than the element-wise pass it saves.
// - Fused models (LinearShape::models, model/fused_network.h): the same layer of K models, src/dst
//   [K, batch, features] and model t's weights, bias and gradients model_stride floats after
//   model t - 1's. The small kernels take the model as blockIdx.z; larger layers run the three
//   products batched over the models (cuBLASLt's strided batches) with no epilogue (cuBLASLt's
//   bias vector has no batch stride in every version) and the bias, activation and bias gradient
//   in element-wise passes that cover every model in one launch. A model of a fused run takes the
//   model path even alone (model_stride > 0), as on the CPU.
#include <string>

#include "backend/activation_math.h"
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

// dst = act(dst + bias) in place over [models, rows, cols], model t's bias (null: none) at
// t * bias_stride: the epilogue of the fused models' batched forward product.
template <Activation A>
__global__ void bias_activate_kernel(float* dst, const float* bias, int64_t rows, int64_t cols,
                                     int64_t bias_stride, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float b = bias != nullptr ? bias[i / (rows * cols) * bias_stride + i % cols] : 0.0f;
    dst[i] = activate<A>(dst[i] + b);
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
// result does not depend on scheduling (no atomics). Fused models: model blockIdx.y's rows follow
// the last model's, its d_bias `bias_stride` floats after the last's.
template <Activation A>
__global__ void derivative_bias_kernel(const float* dst, float* d, int64_t rows, int64_t cols,
                                       float* d_bias, int64_t bias_stride) {
  __shared__ float partial[kRowLanes][kColumnTile + 1];  // +1: no bank conflicts on the way back
  dst += blockIdx.y * rows * cols;
  d += blockIdx.y * rows * cols;
  d_bias += blockIdx.y * bias_stride;
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

// ---- Small layers: one kernel forward, one backward ----

// Layers with at most this many multiply-adds per matmul take the small path (disc-8's widest
// layer: 100 x 128 x 256 = 3.3M).
constexpr int64_t kSmallMacs = int64_t{1} << 22;
constexpr int64_t kSmallSum = 512;  // the longest sum one block does (16 chunks)
constexpr int kTile = 32;           // output tile 32 x 32; k in chunks of 32
constexpr int kTileThreads = 256;   // 16 x 16 threads, each 2 x 2 outputs
using TileRow = float[kTile + 1];   // shared rows padded: no bank conflicts either way

// Stages one 32 x 32 operand chunk into shared memory as tile[i][j] = load(i, j), walking memory
// along whichever index is contiguous there (`fast_i`: i), so that a warp reads consecutive floats.
// All of a thread's loads are issued before its first store, so they are in flight together (a
// loop of load-store pairs waits for each load in turn: 4x the latency per chunk).
template <bool kFastI, typename Load>
__device__ __forceinline__ void stage(TileRow* tile, Load load) {
  constexpr int kPerThread = kTile * kTile / kTileThreads;
  float v[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int e = threadIdx.x + u * kTileThreads, x = e % kTile, y = e / kTile;
    v[u] = kFastI ? load(x, y) : load(y, x);
  }
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int e = threadIdx.x + u * kTileThreads, x = e % kTile, y = e / kTile;
    if constexpr (kFastI) {
      tile[x][y] = v[u];
    } else {
      tile[y][x] = v[u];
    }
  }
}

// acc[i][j] += sum over this chunk of a[row][k] * b[k][col] for the thread's rows ty + 16 i and
// columns tx + 16 j (strided so that neither read conflicts on banks).
__device__ __forceinline__ void multiply_chunk(const TileRow* a, const TileRow* b,
                                               float (&acc)[2][2]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 8
  for (int k = 0; k < kTile; ++k) {
    const float a0 = a[ty][k], a1 = a[ty + 16][k];
    const float b0 = b[k][tx], b1 = b[k][tx + 16];
    acc[0][0] = fmaf(a0, b0, acc[0][0]);
    acc[0][1] = fmaf(a0, b1, acc[0][1]);
    acc[1][0] = fmaf(a1, b0, acc[1][0]);
    acc[1][1] = fmaf(a1, b1, acc[1][1]);
  }
}

// dst [batch, out] = act(src [batch, in] W^T + bias): a block per 32 x 32 tile of dst. Fused
// models: model blockIdx.z's src and dst follow the last model's, its W and bias `stride` floats
// after the last's.
template <Activation A>
__global__ void __launch_bounds__(kTileThreads)
    small_forward_kernel(const float* src, const float* w, const float* bias, float* dst,
                         int64_t batch, int64_t in, int64_t out, int64_t stride) {
  __shared__ TileRow a[kTile], b[kTile];
  src += blockIdx.z * batch * in;
  w += blockIdx.z * stride;
  if (bias != nullptr) bias += blockIdx.z * stride;
  dst += blockIdx.z * batch * out;
  const int64_t r0 = int64_t{blockIdx.y} * kTile, c0 = int64_t{blockIdx.x} * kTile;
  float acc[2][2] = {};
  for (int64_t k0 = 0; k0 < in; k0 += kTile) {
    // a[r][k] = src[r0 + r, k0 + k] (contiguous along k); b[k][c] = W[c0 + c, k0 + k] (along k).
    stage<false>(a, [&](int r, int k) {
      return r0 + r < batch && k0 + k < in ? src[(r0 + r) * in + k0 + k] : 0.0f;
    });
    stage<true>(b, [&](int k, int c) {
      return c0 + c < out && k0 + k < in ? w[(c0 + c) * in + k0 + k] : 0.0f;
    });
    __syncthreads();
    multiply_chunk(a, b, acc);
    __syncthreads();
  }
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const int64_t r = r0 + ty + 16 * i, c = c0 + tx + 16 * j;
      if (r < batch && c < out) {
        dst[r * out + c] = activate<A>(bias != nullptr ? acc[i][j] + bias[c] : acc[i][j]);
      }
    }
  }
}

// Backward in one launch. Blocks [0, w_tiles) each own a 32 x 32 tile of d_W [out, in]
// (sum over the batch of d_pre^T src; the blocks of the first column of tiles also sum d_b over
// the same rows of d_pre); the others own a tile of d_src [batch, in] (d_pre W, summed over out).
// d_pre = d_dst * act'(dst) is recomputed wherever it is loaded, so no block waits for another.
// Fused models: model blockIdx.z's at the offsets small_forward_kernel's are.
template <Activation A>
__global__ void __launch_bounds__(kTileThreads)
    small_backward_kernel(const float* src, const float* w, const float* dst, const float* d_dst,
                          float* d_w, float* d_bias, float* d_src, int64_t batch, int64_t in,
                          int64_t out, int64_t stride) {
  __shared__ TileRow a[kTile], b[kTile];
  src += blockIdx.z * batch * in;
  w += blockIdx.z * stride;
  dst += blockIdx.z * batch * out;
  d_dst += blockIdx.z * batch * out;
  d_w += blockIdx.z * stride;
  if (d_bias != nullptr) d_bias += blockIdx.z * stride;
  if (d_src != nullptr) d_src += blockIdx.z * batch * in;
  const int64_t in_tiles = (in + kTile - 1) / kTile;
  const int64_t w_tiles = (out + kTile - 1) / kTile * in_tiles;
  const auto d_pre = [&](int64_t row, int64_t col) {  // row < batch, col < out
    const int64_t e = row * out + col;
    return derivative_times<A>(dst[e], d_dst[e]);
  };
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[2][2] = {};
  if (blockIdx.x < w_tiles) {
    // d_W tile: rows o0.., columns i0..; a[o][k] = d_pre[k0 + k, o0 + o] (contiguous along o),
    // b[k][i] = src[k0 + k, i0 + i] (contiguous along i).
    const int64_t o0 = blockIdx.x / in_tiles * kTile, i0 = blockIdx.x % in_tiles * kTile;
    const bool sums_bias = d_bias != nullptr && i0 == 0;
    float bias_sum = 0.0f;
    for (int64_t k0 = 0; k0 < batch; k0 += kTile) {
      stage<true>(a, [&](int o, int k) {
        return o0 + o < out && k0 + k < batch ? d_pre(k0 + k, o0 + o) : 0.0f;
      });
      stage<false>(b, [&](int k, int i) {
        return i0 + i < in && k0 + k < batch ? src[(k0 + k) * in + i0 + i] : 0.0f;
      });
      __syncthreads();
      multiply_chunk(a, b, acc);
      if (sums_bias && threadIdx.x < kTile) {
        for (int k = 0; k < kTile; ++k) bias_sum += a[threadIdx.x][k];
      }
      __syncthreads();
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        const int64_t o = o0 + ty + 16 * i, c = i0 + tx + 16 * j;
        if (o < out && c < in) d_w[o * in + c] = acc[i][j];
      }
    }
    if (sums_bias && threadIdx.x < kTile && o0 + threadIdx.x < out) {
      d_bias[o0 + threadIdx.x] = bias_sum;
    }
    return;
  }
  // d_src tile: rows r0.. of the batch, columns i0..; a[r][k] = d_pre[r0 + r, k0 + k] (contiguous
  // along k), b[k][i] = W[k0 + k, i0 + i] (contiguous along i).
  const int64_t t = blockIdx.x - w_tiles;
  const int64_t r0 = t / in_tiles * kTile, i0 = t % in_tiles * kTile;
  for (int64_t k0 = 0; k0 < out; k0 += kTile) {
    stage<false>(a, [&](int r, int k) {
      return r0 + r < batch && k0 + k < out ? d_pre(r0 + r, k0 + k) : 0.0f;
    });
    stage<false>(b, [&](int k, int i) {
      return i0 + i < in && k0 + k < out ? w[(k0 + k) * in + i0 + i] : 0.0f;
    });
    __syncthreads();
    multiply_chunk(a, b, acc);
    __syncthreads();
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      const int64_t r = r0 + ty + 16 * i, c = i0 + tx + 16 * j;
      if (r < batch && c < in) d_src[r * in + c] = acc[i][j];
    }
  }
}

// Each tile sums over one whole dimension (in forward, the batch for d_W, out for d_src) in a
// single block, so every dimension is bounded too: disc-12's last layer (4096 -> 2) has few
// multiply-adds but a 4096-long sum over 4 blocks, far slower than cuBLASLt's split-K.
bool is_small(const LinearShape& s) {
  return s.batch * s.in_features * s.out_features <= kSmallMacs && s.batch <= kSmallSum &&
         s.in_features <= kSmallSum && s.out_features <= kSmallSum;
}

unsigned tiles(int64_t n) { return static_cast<unsigned>((n + kTile - 1) / kTile); }

// A Linear of fused models (LinearShape::models), or a model of a fused run alone.
bool fused_models(const LinearShape& s) { return s.models > 1 || s.model_stride > 0; }

MatmulEpilogue forward_epilogue(const LinearShape& s) {
  if (fused_models(s)) return MatmulEpilogue::None;  // bias and activation: bias_activate_kernel
  if (s.activation == Activation::ReLU) {
    return s.has_bias ? MatmulEpilogue::ReluBias : MatmulEpilogue::Relu;
  }
  return s.has_bias ? MatmulEpilogue::Bias : MatmulEpilogue::None;
}

// `m` batched over the models of `s`: model t's A, B and D at t times a, b and d floats.
MatmulShape over_models(MatmulShape m, const LinearShape& s, int64_t a, int64_t b, int64_t d) {
  if (s.models > 1) {
    m.batch = s.models;
    m.stride_a = a;
    m.stride_b = b;
    m.stride_d = d;
  }
  return m;
}

MatmulShape forward_shape(const LinearShape& s) {
  MatmulShape m;
  m.m = s.batch;
  m.n = s.out_features;
  m.k = s.in_features;
  m.trans_b = true;  // W [out, in] is B^T
  m.epilogue = forward_epilogue(s);
  return over_models(m, s, s.batch * s.in_features, s.model_stride, s.batch * s.out_features);
}

MatmulShape d_weights_shape(const LinearShape& s, MatmulEpilogue epilogue) {
  MatmulShape m;
  m.m = s.out_features;
  m.n = s.in_features;
  m.k = s.batch;
  m.trans_a = true;  // d_pre [batch, out] is A^T
  m.epilogue = epilogue;
  return over_models(m, s, s.batch * s.out_features, s.batch * s.in_features, s.model_stride);
}

MatmulShape d_src_shape(const LinearShape& s) {
  MatmulShape m;
  m.m = s.batch;
  m.n = s.in_features;
  m.k = s.out_features;
  return over_models(m, s, s.batch * s.out_features, s.model_stride, s.batch * s.in_features);
}

template <Activation A>
class GpuLinear final : public WeightedKernel {
 public:
  GpuLinear(CudaBackend& be, const LinearShape& s)
      : be_(be), shape_(s), small_(is_small(s)), fused_(fused_models(s)) {
    XO_ASSERT(s.batch > 0 && s.in_features > 0 && s.out_features > 0);
    XO_ASSERT(s.models >= 1 && s.models <= 65535 && (s.models == 1 || s.model_stride > 0));
    if (small_) return;
    forward_ = std::make_unique<Matmul>(be, forward_shape(s));
    d_weights_ = std::make_unique<Matmul>(be, d_weights_shape(s, MatmulEpilogue::None));
    if (s.has_bias && !fused_)
      d_weights_bias_ = Matmul::try_create(be, d_weights_shape(s, MatmulEpilogue::BGradA));
    if (s.need_d_src) d_src_ = std::make_unique<Matmul>(be, d_src_shape(s));
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    XO_ASSERT((bias != nullptr) == shape_.has_bias);
    if (small_) {
      const dim3 grid(tiles(shape_.out_features), tiles(shape_.batch),
                      static_cast<unsigned>(shape_.models));
      XO_CUDA_LAUNCH(small_forward_kernel<A>, grid, kTileThreads, 0, be_.stream(), src, weights,
                     bias, dst, shape_.batch, shape_.in_features, shape_.out_features,
                     shape_.model_stride);
      return;
    }
    if (fused_) {
      forward_->run(src, weights, dst);
      const int64_t n = shape_.models * shape_.batch * shape_.out_features;
      if (bias != nullptr || A != Activation::None) {
        XO_CUDA_LAUNCH(bias_activate_kernel<A>, blocks_for(n), kThreads, 0, be_.stream(), dst, bias,
                       shape_.batch, shape_.out_features, shape_.model_stride, n);
      }
      return;
    }
    forward_->run(src, weights, dst, bias);
    if constexpr (A == Activation::Tanh || A == Activation::Sigmoid) {
      const int64_t n = shape_.batch * shape_.out_features;
      XO_CUDA_LAUNCH(activate_kernel<A>, blocks_for(n), kThreads, 0, be_.stream(), dst, n);
    }
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    XO_ASSERT(d_bias == nullptr || shape_.has_bias);
    if (small_) {
      const unsigned in_tiles = tiles(shape_.in_features);
      const unsigned blocks = tiles(shape_.out_features) * in_tiles +
                              (d_src != nullptr ? tiles(shape_.batch) * in_tiles : 0);
      XO_CUDA_LAUNCH(small_backward_kernel<A>,
                     dim3(blocks, 1, static_cast<unsigned>(shape_.models)), kTileThreads, 0,
                     be_.stream(), src, weights, dst, d_dst, d_weights, d_bias, d_src, shape_.batch,
                     shape_.in_features, shape_.out_features, shape_.model_stride);
      return;
    }
    const bool fused_bias = d_bias != nullptr && d_weights_bias_ != nullptr &&
                            d_weights_bias_->can_run(d_dst, src, d_weights, d_bias);
    const int64_t rows = shape_.batch, cols = shape_.out_features, models = shape_.models;
    if (d_bias != nullptr && !fused_bias) {
      const dim3 grid(static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile),
                      static_cast<unsigned>(models));
      XO_CUDA_LAUNCH(derivative_bias_kernel<A>, grid, dim3(kColumnTile, kRowLanes), 0, be_.stream(),
                     dst, d_dst, rows, cols, d_bias, shape_.model_stride);
    } else if constexpr (A != Activation::None) {
      XO_CUDA_LAUNCH(derivative_kernel<A>, blocks_for(models * rows * cols), kThreads, 0,
                     be_.stream(), dst, d_dst, models * rows * cols);
    }
    if (fused_bias) {
      d_weights_bias_->run(d_dst, src, d_weights, nullptr, nullptr, d_bias);
    } else {
      d_weights_->run(d_dst, src, d_weights);
    }
    if (d_src != nullptr) d_src_->run(d_dst, weights, d_src);
  }

 private:
  CudaBackend& be_;
  LinearShape shape_;
  bool small_;  // the small path: no cuBLASLt plans
  bool fused_;  // fused models (or one of a fused run)
  std::unique_ptr<Matmul> forward_;
  std::unique_ptr<Matmul> d_weights_;       // d_W alone
  std::unique_ptr<Matmul> d_weights_bias_;  // d_W with d_b fused (null: cuBLASLt has none)
  std::unique_ptr<Matmul> d_src_;
};

}  // namespace

std::unique_ptr<WeightedKernel> make_linear(CudaBackend& be, const LinearShape& shape) {
  return with_fused_activation(shape.activation, [&](auto a) -> std::unique_ptr<WeightedKernel> {
    return std::make_unique<GpuLinear<decltype(a)::value>>(be, shape);
  });
}

}  // namespace xo::cuda

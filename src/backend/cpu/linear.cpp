// Linear (+ fused activation) on the CPU, forward and backward, as three oneDNN matmuls built once
// per shape: dst = act(src W^T + b); d_W = d_pre^T src; d_src = d_pre W. The activation derivative
// and the bias gradient are one fused pass over d_dst. Fused models: the same three matmuls batched
// over the models.
#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
// GCC 12 warns of the undefined vector its unpack intrinsics pass as the unused mask source.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

#include "backend/activation_math.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

class CpuLinear final : public WeightedKernel {
 public:
  // bf16 (bf16_weights set): the three products take bf16 copies of src, the weights and d_pre
  // and accumulate in f32: src's and d_pre's made once per step, the weights' the one their
  // optimizer keeps (else made in the forward); the forward's two kept for backward. The bias, the
  // activation, its derivative and the gradients stay f32 (PyTorch's CPU autocast recipe).
  CpuLinear(const LinearShape& s, const Bf16Weights* bf16_weights, const dnnl::engine& engine,
            const dnnl::stream& stream)
      : shape_(s), stream_(stream), bf16_(bf16_weights != nullptr), kept_(bf16_weights) {
    const memory::dim batch = s.batch, in = s.in_features, out = s.out_features;
    const auto operand = bf16_ ? bf16 : f32;
    // Weights are stored [out, in] as in PyTorch; the forward matmul reads them as W^T [in, out]
    // through a transposed ("ba") layout instead of copying.
    const memory::desc src_md({batch, in}, operand, tag::ab);
    const memory::desc w_t_md({in, out}, operand, tag::ba);
    const memory::desc bias_md({1, out}, f32, tag::ab);
    const memory::desc dst_md({batch, out}, f32, tag::ab);
    dnnl::primitive_attr fwd_attr;
    if (s.activation != Activation::None) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, eltwise_algorithm(s.activation), 0.0f, 0.0f);
      fwd_attr.set_post_ops(ops);
    }
    forward_ = BoundMatmul(src_md, w_t_md, s.has_bias ? &bias_md : nullptr, dst_md, fwd_attr,
                           engine, s.in_shard);
    // d_W [out, in] = d_pre^T [out, batch] x src [batch, in]; d_pre is read transposed in place.
    const memory::desc d_pre_t_md({out, batch}, operand, tag::ba);
    const memory::desc d_w_md({out, in}, f32, tag::ab);
    d_weights_ = BoundMatmul(d_pre_t_md, src_md, nullptr, d_w_md, {}, engine, s.in_shard);
    if (s.need_d_src) {
      // d_src [batch, in] = d_pre [batch, out] x W [out, in].
      const memory::desc d_pre_md({batch, out}, operand, tag::ab);
      const memory::desc w_md({out, in}, operand, tag::ab);
      d_src_ = BoundMatmul(d_pre_md, w_md, nullptr, as_type(src_md, f32), {}, engine, s.in_shard);
    }
    if (bf16_) {
      src_b_ = Bf16Copy(batch * in);
      w_b_ = Bf16Copy(out * in);
      d_pre_b_ = Bf16Copy(batch * out);
    }
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    if (bf16_)
      return forward_.run(stream_, src_b_.from(src), w_b_.weights(weights, *kept_), bias, dst);
    forward_.run(stream_, src, weights, bias, dst);
  }

  // At bf16 src and the weights are the forward's copies (the same step's).
  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    activation_and_bias_backward(dst, d_dst, d_bias);
    if (bf16_) {
      const uint16_t* d_pre = d_pre_b_.from(d_dst);
      d_weights_.run(stream_, d_pre, src_b_.data(), nullptr, d_weights);
      if (d_src) d_src_.run(stream_, d_pre, w_b_.last(), nullptr, d_src);
      return;
    }
    d_weights_.run(stream_, d_dst, src, nullptr, d_weights);
    if (d_src) d_src_.run(stream_, d_dst, weights, nullptr, d_src);
  }

 private:
  // d_dst *= act'(dst) and d_bias = column sums of d_dst, in one pass. Each thread owns a block of
  // columns, so the sums are added in the same order for any thread count.
  void activation_and_bias_backward(const float* dst, float* d_dst, float* d_bias) const {
    with_fused_activation(shape_.activation, [&](auto a) {
      columns_backward<decltype(a)::value>(dst, d_dst, d_bias);
    });
  }

  template <Activation A>
  void columns_backward(const float* dst, float* d_dst, float* d_bias) const {
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    auto columns = [&](int64_t c0, int64_t c1) {
      if (d_bias) std::fill(d_bias + c0, d_bias + c1, 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        float* g = d_dst + r * cols;
        const float* y = dst + r * cols;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) {
          const float v = derivative_times<A>(y[c], g[c]);
          g[c] = v;
          if (d_bias) d_bias[c] += v;
        }
      }
    };
    // Columns are the unit of work, so the bias sums keep their order for any thread count.
    parallel_for(cols, columns, rows * cols);
  }

  LinearShape shape_;
  dnnl::stream stream_;
  bool bf16_;
  const Bf16Weights* kept_;  // bf16: the weights' copies the optimizers keep
  BoundMatmul forward_, d_weights_, d_src_;
  Bf16Copy src_b_, w_b_, d_pre_b_;
};

#if defined(__AVX512F__)
// The sums of each of v[0..15]'s 16 lanes, as one vector in v's order: a tree of adds over
// interleaved halves (unpack within 128-bit lanes, then pairs of floats, then the 128-bit lanes
// themselves), 45 instructions where 16 horizontal sums take about twice as many.
inline __m512 lane_sums(const __m512 (&v)[16]) {
  __m512 u[8], w[4];
  for (int j = 0; j < 8; ++j) {  // per 128-bit lane: v[2j]'s and v[2j+1]'s pairs summed
    u[j] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * j], v[2 * j + 1]),
                         _mm512_unpackhi_ps(v[2 * j], v[2 * j + 1]));
  }
  for (int j = 0; j < 4; ++j) {  // per 128-bit lane: v[4j] ... v[4j+3]'s four summed
    const __m512d a = _mm512_castps_pd(u[2 * j]), b = _mm512_castps_pd(u[2 * j + 1]);
    w[j] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
  const __m512 y01 = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], kEven),
                                   _mm512_shuffle_f32x4(w[0], w[1], kOdd));
  const __m512 y23 = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], kEven),
                                   _mm512_shuffle_f32x4(w[2], w[3], kOdd));
  return _mm512_add_ps(_mm512_shuffle_f32x4(y01, y23, kEven), _mm512_shuffle_f32x4(y01, y23, kOdd));
}

// dst's 16 x 16 tile (rows ld floats apart) = the transpose of src's (rows ls apart), in registers:
// pairs of rows interleaved, then pairs of pairs, giving each 128-bit lane a 4 x 4 block
// transposed; then the blocks moved across lanes. 64 shuffles where the scalar copy moves 256
// floats one at a time (a quarter of a fused small Linear's forward).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // as at the include above
#endif
inline void transpose_tile(const float* src, int64_t ls, float* dst, int64_t ld) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ls);
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  // r[4g + j], lane c: column 4c + j of rows 4g ... 4g + 3.
  auto lo = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  auto hi = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  for (int g = 0; g < 4; ++g) {
    r[4 * g] = lo(t[4 * g], t[4 * g + 2]);
    r[4 * g + 1] = hi(t[4 * g], t[4 * g + 2]);
    r[4 * g + 2] = lo(t[4 * g + 1], t[4 * g + 3]);
    r[4 * g + 3] = hi(t[4 * g + 1], t[4 * g + 3]);
  }
  // Output row 4c + j: lane c of r[j], r[4 + j], r[8 + j], r[12 + j].
  constexpr int kLow = 0x44, kHigh = 0xEE, kEven = 0x88, kOdd = 0xDD;
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[j], r[4 + j], kLow);
    const __m512 v1 = _mm512_shuffle_f32x4(r[j], r[4 + j], kHigh);
    const __m512 v2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], kLow);
    const __m512 v3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], kHigh);
    _mm512_storeu_ps(dst + j * ld, _mm512_shuffle_f32x4(v0, v2, kEven));
    _mm512_storeu_ps(dst + (4 + j) * ld, _mm512_shuffle_f32x4(v0, v2, kOdd));
    _mm512_storeu_ps(dst + (8 + j) * ld, _mm512_shuffle_f32x4(v1, v3, kEven));
    _mm512_storeu_ps(dst + (12 + j) * ld, _mm512_shuffle_f32x4(v1, v3, kOdd));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// t [cols, rows] = the transpose of m [rows, cols]: 16 x 16 tiles in registers where both are
// multiples of 16 (and the CPU has AVX-512), else one float at a time.
inline void transpose(const float* m, int64_t rows, int64_t cols, float* t) {
#if defined(__AVX512F__)
  if (rows % 16 == 0 && cols % 16 == 0) {
    for (int64_t r = 0; r < rows; r += 16)
      for (int64_t c = 0; c < cols; c += 16)
        transpose_tile(m + r * cols + c, cols, t + c * rows + r, rows);
    return;
  }
#endif
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
}

// The same Linear of `models` models at once (fused models): three batched oneDNN matmuls over the
// model dimension, each model's weights model_stride floats after the last's. oneDNN 2.6 runs a
// bias of its own per batch entry only in its reference kernel, far slower than its gemm, so the
// bias and the activation are one pass after the forward matmul, as the bias gradient is before
// backward's. Small layers (widths powers of two, in x out up to kSmallFusedLinear: the disc
// models') are loops of our own instead, each row's sums held in registers: on such small
// products oneDNN's batched product spends most of its time in its per-product set-up (both
// measured: docs/benchmarks.md, "Many small trials as one model: fused trials").
constexpr int64_t kSmallFusedLinear = 64 * 64;

class CpuFusedLinear final : public WeightedKernel {
 public:
  // bf16: as CpuLinear's, for the products of the larger layers. The small layers' loops are
  // f32 at any precision: products this small run no faster in bf16 (as on a GPU, where tensor
  // cores buy nothing at this size).
  CpuFusedLinear(const LinearShape& s, const Bf16Weights* bf16_weights, const dnnl::engine& engine,
                 const dnnl::stream& stream)
      : shape_(s),
        stream_(stream),
        small_(small_shape(s)),
        bf16_(bf16_weights != nullptr && !small_),
        kept_(bf16_weights),
        transposed_(small_ ? static_cast<size_t>(s.in_features * s.out_features) : 0) {
    XO_ASSERT(s.models >= 1 && s.model_stride >= s.out_features * s.in_features + s.out_features);
    if (small_) return;
    const memory::dim k = s.models, batch = s.batch, in = s.in_features, out = s.out_features;
    const memory::dim stride = s.model_stride;
    const auto operand = bf16_ ? bf16 : f32;
    const memory::desc src_md({k, batch, in}, operand, memory::dims{batch * in, in, 1});
    const memory::desc dst_md({k, batch, out}, f32, memory::dims{batch * out, out, 1});
    // W^T [in, out] of each model, read in place from W [out, in].
    const memory::desc w_t_md({k, in, out}, operand, memory::dims{stride, 1, in});
    forward_ = BoundMatmul(src_md, w_t_md, nullptr, dst_md, {}, engine, s.in_shard);
    const memory::desc d_pre_t_md({k, out, batch}, operand, memory::dims{batch * out, 1, out});
    const memory::desc d_w_md({k, out, in}, f32, memory::dims{stride, in, 1});
    d_weights_ = BoundMatmul(d_pre_t_md, src_md, nullptr, d_w_md, {}, engine, s.in_shard);
    if (s.need_d_src) {
      d_src_ = BoundMatmul(as_type(dst_md, operand), as_type(d_w_md, operand), nullptr,
                           as_type(src_md, f32), {}, engine, s.in_shard);
    }
    if (bf16_) {
      // The weights' copy spans every model's (their biases between them come along).
      src_b_ = Bf16Copy(k * batch * in);
      w_b_ = Bf16Copy((k - 1) * stride + out * in);
      d_pre_b_ = Bf16Copy(k * batch * out);
    }
  }

  // Whether the layer takes the register-blocked loops (small_forward, small_backward).
  static bool small_shape(const LinearShape& s) {
    return s.in_features * s.out_features <= kSmallFusedLinear && small_width(s.in_features) &&
           small_width(s.out_features);
  }
  static bool small_width(int64_t n) {
    return by_width(n, [](auto) { return true; });
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    XO_ASSERT((bias != nullptr) == shape_.has_bias);
    if (small_)
      return with_activation(
          [&](auto a) { small_forward<decltype(a)::value>(src, weights, bias, dst); });
    if (bf16_) {
      forward_.run(stream_, src_b_.from(src),
                   w_b_.weights(weights, *kept_, shape_.models, shape_.model_stride), nullptr, dst);
    } else {
      forward_.run(stream_, src, weights, nullptr, dst);
    }
    with_activation([&](auto a) { bias_and_activation<decltype(a)::value>(bias, dst); });
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    if (small_)
      return with_activation([&](auto a) {
        small_backward<decltype(a)::value>(src, weights, dst, d_dst, d_weights, d_bias, d_src);
      });
    with_activation(
        [&](auto a) { activation_and_bias_backward<decltype(a)::value>(dst, d_dst, d_bias); });
    if (bf16_) {  // src and the weights: the forward's copies
      const uint16_t* d_pre = d_pre_b_.from(d_dst);
      d_weights_.run(stream_, d_pre, src_b_.data(), nullptr, d_weights);
      if (d_src) d_src_.run(stream_, d_pre, w_b_.last(), nullptr, d_src);
      return;
    }
    d_weights_.run(stream_, d_dst, src, nullptr, d_weights);
    if (d_src) d_src_.run(stream_, d_dst, weights, nullptr, d_src);
  }

 private:
  // The loops below keep kRows rows' sums in registers at once: independent chains of
  // multiply-adds, where one row's would wait on each add's latency. The sums are declared 64-byte
  // aligned: the compiler aligns them so for its vector loads anyway, and AddressSanitizer's fake
  // stack (detect_stack_use_after_return) gives a local only the alignment it declares.

  // Rows at once for sums W wide: as many as keep the sums in about 16 of the 32 vector registers
  // (at least 8 chains of multiply-adds in flight, two FMA units of 4 cycles' latency).
  template <int W>
  static constexpr int kRows = W >= 64   ? 4
                               : W >= 32 ? 8
                                         : 16;
  // body(R, r) for blocks [r, r + R) of [0, n): blocks of R, then of 4, then of 1 (R a constant).
  template <int R, typename Body>
  static void in_blocks(int64_t n, Body&& body) {
    int64_t r = 0;
    for (; r + R <= n; r += R) body(std::integral_constant<int, R>{}, r);
    if constexpr (R > 4)
      for (; r + 4 <= n; r += 4) body(std::integral_constant<int, 4>{}, r);
    for (; r < n; ++r) body(std::integral_constant<int, 1>{}, r);
  }

  // dst = src W^T per model: rows' OUT sums over the inputs (W^T [in, out] made once per model,
  // so each input adds one row of it).
  // The sums leave the registers as act(sum + bias), the arithmetic of bias_and_activation's
  // pass (which the larger layers take), without the pass.
  template <int OUT, int R, Activation A>
  static void forward_rows(const float* x, int64_t in, const float* w_t, const float* b, float* y) {
    alignas(64) float acc[R][OUT] = {};
    for (int64_t i = 0; i < in; ++i) {
      const float* row = w_t + i * OUT;
      for (int r = 0; r < R; ++r) {
        const float xi = x[r * in + i];
#pragma omp simd
        for (int o = 0; o < OUT; ++o) acc[r][o] += xi * row[o];
      }
    }
    alignas(64) float bias[OUT];
    for (int o = 0; o < OUT; ++o) bias[o] = b ? b[o] : 0.0f;
    for (int r = 0; r < R; ++r) {
#pragma omp simd
      for (int o = 0; o < OUT; ++o) y[r * OUT + o] = activate<A>(acc[r][o] + bias[o]);
    }
  }
  template <Activation A, int OUT>
  void small_forward(const float* src, const float* weights, const float* bias, float* dst) {
    const int64_t batch = shape_.batch, in = shape_.in_features;
    float* w_t = transposed_.data();
    for (int64_t t = 0; t < shape_.models; ++t) {
      const float* w = weights + t * shape_.model_stride;
      transpose(w, OUT, in, w_t);
      const float* x = src + t * batch * in;
      const float* b = bias ? bias + t * shape_.model_stride : nullptr;
      float* y = dst + t * batch * OUT;
      in_blocks<kRows<OUT>>(batch, [&](auto rows, int64_t r) {
        forward_rows<OUT, decltype(rows)::value, A>(x + r * in, in, w_t, b, y + r * OUT);
      });
    }
  }

  // d_pre = d_dst act'(dst) for a row's outputs [0, N), and each column's sum added to bias[]:
  // folded into d_W's pass over the rows (kFolds), where a pass of its own would read and write
  // every model's d_dst once more. The arithmetic of activation_and_bias_backward's (each column's
  // sum in row order).
  template <Activation A, int N>
  static void fold_row(const float* y, float* g, float* bias) {
#pragma omp simd
    for (int o = 0; o < N; ++o) {
      const float v = derivative_times<A>(y[o], g[o]);
      g[o] = v;
      bias[o] += v;
    }
  }
  // Whether d_W's pass takes the derivative and the bias (outputs a vector wide or more, where
  // each column's sum in row order is also activation_and_bias_backward's).
  template <int OUT>
  static constexpr bool kFolds = OUT >= 16;

  // d_W = d_pre^T src: kRows rows of d_W^T (inputs i ...) summed over the batch, put back as
  // [out, in]. Fold: d_pre made from d_dst on the way (fold_row), its column sums into d_b.
  template <int OUT, int R, Activation A, bool Fold>
  static void d_weight_rows(const float* x, int64_t in, int64_t batch, const float* y, float* g,
                            float* d_w, float* d_b) {
    alignas(64) float acc[R][OUT] = {};
    alignas(64) float bias[OUT] = {};
    for (int64_t b = 0; b < batch; ++b) {
      float* gr = g + b * OUT;
      if constexpr (Fold) fold_row<A, OUT>(y + b * OUT, gr, bias);
      for (int r = 0; r < R; ++r) {
        const float xi = x[b * in + r];
#pragma omp simd
        for (int o = 0; o < OUT; ++o) acc[r][o] += xi * gr[o];
      }
    }
    for (int r = 0; r < R; ++r)
      for (int o = 0; o < OUT; ++o) d_w[o * in + r] = acc[r][o];
    if (Fold && d_b) std::copy(bias, bias + OUT, d_b);
  }
  // d_W's rows [o, o + R) (d_pre's columns), each IN wide, summed over the batch: stored as they
  // are laid out, where d_weight_rows' sums (along the outputs) are put back one float at a time.
  // The same sums in the same order (each over the batch in order). d_pre's columns made from
  // d_dst on the way (fold_row), their sums into d_b.
  template <int IN, int R, Activation A>
  static void d_weight_cols(const float* x, int64_t out, int64_t batch, const float* y, float* g,
                            float* d_w, float* d_b) {
    alignas(64) float acc[R][IN] = {};
    alignas(64) float bias[R] = {};
    for (int64_t b = 0; b < batch; ++b) {
      const float* xr = x + b * IN;
      fold_row<A, R>(y + b * out, g + b * out, bias);
      for (int r = 0; r < R; ++r) {
        const float go = g[b * out + r];
#pragma omp simd
        for (int i = 0; i < IN; ++i) acc[r][i] += go * xr[i];
      }
    }
    for (int r = 0; r < R; ++r) std::copy(acc[r], acc[r] + IN, d_w + r * IN);
    if (d_b) std::copy(bias, bias + R, d_b);
  }
  // Each model's d_W; where kFolds<OUT>, from d_dst (dst and d_bias given), d_pre made on the way.
  template <Activation A, int OUT>
  void small_d_weights(const float* src, const float* dst, float* d_pre, float* d_weights,
                       float* d_bias) {
    const int64_t batch = shape_.batch, in = shape_.in_features;
    // Model t's input, output, output gradient (d_pre once made), d_W and d_b.
    struct Slices {
      const float *x, *y;
      float *g, *d_w, *d_b;
    };
    auto model = [&](int64_t t) {
      return Slices{src + t * batch * in, dst + t * batch * OUT, d_pre + t * batch * OUT,
                    d_weights + t * shape_.model_stride,
                    d_bias ? d_bias + t * shape_.model_stride : nullptr};
    };
    // Inputs a vector wide or more: d_W's rows along them (d_weight_cols).
    if constexpr (kFolds<OUT>) {
      const bool along_inputs = by_width(in, [&](auto width) {
        constexpr int IN = decltype(width)::value;
        if constexpr (IN < kLanes) {
          return false;
        } else {
          for (int64_t t = 0; t < shape_.models; ++t) {
            const Slices r = model(t);
            // kRows<IN> (16, 8 or 4) divides OUT (a power of two, 16 or more).
            for (int64_t o = 0; o < OUT; o += kRows<IN>) {
              d_weight_cols<IN, kRows<IN>, A>(r.x, OUT, batch, r.y + o, r.g + o, r.d_w + o * IN,
                                              r.d_b ? r.d_b + o : nullptr);
            }
          }
          return true;
        }
      });
      if (along_inputs) return;
    }
    for (int64_t t = 0; t < shape_.models; ++t) {
      const Slices r = model(t);
      // The first block of inputs makes d_pre (where kFolds<OUT>); the others read it.
      in_blocks<kRows<OUT>>(in, [&](auto rows, int64_t i) {
        constexpr int R = decltype(rows)::value;
        if (kFolds<OUT> && i == 0) {
          d_weight_rows<OUT, R, A, kFolds<OUT>>(r.x + i, in, batch, r.y, r.g, r.d_w + i, r.d_b);
        } else {
          d_weight_rows<OUT, R, A, false>(r.x + i, in, batch, r.y, r.g, r.d_w + i, r.d_b);
        }
      });
    }
  }

  // Outputs narrower than a vector over inputs at least a vector wide (the disc models' last
  // layer, 32 -> 2): forward_rows and d_weight_rows would run OUT of 16 lanes; these run along
  // the inputs.
#if defined(__AVX512F__)
  // y = x W^T, 16 / OUT rows at a time: each of their 16 outputs a vector of partial sums along
  // the inputs, the 16 then summed across their lanes at once (lane_sums), which gives the rows'
  // outputs in memory order. The rows left over, one dot product each.
  template <Activation A, int OUT, int IN>
  void narrow_forward(const float* src, const float* weights, const float* bias, float* dst) const {
    constexpr int kRowsAtOnce = 16 / OUT, kVectors = IN / 16;
    const int64_t batch = shape_.batch;
    for (int64_t t = 0; t < shape_.models; ++t) {
      const float* w = weights + t * shape_.model_stride;
      const float* x = src + t * batch * IN;
      const float* b = bias ? bias + t * shape_.model_stride : nullptr;
      // The bias of each of a stored vector's 16 outputs (column l % OUT).
      alignas(64) float lanes[16];
      for (int l = 0; l < 16; ++l) lanes[l] = b ? b[l % OUT] : 0.0f;
      float* y = dst + t * batch * OUT;
      __m512 wv[OUT][kVectors];
      for (int o = 0; o < OUT; ++o)
        for (int k = 0; k < kVectors; ++k) wv[o][k] = _mm512_loadu_ps(w + o * IN + 16 * k);
      int64_t r = 0;
      for (; r + kRowsAtOnce <= batch; r += kRowsAtOnce) {
        __m512 v[16];
        for (int rr = 0; rr < kRowsAtOnce; ++rr) {
          const float* row = x + (r + rr) * IN;
          for (int o = 0; o < OUT; ++o) v[rr * OUT + o] = _mm512_setzero_ps();
          for (int k = 0; k < kVectors; ++k) {
            const __m512 xv = _mm512_loadu_ps(row + 16 * k);
            for (int o = 0; o < OUT; ++o)
              v[rr * OUT + o] = _mm512_fmadd_ps(xv, wv[o][k], v[rr * OUT + o]);
          }
        }
        alignas(64) float sums[16];
        _mm512_store_ps(sums, lane_sums(v));
        float* out = y + r * OUT;
#pragma omp simd
        for (int l = 0; l < 16; ++l) out[l] = activate<A>(sums[l] + lanes[l]);
      }
      for (; r < batch; ++r) {
        for (int o = 0; o < OUT; ++o) {
          float sum = 0.0f;
          for (int i = 0; i < IN; ++i) sum += x[r * IN + i] * w[o * IN + i];
          y[r * OUT + o] = activate<A>(sum + lanes[o]);
        }
      }
    }
  }
#endif
  // d_W = d_pre^T src: the OUT rows of d_W, each a vector along the inputs, summed over the
  // batch two rows at a time (twice the chains of multiply-adds in flight).
  template <int OUT, int IN>
  void narrow_d_weights(const float* src, const float* d_pre, float* d_weights) const {
    const int64_t batch = shape_.batch;
    for (int64_t t = 0; t < shape_.models; ++t) {
      const float* x = src + t * batch * IN;
      const float* g = d_pre + t * batch * OUT;
      alignas(64) float acc[2][OUT][IN] = {};
      const auto add = [&](int h, int64_t b) {
        for (int o = 0; o < OUT; ++o) {
          const float go = g[b * OUT + o];
#pragma omp simd
          for (int i = 0; i < IN; ++i) acc[h][o][i] += go * x[b * IN + i];
        }
      };
      int64_t b = 0;
      for (; b + 2 <= batch; b += 2) add(0, b), add(1, b + 1);
      if (b < batch) add(0, b);
      float* d_w = d_weights + t * shape_.model_stride;
      for (int o = 0; o < OUT; ++o)
        for (int i = 0; i < IN; ++i) d_w[o * IN + i] = acc[0][o][i] + acc[1][o][i];
    }
  }
  // Whether (OUT, IN) takes the loops along the inputs: OUT below a vector, IN at least one, and
  // the sums (two sets) in at most half the vector registers.
  template <int OUT, int IN>
  static constexpr bool kAlongInputs = OUT < 16 && IN >= 16 && OUT* IN <= 128;

  // d_src = d_pre W: rows' IN sums over the outputs (a row of W each).
  template <int IN, int R>
  static void d_src_rows(const float* g, int64_t out, const float* w, float* dx) {
    alignas(64) float acc[R][IN] = {};
    for (int64_t o = 0; o < out; ++o) {
      const float* row = w + o * IN;
      for (int r = 0; r < R; ++r) {
        const float go = g[r * out + o];
#pragma omp simd
        for (int i = 0; i < IN; ++i) acc[r][i] += go * row[i];
      }
    }
    for (int r = 0; r < R; ++r) std::copy(acc[r], acc[r] + IN, dx + r * IN);
  }
  template <int IN>
  void small_d_src(const float* weights, const float* d_pre, float* d_src) {
    const int64_t batch = shape_.batch, out = shape_.out_features;
    for (int64_t t = 0; t < shape_.models; ++t) {
      const float* w = weights + t * shape_.model_stride;
      const float* g = d_pre + t * batch * out;
      float* dx = d_src + t * batch * IN;
      in_blocks<kRows<IN>>(batch, [&](auto rows, int64_t r) {
        d_src_rows<IN, decltype(rows)::value>(g + r * out, out, w, dx + r * IN);
      });
    }
  }

  // The widths the loops are compiled for (powers of two up to 64); others take oneDNN's product.
  template <typename Body>
  static bool by_width(int64_t n, Body&& body) {
    switch (n) {
      case 1:
        return body(std::integral_constant<int, 1>{});
      case 2:
        return body(std::integral_constant<int, 2>{});
      case 4:
        return body(std::integral_constant<int, 4>{});
      case 8:
        return body(std::integral_constant<int, 8>{});
      case 16:
        return body(std::integral_constant<int, 16>{});
      case 32:
        return body(std::integral_constant<int, 32>{});
      case 64:
        return body(std::integral_constant<int, 64>{});
      default:
        return false;
    }
  }
  // body(OUT, IN) where the layer's widths take the loops along the inputs; false elsewhere.
  template <typename Body>
  bool along_inputs(Body&& body) const {
    return by_width(shape_.out_features, [&](auto out) {
      return by_width(shape_.in_features, [&](auto in) {
        if constexpr (kAlongInputs<std::decay_t<decltype(out)>::value, decltype(in)::value>) {
          body(out, in);
          return true;
        }
        return false;
      });
    });
  }

  template <Activation A>
  void small_forward(const float* src, const float* weights, const float* bias, float* dst) {
#if defined(__AVX512F__)
    if (along_inputs([&](auto out, auto in) {
          narrow_forward<A, decltype(out)::value, decltype(in)::value>(src, weights, bias, dst);
        }))
      return;
#endif
    by_width(shape_.out_features, [&](auto out) {
      small_forward<A, decltype(out)::value>(src, weights, bias, dst);
      return true;
    });
  }

  // body(std::integral_constant<Activation, A>) for the layer's activation.
  template <typename Body>
  void with_activation(Body&& body) const {
    with_fused_activation(shape_.activation, std::forward<Body>(body));
  }

  // d_pre = d_dst act'(dst) and d_bias (in d_W's pass where kFolds, else a pass first), d_W and
  // d_src.
  template <Activation A>
  void small_backward(const float* src, const float* weights, const float* dst, float* d_pre,
                      float* d_weights, float* d_bias, float* d_src) {
    const bool folds =
        by_width(shape_.out_features, [](auto out) { return kFolds<decltype(out)::value>; });
    if (!folds) activation_and_bias_backward<A>(dst, d_pre, d_bias);
    if (!along_inputs([&](auto out, auto in) {
          narrow_d_weights<decltype(out)::value, decltype(in)::value>(src, d_pre, d_weights);
        }))
      by_width(shape_.out_features, [&](auto out) {
        small_d_weights<A, decltype(out)::value>(src, dst, d_pre, d_weights, d_bias);
        return true;
      });
    if (!d_src) return;
    by_width(shape_.in_features, [&](auto in) {
      small_d_src<decltype(in)::value>(weights, d_pre, d_src);
      return true;
    });
  }

  // dst = act(dst + bias), model by model (each model's rows with its own bias). Rows no wider
  // than a vector (the disc models' 2 to 16 columns) go as one flat run of the model's outputs,
  // the bias repeated across a vector's lanes, where a row at a time would be scalar code.
  template <Activation A>
  void bias_and_activation(const float* bias, float* dst) const {
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    auto models = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* b = bias ? bias + t * shape_.model_stride : nullptr;
        float* y = dst + t * rows * cols;
        if (narrow(cols)) {
          alignas(64) float lanes[kLanes];
          for (int64_t l = 0; l < kLanes; ++l) lanes[l] = b ? b[l % cols] : 0.0f;
          const int64_t count = rows * cols, whole = count / kLanes * kLanes;
          for (int64_t k = 0; k < whole; k += kLanes) {
#pragma omp simd
            for (int64_t l = 0; l < kLanes; ++l) y[k + l] = activate<A>(y[k + l] + lanes[l]);
          }
          for (int64_t k = whole; k < count; ++k) y[k] = activate<A>(y[k] + lanes[k - whole]);
          continue;
        }
        for (int64_t r = 0; r < rows; ++r, y += cols) {
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) y[c] = activate<A>(b ? y[c] + b[c] : y[c]);
        }
      }
    };
    run_models(models);
  }

  // As CpuLinear's: d_dst *= act'(dst) and each model's d_bias = its column sums (rows in order;
  // narrow rows as one flat run, each lane's sum in row order, a column's lanes then added).
  template <Activation A>
  void activation_and_bias_backward(const float* dst, float* d_dst, float* d_bias) const {
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    auto models = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* db = d_bias ? d_bias + t * shape_.model_stride : nullptr;
        float* g = d_dst + t * rows * cols;
        const float* y = dst + t * rows * cols;
        if (narrow(cols)) {
          // Lane l's sum runs down the model's outputs l, l + kLanes, ...: one vector of sums
          // (a run a whole vector, so that the sums stay in a register).
          const int64_t count = rows * cols, whole = count / kLanes * kLanes;
          alignas(64) float sums[kLanes] = {};
          for (int64_t k = 0; k < whole; k += kLanes) {
#pragma omp simd
            for (int64_t l = 0; l < kLanes; ++l) {
              const float v = derivative_times<A>(y[k + l], g[k + l]);
              g[k + l] = v;
              sums[l] += v;
            }
          }
          for (int64_t k = whole; k < count; ++k) {
            g[k] = derivative_times<A>(y[k], g[k]);
            sums[k - whole] += g[k];
          }
          if (!db) continue;
          for (int64_t c = 0; c < cols; ++c) {
            float s = 0.0f;
            for (int64_t l = c; l < kLanes; l += cols) s += sums[l];
            db[c] = s;
          }
          continue;
        }
        if (db) std::fill(db, db + cols, 0.0f);
        for (int64_t r = 0; r < rows; ++r, g += cols, y += cols) {
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) {
            const float v = derivative_times<A>(y[c], g[c]);
            g[c] = v;
            if (db) db[c] += v;
          }
        }
      }
    };
    run_models(models);
  }

  // Narrow rows: a power of two up to a vector's lanes, so that a run of kLanes outputs from a
  // row's start holds each column at the same lanes.
  static constexpr int64_t kLanes = 16;
  static bool narrow(int64_t cols) { return cols <= kLanes && kLanes % cols == 0; }

  template <typename Body>
  void run_models(Body&& body) const {
    const int64_t work = shape_.models * shape_.batch * shape_.out_features;
    if (shape_.in_shard) return body(int64_t{0}, shape_.models);
    parallel_for(shape_.models, body, work);
  }

  LinearShape shape_;
  dnnl::stream stream_;
  bool small_;
  bool bf16_;                      // the products in bf16 (not the small layers' loops)
  const Bf16Weights* kept_;        // bf16: the weights' copies the optimizers keep
  std::vector<float> transposed_;  // one model's W^T (small layers), sized once
  BoundMatmul forward_, d_weights_, d_src_;
  Bf16Copy src_b_, w_b_, d_pre_b_;
};

}  // namespace

bool small_linear(int64_t in_features, int64_t out_features) {
  return CpuFusedLinear::small_shape({.in_features = in_features, .out_features = out_features});
}

std::unique_ptr<WeightedKernel> make_linear(const LinearShape& shape,
                                            const Bf16Weights* bf16_weights,
                                            const dnnl::engine& engine,
                                            const dnnl::stream& stream) {
  if (shape.model_stride > 0)
    return std::make_unique<CpuFusedLinear>(shape, bf16_weights, engine, stream);
  // One model's small Linear (one thread's work: the disc models') takes the fused models' loops
  // as a group of one: oneDNN's per-product set-up is most of such a layer's time
  // (docs/benchmarks.md, "One model's small Linear in the fused loops"), and a model alone then
  // computes what it computes in any fused group.
  const double flops = 2.0 * static_cast<double>(shape.batch * shape.in_features) *
                       static_cast<double>(shape.out_features);
  if (CpuFusedLinear::small_shape(shape) && (shape.in_shard || flops < kSingleThreadMatmulFlops)) {
    LinearShape one = shape;
    one.models = 1;
    one.model_stride = shape.out_features * shape.in_features + shape.out_features;
    return std::make_unique<CpuFusedLinear>(one, bf16_weights, engine, stream);
  }
  // The small layers are f32 at any precision (CpuFusedLinear's), as in a fused group.
  const bool f32_here = CpuFusedLinear::small_shape(shape);
  return std::make_unique<CpuLinear>(shape, f32_here ? nullptr : bf16_weights, engine, stream);
}

}  // namespace xo::cpu

// Linear (+ fused activation) on the CPU, forward and backward, as three oneDNN matmuls built once
// per shape: dst = act(src W^T + b); d_W = d_pre^T src; d_src = d_pre W. The activation derivative
// and the bias gradient are one fused pass over d_dst.
#include <algorithm>

#include "backend/activation_math.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

class CpuLinear final : public WeightedKernel {
 public:
  CpuLinear(const LinearShape& s, const dnnl::engine& engine, const dnnl::stream& stream)
      : shape_(s), stream_(stream) {
    const memory::dim batch = s.batch, in = s.in_features, out = s.out_features;
    // Weights are stored [out, in] as in PyTorch; the forward matmul reads them as W^T [in, out]
    // through a transposed ("ba") layout instead of copying.
    const memory::desc src_md({batch, in}, f32, tag::ab);
    const memory::desc w_t_md({in, out}, f32, tag::ba);
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
    const memory::desc d_pre_t_md({out, batch}, f32, tag::ba);
    const memory::desc d_w_md({out, in}, f32, tag::ab);
    d_weights_ = BoundMatmul(d_pre_t_md, src_md, nullptr, d_w_md, {}, engine, s.in_shard);
    if (s.need_d_src) {
      // d_src [batch, in] = d_pre [batch, out] x W [out, in].
      const memory::desc w_md({out, in}, f32, tag::ab);
      d_src_ = BoundMatmul(dst_md, w_md, nullptr, src_md, {}, engine, s.in_shard);
    }
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    forward_.run(stream_, src, weights, bias, dst);
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    activation_and_bias_backward(dst, d_dst, d_bias);
    d_weights_.run(stream_, d_dst, src, nullptr, d_weights);
    if (d_src) d_src_.run(stream_, d_dst, weights, nullptr, d_src);
  }

 private:
  // d_dst *= act'(dst) and d_bias = column sums of d_dst, in one pass. Each thread owns a block of
  // columns, so the sums are added in the same order for any thread count.
  void activation_and_bias_backward(const float* dst, float* d_dst, float* d_bias) const {
    switch (shape_.activation) {
      case Activation::None:
        return columns_backward<Activation::None>(dst, d_dst, d_bias);
      case Activation::ReLU:
        return columns_backward<Activation::ReLU>(dst, d_dst, d_bias);
      case Activation::Tanh:
        return columns_backward<Activation::Tanh>(dst, d_dst, d_bias);
      case Activation::Sigmoid:
        return columns_backward<Activation::Sigmoid>(dst, d_dst, d_bias);
    }
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
  BoundMatmul forward_, d_weights_, d_src_;
};

}  // namespace

std::unique_ptr<WeightedKernel> make_linear(const LinearShape& shape, const dnnl::engine& engine,
                                            const dnnl::stream& stream) {
  return std::make_unique<CpuLinear>(shape, engine, stream);
}

}  // namespace xo::cpu

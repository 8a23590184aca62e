// Linear (+ fused activation) on the CPU, forward and backward, as three oneDNN matmuls built once
// per shape: dst = act(src W^T + b); d_W = d_pre^T src; d_src = d_pre W. The activation derivative
// and the bias gradient are one fused pass over d_dst. Fused trials: the same three matmuls batched
// over the trials.
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

// The same Linear of `trials` models at once (fused trials): three batched oneDNN matmuls over the
// trial dimension, each trial's weights trial_stride floats after the last's. oneDNN 2.6 runs a
// bias of its own per batch entry only in its reference kernel (~300x slower here), so the bias and
// the activation are one pass after the forward matmul, as the bias gradient is before backward's.
class CpuTrialsLinear final : public WeightedKernel {
 public:
  CpuTrialsLinear(const LinearShape& s, const dnnl::engine& engine, const dnnl::stream& stream)
      : shape_(s), stream_(stream) {
    XO_ASSERT(s.trials > 1 && s.trial_stride >= s.out_features * s.in_features + s.out_features);
    const memory::dim k = s.trials, batch = s.batch, in = s.in_features, out = s.out_features;
    const memory::dim stride = s.trial_stride;
    const memory::desc src_md({k, batch, in}, f32, memory::dims{batch * in, in, 1});
    const memory::desc dst_md({k, batch, out}, f32, memory::dims{batch * out, out, 1});
    // W^T [in, out] of each trial, read in place from W [out, in].
    const memory::desc w_t_md({k, in, out}, f32, memory::dims{stride, 1, in});
    forward_ = BoundMatmul(src_md, w_t_md, nullptr, dst_md, {}, engine, s.in_shard);
    const memory::desc d_pre_t_md({k, out, batch}, f32, memory::dims{batch * out, 1, out});
    const memory::desc d_w_md({k, out, in}, f32, memory::dims{stride, in, 1});
    d_weights_ = BoundMatmul(d_pre_t_md, src_md, nullptr, d_w_md, {}, engine, s.in_shard);
    if (s.need_d_src) d_src_ = BoundMatmul(dst_md, d_w_md, nullptr, src_md, {}, engine, s.in_shard);
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    XO_ASSERT((bias != nullptr) == shape_.has_bias);
    forward_.run(stream_, src, weights, nullptr, dst);
    switch (shape_.activation) {
      case Activation::None:
        return bias_and_activation<Activation::None>(bias, dst);
      case Activation::ReLU:
        return bias_and_activation<Activation::ReLU>(bias, dst);
      case Activation::Tanh:
        return bias_and_activation<Activation::Tanh>(bias, dst);
      case Activation::Sigmoid:
        return bias_and_activation<Activation::Sigmoid>(bias, dst);
    }
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    switch (shape_.activation) {
      case Activation::None:
        activation_and_bias_backward<Activation::None>(dst, d_dst, d_bias);
        break;
      case Activation::ReLU:
        activation_and_bias_backward<Activation::ReLU>(dst, d_dst, d_bias);
        break;
      case Activation::Tanh:
        activation_and_bias_backward<Activation::Tanh>(dst, d_dst, d_bias);
        break;
      case Activation::Sigmoid:
        activation_and_bias_backward<Activation::Sigmoid>(dst, d_dst, d_bias);
        break;
    }
    d_weights_.run(stream_, d_dst, src, nullptr, d_weights);
    if (d_src) d_src_.run(stream_, d_dst, weights, nullptr, d_src);
  }

 private:
  // dst = act(dst + bias), trial by trial (each trial's rows with its own bias).
  template <Activation A>
  void bias_and_activation(const float* bias, float* dst) const {
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    auto trials = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* b = bias ? bias + t * shape_.trial_stride : nullptr;
        for (int64_t r = 0; r < rows; ++r) {
          float* y = dst + (t * rows + r) * cols;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) y[c] = activate<A>(b ? y[c] + b[c] : y[c]);
        }
      }
    };
    run_trials(trials);
  }

  // As CpuLinear's: d_dst *= act'(dst) and each trial's d_bias = its column sums, rows in order.
  template <Activation A>
  void activation_and_bias_backward(const float* dst, float* d_dst, float* d_bias) const {
    const int64_t rows = shape_.batch, cols = shape_.out_features;
    auto trials = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* db = d_bias ? d_bias + t * shape_.trial_stride : nullptr;
        if (db) std::fill(db, db + cols, 0.0f);
        for (int64_t r = 0; r < rows; ++r) {
          float* g = d_dst + (t * rows + r) * cols;
          const float* y = dst + (t * rows + r) * cols;
#pragma omp simd
          for (int64_t c = 0; c < cols; ++c) {
            const float v = derivative_times<A>(y[c], g[c]);
            g[c] = v;
            if (db) db[c] += v;
          }
        }
      }
    };
    run_trials(trials);
  }

  template <typename Body>
  void run_trials(Body&& body) const {
    const int64_t work = shape_.trials * shape_.batch * shape_.out_features;
    if (shape_.in_shard) return body(int64_t{0}, shape_.trials);
    parallel_for(shape_.trials, body, work);
  }

  LinearShape shape_;
  dnnl::stream stream_;
  BoundMatmul forward_, d_weights_, d_src_;
};

}  // namespace

std::unique_ptr<WeightedKernel> make_linear(const LinearShape& shape, const dnnl::engine& engine,
                                            const dnnl::stream& stream) {
  if (shape.trials > 1) return std::make_unique<CpuTrialsLinear>(shape, engine, stream);
  return std::make_unique<CpuLinear>(shape, engine, stream);
}

}  // namespace xo::cpu

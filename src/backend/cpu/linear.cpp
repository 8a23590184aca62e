// Linear (+ fused activation) on the CPU, forward and backward, as three oneDNN matmuls built once
// per shape: dst = act(src W^T + b); d_W = d_pre^T src; d_src = d_pre W. The activation derivative
// and the bias gradient are one fused pass over d_dst.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/dnnl_check.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

dnnl::algorithm eltwise_algorithm(Activation act) {
  switch (act) {
    case Activation::ReLU:
      return dnnl::algorithm::eltwise_relu;
    case Activation::Tanh:
      return dnnl::algorithm::eltwise_tanh;
    case Activation::Sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    case Activation::None:
      break;
  }
  XO_ASSERT(false && "no eltwise algorithm for Activation::None");
}

// Runs the enclosed oneDNN calls with at most `threads` OpenMP threads (0: leave as is). oneDNN's
// OpenMP runtime reads the limit when a primitive is created and when it runs.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads) : saved_(threads > 0 ? omp_get_max_threads() : 0) {
    if (threads > 0) omp_set_num_threads(threads);
  }
  ~ThreadLimit() {
    if (saved_ > 0) omp_set_num_threads(saved_);
  }
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int saved_;
};

// A matmul primitive with its memory objects bound once; each call only swaps data pointers.
// Matmuls smaller than kSingleThreadMatmulFlops run on one thread: there the OpenMP fork/join
// (~2-3 us measured on the 2-core machine) costs more than the work it splits.
class BoundMatmul {
 public:
  BoundMatmul() = default;
  BoundMatmul(const memory::desc& src, const memory::desc& weights, const memory::desc* bias,
              const memory::desc& dst, dnnl::primitive_attr attr, const dnnl::engine& engine,
              bool in_shard) {
    const memory::dims& a = src.dims();
    const memory::dims& b = weights.dims();
    const double flops =
        2.0 * static_cast<double>(a[0]) * static_cast<double>(a[1]) * static_cast<double>(b[1]);
    threads_ = in_shard || flops < kSingleThreadMatmulFlops ? 1 : 0;
    ThreadLimit limit(threads_);
    // A user-owned scratchpad, sized here, keeps the training step free of allocations.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto desc =
        bias ? dnnl::matmul::desc(src, weights, *bias, dst) : dnnl::matmul::desc(src, weights, dst);
    const auto pd = XO_DNNL_CHECK(dnnl::matmul::primitive_desc(desc, attr, engine));
    primitive_ = XO_DNNL_CHECK(dnnl::matmul(pd));
    src_ = memory(src, engine, DNNL_MEMORY_NONE);
    weights_ = memory(weights, engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst, engine, DNNL_MEMORY_NONE);
    args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, weights_}, {DNNL_ARG_DST, dst_}};
    if (bias) {
      bias_ = memory(*bias, engine, DNNL_MEMORY_NONE);
      args_.emplace(DNNL_ARG_BIAS, bias_);
    }
    if (pd.scratchpad_desc().get_size() > 0) {
      scratchpad_ = memory(pd.scratchpad_desc(), engine);  // allocated once, here
      args_.emplace(DNNL_ARG_SCRATCHPAD, scratchpad_);
    }
  }

  void run(const dnnl::stream& stream, const float* src, const float* weights, const float* bias,
           float* dst) {
    ThreadLimit limit(threads_);
    src_.set_data_handle(const_cast<float*>(src));
    weights_.set_data_handle(const_cast<float*>(weights));
    if (bias) bias_.set_data_handle(const_cast<float*>(bias));
    dst_.set_data_handle(dst);
    XO_DNNL_CHECK(primitive_.execute(stream, args_));
  }

 private:
  dnnl::matmul primitive_;
  memory src_, weights_, bias_, dst_, scratchpad_;
  std::unordered_map<int, memory> args_;
  int threads_ = 0;
};

class CpuLinear final : public LinearKernel {
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
          float v = g[c];
          if constexpr (A == Activation::ReLU) v = y[c] > 0.0f ? v : 0.0f;
          if constexpr (A == Activation::Tanh) v *= 1.0f - y[c] * y[c];
          if constexpr (A == Activation::Sigmoid) v *= y[c] * (1.0f - y[c]);
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

std::unique_ptr<LinearKernel> make_linear(const LinearShape& shape, const dnnl::engine& engine,
                                          const dnnl::stream& stream) {
  return std::make_unique<CpuLinear>(shape, engine, stream);
}

}  // namespace xo::cpu

// Pooling on the CPU, forward and backward. 2-D max/average pooling of NCHW tensors through oneDNN
// (built once per shape; max pooling keeps oneDNN's workspace of arg-max positions for backward);
// pooling over the steps of a sequence [N, T, F] -> [N, F] as plain loops (the arg-max step kept as
// an index per output).
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

class CpuPool2d final : public PoolKernel {
 public:
  CpuPool2d(const Pool2dShape& s, const dnnl::engine& engine, const dnnl::stream& stream)
      : stream_(stream) {
    const memory::desc src_md({s.batch, s.channels, s.height, s.width}, f32, tag::nchw);
    const memory::desc dst_md({s.batch, s.channels, s.out_height(), s.out_width()}, f32, tag::nchw);
    const memory::dims strides = {s.stride, s.stride}, kernel = {s.kernel, s.kernel};
    const memory::dims pad = {s.padding, s.padding};
    const auto algo = s.type == PoolType::Max ? dnnl::algorithm::pooling_max
                                              : dnnl::algorithm::pooling_avg_include_padding;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto prop =
        s.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    const dnnl::pooling_forward::desc fwd_desc(prop, algo, src_md, dst_md, strides, kernel, pad,
                                               pad);
    const auto fwd_pd =
        XO_DNNL_CHECK(dnnl::pooling_forward::primitive_desc(fwd_desc, attr, engine));
    forward_ = XO_DNNL_CHECK(dnnl::pooling_forward(fwd_pd));
    src_ = memory(src_md, engine, DNNL_MEMORY_NONE);
    dst_ = memory(dst_md, engine, DNNL_MEMORY_NONE);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}};
    add_scratchpad(fwd_pd, engine, fwd_args_);
    if (!s.training) return;
    if (fwd_pd.workspace_desc().get_size() > 0) {
      workspace_ = memory(fwd_pd.workspace_desc(), engine);
      fwd_args_.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    const dnnl::pooling_backward::desc bwd_desc(algo, src_md, dst_md, strides, kernel, pad, pad);
    const auto bwd_pd =
        XO_DNNL_CHECK(dnnl::pooling_backward::primitive_desc(bwd_desc, attr, engine, fwd_pd));
    backward_ = XO_DNNL_CHECK(dnnl::pooling_backward(bwd_pd));
    d_dst_ = memory(dst_md, engine, DNNL_MEMORY_NONE);
    d_src_ = memory(src_md, engine, DNNL_MEMORY_NONE);
    bwd_args_ = {{DNNL_ARG_DIFF_DST, d_dst_}, {DNNL_ARG_DIFF_SRC, d_src_}};
    if (workspace_) bwd_args_.emplace(DNNL_ARG_WORKSPACE, workspace_);
    add_scratchpad(bwd_pd, engine, bwd_args_);
  }

  void forward(const float* src, float* dst) override {
    src_.set_data_handle(const_cast<float*>(src));
    dst_.set_data_handle(dst);
    XO_DNNL_CHECK(forward_.execute(stream_, fwd_args_));
  }

  void backward(const float* d_dst, float* d_src) override {
    XO_ASSERT(backward_ && "pooling kernel built for inference");
    d_dst_.set_data_handle(const_cast<float*>(d_dst));
    d_src_.set_data_handle(d_src);
    XO_DNNL_CHECK(backward_.execute(stream_, bwd_args_));
  }

 private:
  dnnl::stream stream_;
  dnnl::pooling_forward forward_;
  dnnl::pooling_backward backward_;
  memory src_, dst_, d_dst_, d_src_, workspace_;
  std::unordered_map<int, memory> fwd_args_, bwd_args_;
};

class CpuSequencePool final : public PoolKernel {
 public:
  explicit CpuSequencePool(const SequencePoolShape& s)
      : s_(s), arg_max_(s.type == PoolType::Max ? s.batch * s.features : 0) {}

  void forward(const float* src, float* dst) override {
    const int64_t t_n = s_.steps, f_n = s_.features;
    parallel_for(
        s_.batch,
        [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const float* x = src + b * t_n * f_n;
            float* y = dst + b * f_n;
            if (s_.type == PoolType::Avg) {
              std::fill(y, y + f_n, 0.0f);
              for (int64_t t = 0; t < t_n; ++t) {
#pragma omp simd
                for (int64_t f = 0; f < f_n; ++f) y[f] += x[t * f_n + f];
              }
              const float inv = 1.0f / static_cast<float>(t_n);
#pragma omp simd
              for (int64_t f = 0; f < f_n; ++f) y[f] *= inv;
            } else {
              int32_t* arg = arg_max_.data() + b * f_n;
              std::copy(x, x + f_n, y);
              std::fill(arg, arg + f_n, 0);
              for (int64_t t = 1; t < t_n; ++t) {
                for (int64_t f = 0; f < f_n; ++f) {
                  // Strictly greater: ties go to the first step, as torch.max does.
                  if (x[t * f_n + f] > y[f]) {
                    y[f] = x[t * f_n + f];
                    arg[f] = static_cast<int32_t>(t);
                  }
                }
              }
            }
          }
        },
        s_.batch * t_n * f_n);
  }

  void backward(const float* d_dst, float* d_src) override {
    const int64_t t_n = s_.steps, f_n = s_.features;
    parallel_for(
        s_.batch,
        [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const float* g = d_dst + b * f_n;
            float* d = d_src + b * t_n * f_n;
            if (s_.type == PoolType::Avg) {
              const float inv = 1.0f / static_cast<float>(t_n);
              for (int64_t t = 0; t < t_n; ++t) {
#pragma omp simd
                for (int64_t f = 0; f < f_n; ++f) d[t * f_n + f] = g[f] * inv;
              }
            } else {
              std::fill(d, d + t_n * f_n, 0.0f);
              const int32_t* arg = arg_max_.data() + b * f_n;
              for (int64_t f = 0; f < f_n; ++f) d[arg[f] * f_n + f] = g[f];
            }
          }
        },
        s_.batch * t_n * f_n);
  }

 private:
  SequencePoolShape s_;
  std::vector<int32_t> arg_max_;  // [batch, features]: the step each max came from
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool2d(const Pool2dShape& shape, const dnnl::engine& engine,
                                        const dnnl::stream& stream) {
  return std::make_unique<CpuPool2d>(shape, engine, stream);
}

std::unique_ptr<PoolKernel> make_sequence_pool(const SequencePoolShape& shape) {
  return std::make_unique<CpuSequencePool>(shape);
}

}  // namespace xo::cpu

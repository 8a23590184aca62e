// Batch normalisation on the CPU, forward and backward, through oneDNN's batch-normalisation
// primitive (per-channel scale and shift; the batch mean and variance kept for backward). The
// running statistics follow PyTorch: running = (1 - momentum) running + momentum batch, with the
// unbiased batch variance.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;

class CpuBatchNorm final : public BatchNormKernel {
 public:
  CpuBatchNorm(const BatchNormShape& s, const dnnl::engine& engine, const dnnl::stream& stream)
      : shape_(s), stream_(stream) {
    // [N, C] and [N, C, spatial] as oneDNN's plain nc / ncw layouts.
    const memory::desc data_md =
        s.spatial == 1
            ? memory::desc({s.batch, s.channels}, f32, memory::format_tag::nc)
            : memory::desc({s.batch, s.channels, s.spatial}, f32, memory::format_tag::ncw);
    const auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift |
                       (s.training ? dnnl::normalization_flags::none
                                   : dnnl::normalization_flags::use_global_stats);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto prop =
        s.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    const dnnl::batch_normalization_forward::desc fwd_desc(prop, data_md, static_cast<float>(s.eps),
                                                           flags);
    const auto fwd_pd =
        XO_DNNL_CHECK(dnnl::batch_normalization_forward::primitive_desc(fwd_desc, attr, engine));
    forward_ = XO_DNNL_CHECK(dnnl::batch_normalization_forward(fwd_pd));
    const memory::desc channel_md({s.channels}, f32, memory::format_tag::a);
    src_ = memory(data_md, engine, DNNL_MEMORY_NONE);
    dst_ = memory(data_md, engine, DNNL_MEMORY_NONE);
    scale_ = memory(channel_md, engine, DNNL_MEMORY_NONE);
    shift_ = memory(channel_md, engine, DNNL_MEMORY_NONE);
    // Training: oneDNN writes the batch statistics here; inference: it reads the running ones.
    mean_ = memory(fwd_pd.mean_desc(), engine);
    variance_ = memory(fwd_pd.variance_desc(), engine);
    fwd_args_ = {{DNNL_ARG_SRC, src_},     {DNNL_ARG_DST, dst_},   {DNNL_ARG_SCALE, scale_},
                 {DNNL_ARG_SHIFT, shift_}, {DNNL_ARG_MEAN, mean_}, {DNNL_ARG_VARIANCE, variance_}};
    add_scratchpad(fwd_pd, engine, fwd_args_);
    if (!s.training) return;
    if (fwd_pd.workspace_desc().get_size() > 0) {
      workspace_ = memory(fwd_pd.workspace_desc(), engine);
      fwd_args_.emplace(DNNL_ARG_WORKSPACE, workspace_);
    }
    const dnnl::batch_normalization_backward::desc bwd_desc(
        dnnl::prop_kind::backward, data_md, data_md, static_cast<float>(s.eps),
        dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
    const auto bwd_pd = XO_DNNL_CHECK(
        dnnl::batch_normalization_backward::primitive_desc(bwd_desc, attr, engine, fwd_pd));
    backward_ = XO_DNNL_CHECK(dnnl::batch_normalization_backward(bwd_pd));
    d_dst_ = memory(data_md, engine, DNNL_MEMORY_NONE);
    d_src_ = memory(data_md, engine, DNNL_MEMORY_NONE);
    d_scale_ = memory(channel_md, engine, DNNL_MEMORY_NONE);
    d_shift_ = memory(channel_md, engine, DNNL_MEMORY_NONE);
    // oneDNN always computes d_src: where the caller needs none it goes to a buffer of our own.
    spare_d_src_.resize(static_cast<size_t>(s.batch * s.channels * s.spatial));
    // oneDNN 2.6 asks for the shift in backward too, though the gradients do not depend on it.
    spare_shift_.resize(static_cast<size_t>(s.channels));
    bwd_shift_ = memory(channel_md, engine, spare_shift_.data());
    bwd_args_ = {{DNNL_ARG_SRC, src_},
                 {DNNL_ARG_MEAN, mean_},
                 {DNNL_ARG_VARIANCE, variance_},
                 {DNNL_ARG_DIFF_DST, d_dst_},
                 {DNNL_ARG_SCALE, scale_},
                 {DNNL_ARG_DIFF_SRC, d_src_},
                 {DNNL_ARG_DIFF_SCALE, d_scale_},
                 {DNNL_ARG_DIFF_SHIFT, d_shift_},
                 {DNNL_ARG_SHIFT, bwd_shift_}};
    if (workspace_) bwd_args_.emplace(DNNL_ARG_WORKSPACE, workspace_);
    add_scratchpad(bwd_pd, engine, bwd_args_);
  }

  void forward(const float* src, const float* weight, const float* bias, float* running_mean,
               float* running_var, float* batches_tracked, float* dst) override {
    src_.set_data_handle(const_cast<float*>(src));
    dst_.set_data_handle(dst);
    scale_.set_data_handle(const_cast<float*>(weight));
    shift_.set_data_handle(const_cast<float*>(bias));
    auto* mean = static_cast<float*>(mean_.get_data_handle());
    auto* var = static_cast<float*>(variance_.get_data_handle());
    const int64_t c = shape_.channels;
    if (!shape_.training) {
      std::copy(running_mean, running_mean + c, mean);
      std::copy(running_var, running_var + c, var);
      XO_DNNL_CHECK(forward_.execute(stream_, fwd_args_));
      return;
    }
    XO_DNNL_CHECK(forward_.execute(stream_, fwd_args_));
    *batches_tracked += 1;
    const double n = static_cast<double>(shape_.batch * shape_.spatial);
    const double unbias = n > 1 ? n / (n - 1) : 1.0;
    const auto m = static_cast<float>(shape_.momentum);
    for (int64_t k = 0; k < c; ++k) {
      running_mean[k] = (1 - m) * running_mean[k] + m * mean[k];
      running_var[k] = (1 - m) * running_var[k] + m * static_cast<float>(var[k] * unbias);
    }
  }

  void backward(const float* src, const float* weight, const float* d_dst, float* d_src,
                float* d_weight, float* d_bias) override {
    XO_ASSERT(backward_ && "batch-norm kernel built for inference");
    src_.set_data_handle(const_cast<float*>(src));
    scale_.set_data_handle(const_cast<float*>(weight));
    d_dst_.set_data_handle(const_cast<float*>(d_dst));
    d_src_.set_data_handle(d_src ? d_src : spare_d_src_.data());
    d_scale_.set_data_handle(d_weight);
    d_shift_.set_data_handle(d_bias);
    XO_DNNL_CHECK(backward_.execute(stream_, bwd_args_));
  }

 private:
  BatchNormShape shape_;
  dnnl::stream stream_;
  dnnl::batch_normalization_forward forward_;
  dnnl::batch_normalization_backward backward_;
  memory src_, dst_, scale_, shift_, mean_, variance_, workspace_;
  memory d_dst_, d_src_, d_scale_, d_shift_, bwd_shift_;
  std::vector<float> spare_d_src_, spare_shift_;
  std::unordered_map<int, memory> fwd_args_, bwd_args_;
};

}  // namespace

std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormShape& shape,
                                                 const dnnl::engine& engine,
                                                 const dnnl::stream& stream) {
  return std::make_unique<CpuBatchNorm>(shape, engine, stream);
}

}  // namespace xo::cpu

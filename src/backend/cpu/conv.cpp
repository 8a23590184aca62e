// Conv2d (+ fused activation) on the CPU, forward and backward, as three oneDNN convolution
// primitives built once per shape: forward with the bias and the activation as a post-op, backward
// data and backward weights (which also gives the bias gradient). The primitives pick their own
// blocked layouts; tensors stay NCHW (PyTorch's) in crossover's buffers and are reordered at the
// primitive's edges where the layouts differ. At bf16 the primitives read src, the weights and
// d_dst as bf16 (the reorders at their edges convert them, once each per step) and write dst,
// d_src and the weight and bias gradients in f32.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// A convolution's memory descriptors: as crossover holds the tensors (NCHW, OIHW) and as the
// primitives may choose (any).
struct ConvDescs {
  ConvDescs(const Conv2dShape& s, memory::data_type operand)
      : has_bias(s.has_bias),
        src_dims{s.batch, s.in_channels, s.height, s.width},
        w_dims{s.out_channels, s.in_channels, s.kernel, s.kernel},
        dst_dims{s.batch, s.out_channels, s.out_height(), s.out_width()},
        strides{s.stride, s.stride},
        pad{s.padding, s.padding},
        src_user(src_dims, f32, tag::nchw),
        dst_user(dst_dims, f32, tag::nchw),
        w_user(w_dims, f32, tag::oihw),
        bias_md({s.out_channels}, f32, tag::x),
        src_any(src_dims, operand, tag::any),
        dst_any(dst_dims, f32, tag::any),
        w_any(w_dims, operand, tag::any),
        d_dst_any(dst_dims, operand, tag::any),
        d_w_any(w_dims, f32, tag::any),
        d_src_any(src_dims, f32, tag::any) {}

  // The bias's descriptor, or none where the convolution has no bias.
  memory::desc bias() const { return has_bias ? bias_md : memory::desc(); }

  bool has_bias;
  memory::dims src_dims, w_dims, dst_dims, strides, pad;
  memory::desc src_user, dst_user, w_user, bias_md, src_any, dst_any, w_any;
  // The gradients' (the same as the tensors' at f32; at bf16 d_dst is read as bf16, the others
  // written in f32).
  memory::desc d_dst_any, d_w_any, d_src_any;
  dnnl::algorithm algo = dnnl::algorithm::convolution_direct;
};

class CpuConv2d final : public WeightedKernel {
 public:
  CpuConv2d(const Conv2dShape& s, bool bf16_operands, const dnnl::engine& engine,
            const dnnl::stream& stream)
      : shape_(s), stream_(stream), threads_(s.in_shard ? 1 : 0), bf16_(bf16_operands) {
    ThreadLimit limit(threads_);
    plan(engine);
  }

  void forward(const float* src, const float* weights, const float* bias, float* dst) override {
    ThreadLimit limit(threads_);
    fwd_src_.load(stream_, src);
    fwd_w_.load(stream_, weights);
    if (bias) bias_.set_data_handle(const_cast<float*>(bias));
    fwd_dst_.bind(dst);
    XO_DNNL_CHECK(forward_.execute(stream_, fwd_args_));
    fwd_dst_.store(stream_);
  }

  void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                float* d_weights, float* d_bias, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == shape_.need_d_src);
    ThreadLimit limit(threads_);
    const int64_t n = shape_.batch * shape_.out_channels * shape_.out_height() * shape_.out_width();
    if (shape_.activation != Activation::None) {
      const Activation act = shape_.activation;
      parallel_for(n, [&](int64_t begin, int64_t end) {
        activation_backward_inplace(act, dst + begin, d_dst + begin, end - begin);
      });
    }
    bw_src_.load(stream_, src);
    bw_d_dst_.load(stream_, d_dst);
    bw_d_w_.bind(d_weights);
    if (d_bias) d_bias_.set_data_handle(d_bias);
    XO_DNNL_CHECK(backward_weights_.execute(stream_, bw_args_));
    bw_d_w_.store(stream_);
    if (d_src) {
      if (!shared_d_dst_) bd_d_dst_.load(stream_, d_dst);
      bd_w_.load(stream_, weights);
      bd_d_src_.bind(d_src);
      XO_DNNL_CHECK(backward_data_.execute(stream_, bd_args_));
      bd_d_src_.store(stream_);
    }
  }

 private:
  // Builds the three primitives, each choosing its own layouts, and binds their memory.
  void plan(const dnnl::engine& engine) {
    const Conv2dShape& s = shape_;
    const ConvDescs d(s, bf16_ ? bf16 : f32);
    // primitive_attr copies share one handle: the forward's post-ops get an attr of their own.
    dnnl::primitive_attr attr, fwd_attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (s.activation != Activation::None) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, eltwise_algorithm(s.activation), 0.0f, 0.0f);
      fwd_attr.set_post_ops(ops);
    }
    const dnnl::convolution_forward::desc fwd_desc(dnnl::prop_kind::forward_training, d.algo,
                                                   d.src_any, d.w_any, d.bias(), d.dst_any,
                                                   d.strides, d.pad, d.pad);
    const auto fwd_pd =
        XO_DNNL_CHECK(dnnl::convolution_forward::primitive_desc(fwd_desc, fwd_attr, engine));
    forward_ = XO_DNNL_CHECK(dnnl::convolution_forward(fwd_pd));
    // The backward primitives take the forward's descriptor as a hint, without the post-ops.
    const auto hint_pd =
        XO_DNNL_CHECK(dnnl::convolution_forward::primitive_desc(fwd_desc, attr, engine));
    fwd_src_ = Staged(d.src_user, fwd_pd.src_desc(), engine);
    fwd_w_ = Staged(d.w_user, fwd_pd.weights_desc(), engine);
    fwd_dst_ = Staged(d.dst_user, fwd_pd.dst_desc(), engine);
    bias_ = memory(d.bias_md, engine, DNNL_MEMORY_NONE);
    fwd_args_ = {{DNNL_ARG_SRC, fwd_src_.memory()},
                 {DNNL_ARG_WEIGHTS, fwd_w_.memory()},
                 {DNNL_ARG_DST, fwd_dst_.memory()}};
    if (s.has_bias) fwd_args_.emplace(DNNL_ARG_BIAS, bias_);
    add_scratchpad(fwd_pd, engine, fwd_args_);

    // d_W (and d_bias) from src and the pre-activation gradient.
    const dnnl::convolution_backward_weights::desc bw_desc(d.algo, d.src_any, d.d_w_any, d.bias(),
                                                           d.d_dst_any, d.strides, d.pad, d.pad);
    const auto bw_pd = XO_DNNL_CHECK(
        dnnl::convolution_backward_weights::primitive_desc(bw_desc, attr, engine, hint_pd));
    backward_weights_ = XO_DNNL_CHECK(dnnl::convolution_backward_weights(bw_pd));
    bw_src_ = Staged(d.src_user, bw_pd.src_desc(), engine);
    bw_d_dst_ = Staged(d.dst_user, bw_pd.diff_dst_desc(), engine);
    bw_d_w_ = Staged(d.w_user, bw_pd.diff_weights_desc(), engine);
    d_bias_ = memory(d.bias_md, engine, DNNL_MEMORY_NONE);
    bw_args_ = {{DNNL_ARG_SRC, bw_src_.memory()},
                {DNNL_ARG_DIFF_DST, bw_d_dst_.memory()},
                {DNNL_ARG_DIFF_WEIGHTS, bw_d_w_.memory()}};
    if (s.has_bias) bw_args_.emplace(DNNL_ARG_DIFF_BIAS, d_bias_);
    add_scratchpad(bw_pd, engine, bw_args_);

    if (s.need_d_src) plan_backward_data(d, attr, engine, hint_pd, bw_pd.diff_dst_desc());
  }

  // d_src from d_dst and the weights; `bw_d_dst` is the layout backward weights reads d_dst in.
  void plan_backward_data(const ConvDescs& d, const dnnl::primitive_attr& attr,
                          const dnnl::engine& engine,
                          const dnnl::convolution_forward::primitive_desc& hint_pd,
                          const memory::desc& bw_d_dst) {
    const dnnl::convolution_backward_data::desc bd_desc(d.algo, d.d_src_any, d.w_any, d.d_dst_any,
                                                        d.strides, d.pad, d.pad);
    const auto bd_pd = XO_DNNL_CHECK(
        dnnl::convolution_backward_data::primitive_desc(bd_desc, attr, engine, hint_pd));
    backward_data_ = XO_DNNL_CHECK(dnnl::convolution_backward_data(bd_pd));
    // Where both backward primitives want d_dst in one layout, it is reordered once.
    shared_d_dst_ = bd_pd.diff_dst_desc() == bw_d_dst;
    if (!shared_d_dst_) bd_d_dst_ = Staged(d.dst_user, bd_pd.diff_dst_desc(), engine);
    bd_w_ = Staged(d.w_user, bd_pd.weights_desc(), engine);
    bd_d_src_ = Staged(d.src_user, bd_pd.diff_src_desc(), engine);
    bd_args_ = {{DNNL_ARG_DIFF_DST, shared_d_dst_ ? bw_d_dst_.memory() : bd_d_dst_.memory()},
                {DNNL_ARG_WEIGHTS, bd_w_.memory()},
                {DNNL_ARG_DIFF_SRC, bd_d_src_.memory()}};
    add_scratchpad(bd_pd, engine, bd_args_);
  }

  Conv2dShape shape_;
  dnnl::stream stream_;
  int threads_;
  bool bf16_;
  dnnl::convolution_forward forward_;
  dnnl::convolution_backward_weights backward_weights_;
  dnnl::convolution_backward_data backward_data_;
  Staged fwd_src_, fwd_w_, fwd_dst_, bw_src_, bw_d_dst_, bw_d_w_, bd_d_dst_, bd_w_, bd_d_src_;
  bool shared_d_dst_ = false;
  memory bias_, d_bias_;
  std::unordered_map<int, memory> fwd_args_, bw_args_, bd_args_;
};

}  // namespace

std::unique_ptr<WeightedKernel> make_conv2d(const Conv2dShape& shape, bool bf16_operands,
                                            const dnnl::engine& engine,
                                            const dnnl::stream& stream) {
  return std::make_unique<CpuConv2d>(shape, bf16_operands, engine, stream);
}

}  // namespace xo::cpu

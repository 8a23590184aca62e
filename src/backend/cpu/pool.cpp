// Pooling on the CPU, forward and backward. 2-D max pooling whose windows tile the input as loops
// of our own (CpuTiledMaxPool); other 2-D max/average pooling of NCHW tensors through oneDNN (built
// once per shape; max pooling keeps oneDNN's workspace of arg-max positions for backward);
// pooling over the steps of a sequence [N, T, F] -> [N, F] as plain loops (the arg-max step kept as
// an index per output).
#include <algorithm>
#include <cstdint>
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

// Max pooling whose windows tile the input (kernel == stride, no padding: the 2 x 2 of most CNNs),
// as loops of our own over the NCHW planes. oneDNN 2.6 pools NCHW tensors in plain C++
// (simple_nchw): on a 2-core AVX2 EPYC a third of mnist-cnn's step, 34 ms forward and 14 ms
// backward of 185 (docs/benchmarks.md, "The PyTorch peer in f32 and autocast bf16"). Each window's
// arg-max is kept as its index in the window; ties go to the first element and a NaN wins, as
// PyTorch's max_pool2d. Rows and columns past the last whole window are not read (floor, as
// out_height() says), and get no gradient.
class CpuTiledMaxPool final : public PoolKernel {
 public:
  explicit CpuTiledMaxPool(const Pool2dShape& s)
      : s_(s), arg_(s.training ? s.batch * s.channels * s.out_height() * s.out_width() : 0) {}

  static bool takes(const Pool2dShape& s) {
    return s.type == PoolType::Max && s.kernel == s.stride && s.padding == 0 && s.kernel >= 1 &&
           s.kernel * s.kernel <= 256 && s.out_height() > 0 && s.out_width() > 0;
  }

  void forward(const float* src, float* dst) override {
    const int64_t h = s_.height, w = s_.width, oh = s_.out_height(), ow = s_.out_width();
    parallel_for(
        s_.batch * s_.channels,
        [&](int64_t p0, int64_t p1) {
          for (int64_t p = p0; p < p1; ++p) {
            uint8_t* arg = arg_.empty() ? nullptr : arg_.data() + p * oh * ow;
            if (s_.kernel == 2) {
              plane2(src + p * h * w, dst + p * oh * ow, arg);
            } else {
              plane(src + p * h * w, dst + p * oh * ow, arg);
            }
          }
        },
        s_.batch * s_.channels * h * w);
  }

  void backward(const float* d_dst, float* d_src) override {
    XO_ASSERT(!arg_.empty() && "pooling kernel built for inference");
    const int64_t k = s_.kernel, h = s_.height, w = s_.width;
    const int64_t oh = s_.out_height(), ow = s_.out_width();
    parallel_for(
        s_.batch * s_.channels,
        [&](int64_t p0, int64_t p1) {
          for (int64_t p = p0; p < p1; ++p) {
            const float* g = d_dst + p * oh * ow;
            const uint8_t* arg = arg_.data() + p * oh * ow;
            float* d = d_src + p * h * w;
            for (int64_t i = 0; i < oh; ++i) {
              for (int64_t r = 0; r < k; ++r) {
                float* row = d + (i * k + r) * w;
                for (int64_t j = 0; j < ow; ++j) {
                  const int64_t at = arg[i * ow + j] - r * k;  // the arg-max's column, if in row r
                  for (int64_t c = 0; c < k; ++c) row[j * k + c] = c == at ? g[i * ow + j] : 0.0f;
                }
                std::fill(row + ow * k, row + w, 0.0f);
              }
            }
            std::fill(d + oh * k * w, d + h * w, 0.0f);
          }
        },
        s_.batch * s_.channels * h * w);
  }

 private:
  // One plane's 2 x 2 windows: branch-free, so that the compiler vectorises along a row.
  void plane2(const float* x, float* y, uint8_t* arg) const {
    const int64_t w = s_.width, oh = s_.out_height(), ow = s_.out_width();
    for (int64_t i = 0; i < oh; ++i) {
      const float* a = x + 2 * i * w;
      const float* b = a + w;
      float* out = y + i * ow;
      uint8_t* at = arg ? arg + i * ow : nullptr;
      for (int64_t j = 0; j < ow; ++j) {
        float m = a[2 * j];
        int index = 0;
        const float v[3] = {a[2 * j + 1], b[2 * j], b[2 * j + 1]};
        for (int e = 0; e < 3; ++e) {
          const bool take = v[e] > m || v[e] != v[e];  // greater, or NaN
          m = take ? v[e] : m;
          index = take ? e + 1 : index;
        }
        out[j] = m;
        if (at) at[j] = static_cast<uint8_t>(index);
      }
    }
  }

  void plane(const float* x, float* y, uint8_t* arg) const {
    const int64_t k = s_.kernel, w = s_.width, oh = s_.out_height(), ow = s_.out_width();
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const float* window = x + i * k * w + j * k;
        float m = window[0];
        int index = 0;
        for (int64_t r = 0; r < k; ++r) {
          for (int64_t c = 0; c < k; ++c) {
            const float v = window[r * w + c];
            if (v > m || v != v) {
              m = v;
              index = static_cast<int>(r * k + c);
            }
          }
        }
        y[i * ow + j] = m;
        if (arg) arg[i * ow + j] = static_cast<uint8_t>(index);
      }
    }
  }

  Pool2dShape s_;
  std::vector<uint8_t> arg_;  // [batch, channels, out_height, out_width]: r * kernel + c
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
  if (CpuTiledMaxPool::takes(shape)) return std::make_unique<CpuTiledMaxPool>(shape);
  return std::make_unique<CpuPool2d>(shape, engine, stream);
}

std::unique_ptr<PoolKernel> make_sequence_pool(const SequencePoolShape& shape) {
  return std::make_unique<CpuSequencePool>(shape);
}

}  // namespace xo::cpu

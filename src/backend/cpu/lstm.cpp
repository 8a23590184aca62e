// LSTM on the CPU (PyTorch's nn.LSTM, batch-first, zero initial states), forward and backward.
// Time-major inside: each layer runs one big matmul for the input projection of every step
// (X W_ih^T), then per step one small matmul that adds h_{t-1} W_hh^T (a oneDNN sum post-op) and
// one fused pass over the gates that adds b_ih + b_hh. Backward runs the steps in reverse with one
// small matmul per step (dh_{t-1} = dgates_t W_hh), then gets the weight gradients and the input
// gradient as three big matmuls over all steps at once. Every matmul is built once, here. Fused
// models: the per-step matmuls of every model one batched product per step (up to 64 hidden
// units). At bf16 every product reads bf16 copies (the weights once per forward, each step's h as
// it is made, the gate gradients as they are made, the input once) and accumulates in f32; the
// gates, the cell and every gradient stay f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/exp_math.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Row b's four blocks of gates (i, f, g, o) in a [rows, 4H] tensor.
template <typename T>
struct GateRow {
  T *i, *f, *g, *o;
};
template <typename T>
GateRow<T> gate_row(T* gates, int64_t b, int64_t H) {
  T* row = gates + b * 4 * H;
  return {row, row + H, row + 2 * H, row + 3 * H};
}

// One step's gates of `rows` rows: g [rows, 4H] holds the pre-activations i, f, g, o less their
// bias [4H], and is overwritten with the gate values; c = f c_prev + i g and h = o tanh(c), each
// [rows, H].
void gates_forward(int64_t rows, int64_t H, float* g, const float* bias, const float* c_prev,
                   float* c, float* h) {
  const GateRow<const float> bq = gate_row(bias, 0, H);
  for (int64_t b = 0; b < rows; ++b) {
    const GateRow<float> q = gate_row(g, b, H);
    const float* cp = c_prev + b * H;
    float* cb = c + b * H;
    float* hb = h + b * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const float i = sigmoid_exp(q.i[j] + bq.i[j]), f = sigmoid_exp(q.f[j] + bq.f[j]);
      const float cell = tanh_exp(q.g[j] + bq.g[j]), o = sigmoid_exp(q.o[j] + bq.o[j]);
      q.i[j] = i;
      q.f[j] = f;
      q.g[j] = cell;
      q.o[j] = o;
      const float cv = f * cp[j] + i * cell;
      cb[j] = cv;
      hb[j] = o * tanh_exp(cv);
    }
  }
}

// One step backward for `rows` rows: dg [rows, 4H] = the gradient of the pre-activations from
// the gate values g, the cell states c_prev and c, and d_h (from above) + dh_next (from the next
// step); dc_next carries the cell's gradient to the step before.
void gates_backward(int64_t rows, int64_t H, const float* g, const float* c_prev, const float* c,
                    const float* d_h, const float* dh_next, float* dc_next, float* dg) {
  for (int64_t b = 0; b < rows; ++b) {
    const GateRow<const float> q = gate_row(g, b, H);
    const GateRow<float> d = gate_row(dg, b, H);
    const float* dhn = dh_next + b * H;
    float* dcn = dc_next + b * H;
#pragma omp simd
    for (int64_t j = 0; j < H; ++j) {
      const float dh = d_h[b * H + j] + dhn[j];
      const float tc = tanh_exp(c[b * H + j]);
      const float i = q.i[j], f = q.f[j], cell = q.g[j], o = q.o[j];
      const float dc = dcn[j] + dh * o * (1.0f - tc * tc);
      d.o[j] = dh * tc * o * (1.0f - o);
      d.i[j] = dc * cell * i * (1.0f - i);
      d.f[j] = dc * c_prev[b * H + j] * f * (1.0f - f);
      d.g[j] = dc * i * (1.0f - cell * cell);
      dcn[j] = dc * f;
    }
  }
}

// [B, T, F] -> [T, B, F] and back.
void to_time_major(const float* src, float* dst, int64_t B, int64_t T, int64_t F) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(dst + (t * B + b) * F, src + (b * T + t) * F, sizeof(float) * F);
    }
  }
}
void from_time_major(const float* src, float* dst, int64_t B, int64_t T, int64_t F) {
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(dst + (b * T + t) * F, src + (t * B + b) * F, sizeof(float) * F);
    }
  }
}

// Row order fixed: the same sums for any thread count.
void column_sums(const float* m, int64_t rows, int64_t cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
  }
}

dnnl::primitive_attr accumulating() {
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  ops.append_sum(1.0f);
  attr.set_post_ops(ops);
  return attr;
}

// One model's LSTM (models 1, model_stride 0), or the same LSTM of `models` models at once (fused
// models, each model's weights model_stride floats after the last's). A model's tensors lie model
// after model, each time-major inside ([models, T, B, F]): a step's rows of all models are then
// one strided batch, and a model's rows of all steps one matrix. Fused, the per-step products of
// every model are one batched product per step (for hidden sizes up to 64: kBatchedStepWeights);
// the products over all steps are one per model (ModelByModel). b_ih + b_hh is added in the pass
// over the gates (x W_ih^T + h W_hh^T + b): oneDNN 2.6 adds a bias of its own per batch entry only
// in its reference kernel, and so alone and fused add in the same order.
class CpuLstm final : public LstmKernel {
 public:
  // bf16 (bf16_weights set): the products read bf16 copies of the input, h, the gate gradients
  // (made per step) and the weights (their optimizer's copy, else made in the forward).
  CpuLstm(const LstmShape& s, const Bf16Weights* bf16_weights, const dnnl::engine& engine,
          const dnnl::stream& stream)
      : s_(s),
        stream_(stream),
        steps_batched_(s.model_stride > 0 && 4 * s.hidden * s.hidden <= kBatchedStepWeights),
        bf16_(bf16_weights != nullptr),
        kept_(bf16_weights) {
    using dims = memory::dims;
    const memory::dim K = s.models, B = s.batch, T = s.steps, H = s.hidden, G = 4 * s.hidden;
    const memory::dim W = s.model_stride, hs = (T + 1) * B * H;
    XO_ASSERT(K >= 1 && (K == 1 || W > 0));
    // A step's tensors of every model are [K, rows, cols] with their strides (a model's, a
    // row's, a column's); a model's whole sequence is [T * B, cols], one product per model.
    const auto op = bf16_ ? bf16 : f32;  // the products' operands
    auto one = [](memory::dim rows, memory::dim cols, memory::dim row, memory::dim col,
                  memory::data_type type = f32) {
      return memory::desc({rows, cols}, type, dims{row, col});
    };
    const bool one_thread = s.in_shard;
    const memory::desc step_gates({K, B, G}, f32, dims{T * B * G, G, 1});
    const memory::desc step_h({K, B, H}, op, dims{hs, H, 1});
    const memory::desc next_h({K, B, H}, f32, dims{B * H, H, 1});
    const memory::desc gates_rows = one(T * B, G, G, 1), gates_t = one(G, T * B, 1, G, op);
    const memory::desc d_gates_rows = one(T * B, G, G, 1, op);
    for (int64_t k = 0; k < s.layers; ++k) {
      const memory::dim I = k == 0 ? s.input : H;
      // The layer's input rows: the time-major copy of src, or the layer below's h_1 ... h_T.
      const memory::desc x_rows = one(T * B, I, I, 1, op);
      const memory::dim x_model = k == 0 ? T * B * I : hs;
      Layer l;
      if (steps_batched_) {
        l.recur = BoundMatmul(step_h, memory::desc({K, H, G}, op, dims{W, 1, H}), nullptr,
                              step_gates, accumulating(), engine, one_thread);
        l.d_h_prev =
            BoundMatmul(as_type(step_gates, op), memory::desc({K, G, H}, op, dims{W, H, 1}),
                        nullptr, next_h, {}, engine, one_thread);
      } else {
        l.recur = BoundMatmul(one(B, H, H, 1, op), one(H, G, 1, H, op), nullptr, one(B, G, G, 1),
                              accumulating(), engine, one_thread);
        l.d_h_prev = BoundMatmul(one(B, G, G, 1, op), one(G, H, H, 1, op), nullptr, one(B, H, H, 1),
                                 {}, engine, one_thread);
      }
      l.project = {
          BoundMatmul(x_rows, one(I, G, 1, I, op), nullptr, gates_rows, {}, engine, one_thread),
          x_model, W, T * B * G};
      l.d_w_hh = {BoundMatmul(gates_t, one(T * B, H, H, 1, op), nullptr, one(G, H, H, 1), {},
                              engine, one_thread),
                  T * B * G, hs, W};
      l.d_w_ih = {BoundMatmul(gates_t, x_rows, nullptr, one(G, I, I, 1), {}, engine, one_thread),
                  T * B * G, x_model, W};
      if (k > 0 || s.need_d_src) {
        // Into d_h_below_ or d_x_tm_, both [K, T, B, I] dense.
        l.d_x = {BoundMatmul(d_gates_rows, one(G, I, I, 1, op), nullptr, as_type(x_rows, f32), {},
                             engine, one_thread),
                 T * B * G, W, T * B * I};
      }
      size_layer(l, I);
      layers_.push_back(std::move(l));
    }
    size_buffers();
  }

  void forward(const float* src, const LstmLayerParams* params, float* dst) override {
    const int64_t K = s_.models, B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const int64_t W = s_.model_stride, hs = (T + 1) * B * H, in = s_.input;
    for (int64_t n = 0; n < K; ++n) {
      to_time_major(src + n * B * T * in, x_tm_.data() + n * T * B * in, B, T, in);
    }
    const float* x = x_tm_.data();
    const uint16_t* x_b = bf16_ ? x_tm_b_.from(x) : nullptr;
    for (int64_t k = 0; k < s_.layers; ++k) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      // The products' operands: the weights and h (h's copy made step by step).
      const void* w_ih = p.weight_ih;
      const void* w_hh = p.weight_hh;
      if (bf16_) {
        w_ih = l.w_ih_b.weights(p.weight_ih, *kept_, K, W);
        w_hh = l.w_hh_b.weights(p.weight_hh, *kept_, K, W);
      }
      for (int64_t n = 0; n < K; ++n) {
        const float* b_ih = p.bias_ih + n * W;
        const float* b_hh = p.bias_hh + n * W;
        float* bias = l.bias.data() + n * G;
        for (int64_t j = 0; j < G; ++j) bias[j] = b_ih[j] + b_hh[j];
        std::fill_n(l.c.data() + n * hs, B * H, 0.0f);
        std::fill_n(l.h.data() + n * hs, B * H, 0.0f);
        if (bf16_) std::fill_n(l.h_b.data() + n * hs, B * H, uint16_t{0});
      }
      const void* x_in = bf16_ ? static_cast<const void*>(x_b) : x;
      l.project.run(stream_, K, x_in, w_ih, l.gates.data(), bf16_);
      auto gates = [&](int64_t n, int64_t t) {  // model n's step t, its h_{t-1} W_hh^T added
        float* c = l.c.data() + n * hs;
        const int64_t h_next = n * hs + (t + 1) * B * H;
        gates_forward(B, H, l.gates.data() + (n * T + t) * B * G, l.bias.data() + n * G,
                      c + t * B * H, c + (t + 1) * B * H, l.h.data() + h_next);
        if (bf16_) to_bf16(l.h.data() + h_next, l.h_b.data() + h_next, B * H);
      };
      if (steps_batched_) {
        for (int64_t t = 0; t < T; ++t) {
          l.recur.run(stream_, h_operand(l, t * B * H), w_hh, nullptr, l.gates.data() + t * B * G);
          for (int64_t n = 0; n < K; ++n) gates(n, t);
        }
      } else {
        for (int64_t n = 0; n < K; ++n) {
          for (int64_t t = 0; t < T; ++t) {
            l.recur.run(stream_, h_operand(l, n * hs + t * B * H), offset(w_hh, n * W), nullptr,
                        l.gates.data() + (n * T + t) * B * G);
            gates(n, t);
          }
        }
      }
      x = l.h.data() + B * H;  // the next layer reads this layer's h_1 ... h_T
      if (bf16_) x_b = l.h_b.data() + B * H;
    }
    const Layer& top = layers_.back();
    for (int64_t n = 0; n < K; ++n) {
      const float* h = top.h.data() + n * hs;
      if (s_.sequence) {
        from_time_major(h + B * H, dst + n * B * T * H, B, T, H);
      } else {
        std::memcpy(dst + n * B * H, h + T * B * H, sizeof(float) * B * H);
      }
    }
  }

  void backward(const float* src, const LstmLayerParams* params, const float* d_dst,
                const LstmLayerGrads* grads, float* d_src) override {
    (void)src;  // the forward kept its time-major copy
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    const int64_t K = s_.models, B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const int64_t W = s_.model_stride, hs = (T + 1) * B * H, in = s_.input;
    gradient_from_above(d_dst);
    for (int64_t k = s_.layers; k-- > 0;) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      const float* d_h_above = k == s_.layers - 1 ? d_h_.data() : d_h_below_.data();
      std::fill(d_h_next_.begin(), d_h_next_.end(), 0.0f);
      std::fill(d_c_next_.begin(), d_c_next_.end(), 0.0f);
      // The products' operands: the weights as the forward left them, the gate gradients (copied
      // step by step at bf16), h and the layer's input.
      const void* w_ih = bf16_ ? static_cast<const void*>(l.w_ih_b.last()) : p.weight_ih;
      const void* w_hh = bf16_ ? static_cast<const void*>(l.w_hh_b.last()) : p.weight_hh;
      const void* d_gates = bf16_ ? static_cast<const void*>(d_gates_b_.data()) : d_gates_.data();
      auto gates = [&](int64_t n, int64_t t) {  // model n's step t
        const float* c = l.c.data() + n * hs;
        const int64_t step = (n * T + t) * B;  // row of model n's step t in [K, T, B, ...]
        gates_backward(B, H, l.gates.data() + step * G, c + t * B * H, c + (t + 1) * B * H,
                       d_h_above + step * H, d_h_next_.data() + n * B * H,
                       d_c_next_.data() + n * B * H, d_gates_.data() + step * G);
        if (bf16_) to_bf16(d_gates_.data() + step * G, d_gates_b_.data() + step * G, B * G);
      };
      if (steps_batched_) {
        for (int64_t t = T; t-- > 0;) {
          for (int64_t n = 0; n < K; ++n) gates(n, t);
          if (t > 0) {
            l.d_h_prev.run(stream_, offset(d_gates, t * B * G), w_hh, nullptr, d_h_next_.data());
          }
        }
      } else {
        for (int64_t n = 0; n < K; ++n) {
          for (int64_t t = T; t-- > 0;) {
            gates(n, t);
            if (t > 0) {
              l.d_h_prev.run(stream_, offset(d_gates, (n * T + t) * B * G), offset(w_hh, n * W),
                             nullptr, d_h_next_.data() + n * B * H);
            }
          }
        }
      }
      const LstmLayerGrads& gr = grads[k];
      const void* x = k == 0 ? (bf16_ ? static_cast<const void*>(x_tm_b_.data()) : x_tm_.data())
                             : h_operand(layers_[k - 1], B * H);
      l.d_w_hh.run(stream_, K, d_gates, h_operand(l, 0), gr.weight_hh, bf16_);
      l.d_w_ih.run(stream_, K, d_gates, x, gr.weight_ih, bf16_);
      for (int64_t n = 0; n < K; ++n) {
        column_sums(d_gates_.data() + n * T * B * G, T * B, G, gr.bias_ih + n * W);
        std::memcpy(gr.bias_hh + n * W, gr.bias_ih + n * W, sizeof(float) * G);
      }
      if (k > 0) {
        l.d_x.run(stream_, K, d_gates, w_ih, d_h_below_.data(), bf16_);
      } else if (d_src) {
        l.d_x.run(stream_, K, d_gates, w_ih, d_x_tm_.data(), bf16_);
        for (int64_t n = 0; n < K; ++n) {
          from_time_major(d_x_tm_.data() + n * T * B * in, d_src + n * B * T * in, B, T, in);
        }
      }
    }
  }

 private:
  // The per-step products are batched over the models (a step of every model, then the next)
  // where a model's W_hh is at most this many floats (64 KiB: hidden sizes up to 64); larger ones
  // run model by model, each model's steps one after another, as alone: the step-major order
  // cycled 16 imdb-lstm models' W_hh (256 KiB each) through the cache at every step, slower than
  // model by model, where 16 models of a 32-wide LSTM ran faster batched (docs/benchmarks.md,
  // "Vectors as wide as the CPU's, and the fused LSTM"). Either way a model's arithmetic is the
  // same in any group.
  static constexpr int64_t kBatchedStepWeights = 16 * 1024;

  // An operand `elements` past `p`, in the products' type (f32, or bf16 bits at bf16).
  const void* offset(const void* p, int64_t elements) const {
    if (bf16_) return static_cast<const uint16_t*>(p) + elements;
    return static_cast<const float*>(p) + elements;
  }
  // A product over a model's whole sequence, one per model: each model's operands `a`, `b` and
  // `d` elements after the last's (as large as these are, the per-product set-up is negligible).
  struct ModelByModel {
    BoundMatmul matmul;
    int64_t a = 0, b = 0, d = 0;
    void run(const dnnl::stream& stream, int64_t models, const void* src, const void* weights,
             float* dst, bool bf16_operands) {
      const int64_t size = bf16_operands ? sizeof(uint16_t) : sizeof(float);
      for (int64_t n = 0; n < models; ++n) {
        matmul.run(stream, static_cast<const char*>(src) + n * a * size,
                   static_cast<const char*>(weights) + n * b * size, nullptr, dst + n * d);
      }
    }
  };
  struct Layer {
    BoundMatmul recur, d_h_prev;  // a step of every model (steps_batched_), or of one
    ModelByModel project, d_w_hh, d_w_ih, d_x;
    std::vector<float> gates;      // [K, T, B, 4H]: pre-activations, then the gate values
    std::vector<float> c, h;       // [K, T + 1, B, H]: step 0 is the zero initial state
    std::vector<float> bias;       // [K, 4H]: each model's b_ih + b_hh
    Bf16Copy h_b, w_ih_b, w_hh_b;  // bf16: h's copy, and the weights' (where not kept)
  };
  // h from `elements` on, as the products read it (its bf16 copy at bf16).
  const void* h_operand(const Layer& l, int64_t elements) const {
    if (bf16_) return l.h_b.data() + elements;
    return l.h.data() + elements;
  }

  // d_h_: the gradient arriving at every step's h from above, [K, T, B, H], from d_dst (every
  // step's, or the last step's).
  void gradient_from_above(const float* d_dst) {
    const int64_t K = s_.models, B = s_.batch, T = s_.steps, H = s_.hidden;
    if (!s_.sequence) std::fill(d_h_.begin(), d_h_.end(), 0.0f);
    for (int64_t n = 0; n < K; ++n) {
      float* d_h = d_h_.data() + n * T * B * H;
      if (s_.sequence) {
        to_time_major(d_dst + n * B * T * H, d_h, B, T, H);
      } else {
        std::memcpy(d_h + (T - 1) * B * H, d_dst + n * B * H, sizeof(float) * B * H);
      }
    }
  }

  // A layer's buffers, of `I` inputs, sized once.
  void size_layer(Layer& l, int64_t I) const {
    const int64_t K = s_.models, B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const int64_t W = s_.model_stride, hs = (T + 1) * B * H;
    if (bf16_) {  // each model's weights spanned, the others' between them along
      l.h_b = Bf16Copy(K * hs);
      l.w_ih_b = Bf16Copy((K - 1) * W + G * I);
      l.w_hh_b = Bf16Copy((K - 1) * W + G * H);
    }
    l.gates.resize(K * T * B * G);
    l.c.resize(K * hs);
    l.h.resize(K * hs);
    l.bias.resize(K * G);
  }
  // The kernel's buffers across layers, sized once.
  void size_buffers() {
    const int64_t K = s_.models, B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    x_tm_.resize(K * T * B * s_.input);
    if (s_.need_d_src) d_x_tm_.resize(K * T * B * s_.input);
    d_gates_.resize(K * T * B * G);
    if (bf16_) {
      x_tm_b_ = Bf16Copy(K * T * B * s_.input);
      d_gates_b_ = Bf16Copy(K * T * B * G);
    }
    d_h_.resize(K * T * B * H);
    d_h_below_.resize(s_.layers > 1 ? K * T * B * H : 0);
    d_h_next_.resize(K * B * H);
    d_c_next_.resize(K * B * H);
  }

  LstmShape s_;
  dnnl::stream stream_;
  bool steps_batched_;       // kBatchedStepWeights
  bool bf16_;                // the products in bf16
  const Bf16Weights* kept_;  // bf16: the weights' copies the optimizers keep
  std::vector<Layer> layers_;
  std::vector<float> x_tm_, d_x_tm_, d_gates_, d_h_, d_h_below_, d_h_next_, d_c_next_;
  Bf16Copy x_tm_b_, d_gates_b_;  // bf16: the input's copy and the gate gradients' copy
};

}  // namespace

std::unique_ptr<LstmKernel> make_lstm(const LstmShape& shape, const Bf16Weights* bf16_weights,
                                      const dnnl::engine& engine, const dnnl::stream& stream) {
  return std::make_unique<CpuLstm>(shape, bf16_weights, engine, stream);
}

}  // namespace xo::cpu

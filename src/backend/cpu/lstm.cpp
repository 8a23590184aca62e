// LSTM on the CPU (PyTorch's nn.LSTM, batch-first, zero initial states), forward and backward.
// Time-major inside: each layer runs one big matmul for the input projection of every step
// (X W_ih^T + b_ih + b_hh), then per step one small matmul that adds h_{t-1} W_hh^T (a oneDNN sum
// post-op) and one fused pass over the gates. Backward runs the steps in reverse with one small
// matmul per step (dh_{t-1} = dgates_t W_hh), then gets the weight gradients and the input
// gradient as three big matmuls over all steps at once. Every matmul is built once, here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"

namespace xo::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float tanh_via_exp(float x) { return 2.0f / (1.0f + std::exp(-2.0f * x)) - 1.0f; }

class CpuLstm final : public LstmKernel {
 public:
  CpuLstm(const LstmShape& s, const dnnl::engine& engine, const dnnl::stream& stream)
      : s_(s), stream_(stream) {
    const memory::dim B = s.batch, T = s.steps, H = s.hidden, G = 4 * s.hidden;
    const memory::desc rows_g({T * B, G}, f32, tag::ab);
    const memory::desc step_g({B, G}, f32, tag::ab);
    const memory::desc step_h({B, H}, f32, tag::ab);
    const memory::desc bias_md({1, G}, f32, tag::ab);
    const memory::desc w_hh_t({H, G}, f32, tag::ba);  // W_hh [G, H] read as W_hh^T
    const memory::desc w_hh({G, H}, f32, tag::ab);
    const memory::desc d_gates_t({G, T * B}, f32, tag::ba);
    const memory::desc rows_h({T * B, H}, f32, tag::ab);
    dnnl::primitive_attr accumulate;
    {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      accumulate.set_post_ops(ops);
    }
    const bool one_thread = s.in_shard;
    for (int64_t k = 0; k < s.layers; ++k) {
      const memory::dim I = k == 0 ? s.input : H;
      Layer l;
      l.input = I;
      const memory::desc rows_i({T * B, I}, f32, tag::ab);
      l.project = BoundMatmul(rows_i, memory::desc({I, G}, f32, tag::ba), &bias_md, rows_g, {},
                              engine, one_thread);
      l.recur = BoundMatmul(step_h, w_hh_t, nullptr, step_g, accumulate, engine, one_thread);
      l.d_h_prev = BoundMatmul(step_g, w_hh, nullptr, step_h, {}, engine, one_thread);
      l.d_w_hh = BoundMatmul(d_gates_t, rows_h, nullptr, memory::desc({G, H}, f32, tag::ab), {},
                             engine, one_thread);
      l.d_w_ih = BoundMatmul(d_gates_t, rows_i, nullptr, memory::desc({G, I}, f32, tag::ab), {},
                             engine, one_thread);
      if (k > 0 || s.need_d_src) {
        l.d_x = BoundMatmul(rows_g, memory::desc({G, I}, f32, tag::ab), nullptr, rows_i, {}, engine,
                            one_thread);
      }
      l.gates.resize(T * B * G);
      l.c.resize((T + 1) * B * H);
      l.h.resize((T + 1) * B * H);
      l.bias.resize(G);
      layers_.push_back(std::move(l));
    }
    x_tm_.resize(T * B * s.input);
    if (s.need_d_src) d_x_tm_.resize(T * B * s.input);
    d_gates_.resize(T * B * G);
    d_h_.resize(T * B * H);
    d_h_below_.resize(s.layers > 1 ? T * B * H : 0);
    d_h_next_.resize(B * H);
    d_c_next_.resize(B * H);
  }

  void forward(const float* src, const LstmLayerParams* params, float* dst) override {
    const int64_t B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    to_time_major(src, x_tm_.data(), s_.input);
    const float* x = x_tm_.data();
    for (int64_t k = 0; k < s_.layers; ++k) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      for (int64_t j = 0; j < G; ++j) l.bias[j] = p.bias_ih[j] + p.bias_hh[j];
      l.project.run(stream_, x, p.weight_ih, l.bias.data(), l.gates.data());
      std::fill(l.c.begin(), l.c.begin() + B * H, 0.0f);
      std::fill(l.h.begin(), l.h.begin() + B * H, 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        float* g = l.gates.data() + t * B * G;
        l.recur.run(stream_, l.h.data() + t * B * H, p.weight_hh, nullptr, g);
        const float* c_prev = l.c.data() + t * B * H;
        float* c = l.c.data() + (t + 1) * B * H;
        float* h = l.h.data() + (t + 1) * B * H;
        for (int64_t b = 0; b < B; ++b) {
          float* gi = g + b * G;
          float* gf = gi + H;
          float* gg = gi + 2 * H;
          float* go = gi + 3 * H;
          const float* cp = c_prev + b * H;
          float* cb = c + b * H;
          float* hb = h + b * H;
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const float i = sigmoid(gi[j]), f = sigmoid(gf[j]), cell = tanh_via_exp(gg[j]);
            const float o = sigmoid(go[j]);
            gi[j] = i;
            gf[j] = f;
            gg[j] = cell;
            go[j] = o;
            const float cv = f * cp[j] + i * cell;
            cb[j] = cv;
            hb[j] = o * tanh_via_exp(cv);
          }
        }
      }
      x = l.h.data() + B * H;  // the next layer reads this layer's h_1 ... h_T
    }
    const Layer& top = layers_.back();
    if (s_.sequence) {
      from_time_major(top.h.data() + B * H, dst, H);
    } else {
      std::memcpy(dst, top.h.data() + T * B * H, sizeof(float) * B * H);
    }
  }

  void backward(const float* src, const LstmLayerParams* params, const float* d_dst,
                const LstmLayerGrads* grads, float* d_src) override {
    (void)src;  // the forward kept its time-major copy
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    const int64_t B = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    // d_h_: the gradient arriving at every step's h from above, time-major [T, B, H].
    if (s_.sequence) {
      to_time_major(d_dst, d_h_.data(), H);
    } else {
      std::fill(d_h_.begin(), d_h_.end(), 0.0f);
      std::memcpy(d_h_.data() + (T - 1) * B * H, d_dst, sizeof(float) * B * H);
    }
    for (int64_t k = s_.layers; k-- > 0;) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      const float* d_h_above = k == s_.layers - 1 ? d_h_.data() : d_h_below_.data();
      std::fill(d_h_next_.begin(), d_h_next_.end(), 0.0f);
      std::fill(d_c_next_.begin(), d_c_next_.end(), 0.0f);
      for (int64_t t = T; t-- > 0;) {
        const float* g = l.gates.data() + t * B * G;
        const float* c_prev = l.c.data() + t * B * H;
        const float* c = l.c.data() + (t + 1) * B * H;
        const float* d_h = d_h_above + t * B * H;
        float* dg = d_gates_.data() + t * B * G;
        for (int64_t b = 0; b < B; ++b) {
          const float* gi = g + b * G;
          const float* gf = gi + H;
          const float* gg = gi + 2 * H;
          const float* go = gi + 3 * H;
          float* di = dg + b * G;
          float* df = di + H;
          float* dgg = di + 2 * H;
          float* d_o = di + 3 * H;
          float* dh_next = d_h_next_.data() + b * H;
          float* dc_next = d_c_next_.data() + b * H;
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            const float dh = d_h[b * H + j] + dh_next[j];
            const float tc = tanh_via_exp(c[b * H + j]);
            const float i = gi[j], f = gf[j], cell = gg[j], o = go[j];
            const float dc = dc_next[j] + dh * o * (1.0f - tc * tc);
            d_o[j] = dh * tc * o * (1.0f - o);
            di[j] = dc * cell * i * (1.0f - i);
            df[j] = dc * c_prev[b * H + j] * f * (1.0f - f);
            dgg[j] = dc * i * (1.0f - cell * cell);
            dc_next[j] = dc * f;
          }
        }
        if (t > 0) l.d_h_prev.run(stream_, dg, p.weight_hh, nullptr, d_h_next_.data());
      }
      const LstmLayerGrads& gr = grads[k];
      const float* x = k == 0 ? x_tm_.data() : layers_[k - 1].h.data() + B * H;
      l.d_w_hh.run(stream_, d_gates_.data(), l.h.data(), nullptr, gr.weight_hh);
      l.d_w_ih.run(stream_, d_gates_.data(), x, nullptr, gr.weight_ih);
      column_sums(d_gates_.data(), T * B, G, gr.bias_ih);
      std::memcpy(gr.bias_hh, gr.bias_ih, sizeof(float) * G);
      if (k > 0) {
        l.d_x.run(stream_, d_gates_.data(), p.weight_ih, nullptr, d_h_below_.data());
      } else if (d_src) {
        l.d_x.run(stream_, d_gates_.data(), p.weight_ih, nullptr, d_x_tm_.data());
        from_time_major(d_x_tm_.data(), d_src, s_.input);
      }
    }
  }

 private:
  struct Layer {
    int64_t input = 0;
    BoundMatmul project, recur, d_h_prev, d_w_hh, d_w_ih, d_x;
    std::vector<float> gates;  // [T, B, 4H]: pre-activations, then the gate values
    std::vector<float> c, h;   // [T + 1, B, H]: step 0 is the zero initial state
    std::vector<float> bias;   // b_ih + b_hh
  };

  // [B, T, F] -> [T, B, F] and back.
  void to_time_major(const float* src, float* dst, int64_t f) const {
    for (int64_t b = 0; b < s_.batch; ++b) {
      for (int64_t t = 0; t < s_.steps; ++t) {
        std::memcpy(dst + (t * s_.batch + b) * f, src + (b * s_.steps + t) * f, sizeof(float) * f);
      }
    }
  }
  void from_time_major(const float* src, float* dst, int64_t f) const {
    for (int64_t b = 0; b < s_.batch; ++b) {
      for (int64_t t = 0; t < s_.steps; ++t) {
        std::memcpy(dst + (b * s_.steps + t) * f, src + (t * s_.batch + b) * f, sizeof(float) * f);
      }
    }
  }
  // Row order fixed: the same sums for any thread count.
  static void column_sums(const float* m, int64_t rows, int64_t cols, float* out) {
    std::fill(out, out + cols, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
    }
  }

  LstmShape s_;
  dnnl::stream stream_;
  std::vector<Layer> layers_;
  std::vector<float> x_tm_, d_x_tm_, d_gates_, d_h_, d_h_below_, d_h_next_, d_c_next_;
};

}  // namespace

std::unique_ptr<LstmKernel> make_lstm(const LstmShape& shape, const dnnl::engine& engine,
                                      const dnnl::stream& stream) {
  return std::make_unique<CpuLstm>(shape, engine, stream);
}

}  // namespace xo::cpu

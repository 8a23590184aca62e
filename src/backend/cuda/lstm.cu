// LSTM on the GPU (PyTorch's nn.LSTM, batch-first, zero initial states; gates i, f, g, o), forward
// and backward, with the CPU's algorithm (cpu/lstm.cpp) and formulas, every matmul a planned
// cuBLASLt Matmul (matmul.h) and the element-wise work in two fused kernels.
//
// Layout: batch-major throughout, as the tensors come: per layer gates [N, T, 4H], c and h
// [N, T, H] (h_t at step t; the zero initial state is not stored, step 0 simply has no recurrent
// term). One step is then a strided view (row stride T*4H or T*H) that the matmuls read and write
// in place, layer 0 reads src as it is, the next layer reads h as its packed [N*T, H] input,
// d_src comes out of its matmul already batch-first, and nothing is transposed.
//
// Forward, per layer:
//   gates [N*T, 4H]  = X [N*T, in] W_ih^T                      one matmul over all steps
//   per step t > 0:  gates_t [N, 4H] += h_{t-1} W_hh^T          strided views, accumulated
//   per step t:      cell kernel: + b_ih + b_hh, the gate nonlinearities (written back over the
//                    pre-activations, kept for backward), c_t, h_t
// then dst is the top layer's h (sequence: one copy; else the last step: a 2-D copy).
//
// Backward, per layer from the top, steps in reverse:
//   gate kernel: d_gates_t from dh = d_h_above_t + dh_next and the carried dc (in place, [N, H])
//   t > 0:       dh_next [N, H] = d_gates_t W_hh                (overwritten, as the CPU)
// then, over all steps at once:
//   d_x [N*T, in] = d_gates W_ih   (d_src for layer 0, else the layer below's d_h_above)
//   d_W_ih        = d_gates^T X
//   d_b_ih = d_b_hh = column sums of d_gates                    (deterministic kernel)
//   d_W_hh        = sum_t d_gates_t^T h_{t-1}: one matmul over the views shifted by one row,
//                   d_gates rows 1.. against h rows 0.. (k = N*T - 1). Row r pairs d_gates of
//                   (n, t+1) with h of (n, t), as wanted, except where a sample ends: there
//                   it pairs d_gates of (n+1, 0) with h of (n, T-1). The d_gates_0 rows are zeroed
//                   first (one 2-D memset; d_gates_0 has no h_{-1} term and nothing later reads
//                   them), so the stray pairs add exactly zero.
//
// Arithmetic: f32, the CPU's formulas and operation order within each element; sigmoid is
// 1 / (1 + expf(-x)) and tanh is tanhf (the CPU's exp-based tanh agrees with it to 2e-7
// absolute). Two orders differ from the CPU's, within f32 tolerance: the biases are added in the
// cell kernel ((x W_ih^T + h W_hh^T) + (b_ih + b_hh)) rather than in the projection, and the
// sums inside the matmuls and the bias column sums run in their own (deterministic) orders.
//
// Matmuls are planned at construction, one per distinct shape and stride (layers above the first
// share theirs; the per-step ones are reused for every step with new pointers). All buffers are
// allocated at construction; forward and backward only queue work on be.stream() (capturable).
#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/matmul.h"

namespace xo::cuda {
namespace {

// Column tile of the bias-gradient kernel: 32 columns (one warp, coalesced rows) by 8 row lanes.
constexpr int kColumnTile = 32;
constexpr int kRowLanes = kThreads / kColumnTile;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// One step of the forward cell for every (sample, unit). gates points at step t of [N, T, 4H]
// (row stride g_ld) and holds x W_ih^T + h_{t-1} W_hh^T; it gets the gate values (i, f, g, o)
// back, which backward needs. c_prev is null at t = 0 (the zero initial state). c, h, c_prev
// point at step t (or t - 1) of [N, T, H] with row stride s_ld. Each thread reads and writes only
// its own four gate elements, so in place is safe.
__global__ void cell_forward_kernel(float* gates, int64_t g_ld, const float* bias_ih,
                                    const float* bias_hh, const float* c_prev, float* c, float* h,
                                    int64_t s_ld, int64_t batch, int64_t hidden) {
  const int64_t n_all = batch * hidden;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n_all;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = e / hidden, j = e - b * hidden;
    float* g = gates + b * g_ld + j;
    const float pre_i = g[0] + (bias_ih[j] + bias_hh[j]);
    const float pre_f = g[hidden] + (bias_ih[hidden + j] + bias_hh[hidden + j]);
    const float pre_g = g[2 * hidden] + (bias_ih[2 * hidden + j] + bias_hh[2 * hidden + j]);
    const float pre_o = g[3 * hidden] + (bias_ih[3 * hidden + j] + bias_hh[3 * hidden + j]);
    const float i = sigmoid(pre_i), f = sigmoid(pre_f), cell = tanhf(pre_g);
    const float o = sigmoid(pre_o);
    g[0] = i;
    g[hidden] = f;
    g[2 * hidden] = cell;
    g[3 * hidden] = o;
    const float cp = c_prev != nullptr ? c_prev[b * s_ld + j] : 0.0f;
    const float cv = f * cp + i * cell;
    c[b * s_ld + j] = cv;
    h[b * s_ld + j] = o * tanhf(cv);
  }
}

// One step of backward through the cell, the CPU's formulas. gates (the gate values), c and c_prev
// are step views as in the forward (c_prev null at t = 0); d_h_above is the gradient arriving at
// h_t from above (row stride a_ld; null where none arrives: below the last step when dst is only
// the last step); dh_next [N, H] is d_gates_{t+1} W_hh (null at t = T - 1); dc [N, H] carries
// d c_t from step t + 1 in and d c_{t-1} out (read as zero at t = T - 1: first_step). d_gates
// points at step t of [N, T, 4H] (row stride g_ld, as gates).
__global__ void cell_backward_kernel(const float* gates, int64_t g_ld, const float* c_prev,
                                     const float* c, int64_t s_ld, const float* d_h_above,
                                     int64_t a_ld, const float* dh_next, float* dc, bool first_step,
                                     float* d_gates, int64_t batch, int64_t hidden) {
  const int64_t n_all = batch * hidden;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n_all;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = e / hidden, j = e - b * hidden;
    const float* g = gates + b * g_ld + j;
    float* dg = d_gates + b * g_ld + j;
    // 0 + x where a term is absent, exactly as the CPU adds its zero-filled buffers.
    const float dh = (d_h_above != nullptr ? d_h_above[b * a_ld + j] : 0.0f) +
                     (dh_next != nullptr ? dh_next[e] : 0.0f);
    const float tc = tanhf(c[b * s_ld + j]);
    const float i = g[0], f = g[hidden], cell = g[2 * hidden], o = g[3 * hidden];
    const float cp = c_prev != nullptr ? c_prev[b * s_ld + j] : 0.0f;
    const float dc_in = first_step ? 0.0f : dc[e];
    const float dcv = dc_in + dh * o * (1.0f - tc * tc);
    dg[3 * hidden] = dh * tc * o * (1.0f - o);
    dg[0] = dcv * cell * i * (1.0f - i);
    dg[hidden] = dcv * cp * f * (1.0f - f);
    dg[2 * hidden] = dcv * i * (1.0f - cell * cell);
    dc[e] = dcv * f;
  }
}

// d_bias_ih[c] = d_bias_hh[c] = sum over rows of m[:, c] (the two biases enter the gates the same
// way, so their gradients are equal). A block owns 32 columns; its 8 row lanes each sum every 8th
// row and the partial sums are added in lane order: the result does not depend on scheduling.
__global__ void column_sums_kernel(const float* m, int64_t rows, int64_t cols, float* d_bias_ih,
                                   float* d_bias_hh) {
  __shared__ float partial[kRowLanes][kColumnTile + 1];  // +1: no bank conflicts on the way back
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t c = tile * kColumnTile + threadIdx.x;
    float sum = 0.0f;
    if (c < cols) {
      for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) sum += m[r * cols + c];
    }
    partial[threadIdx.y][threadIdx.x] = sum;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
      float total = 0.0f;
      for (int lane = 0; lane < kRowLanes; ++lane) total += partial[lane][threadIdx.x];
      d_bias_ih[c] = total;
      d_bias_hh[c] = total;
    }
    __syncthreads();  // partial is rewritten by the next tile
  }
}

bool same_shape(const MatmulShape& a, const MatmulShape& b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.trans_a == b.trans_a &&
         a.trans_b == b.trans_b && a.lda == b.lda && a.ldb == b.ldb && a.ldd == b.ldd &&
         a.accumulate == b.accumulate && a.epilogue == b.epilogue;
}

MatmulShape shape_of(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, int64_t lda,
                     int64_t ldb, int64_t ldd, bool accumulate) {
  MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.trans_a = trans_a;
  s.trans_b = trans_b;
  s.lda = lda;
  s.ldb = ldb;
  s.ldd = ldd;
  s.accumulate = accumulate;
  return s;
}

class GpuLstm final : public LstmKernel {
 public:
  GpuLstm(CudaBackend& be, const LstmShape& s) : be_(be), s_(s) {
    XO_ASSERT(s.batch > 0 && s.steps > 0 && s.input > 0 && s.hidden > 0 && s.layers > 0);
    const int64_t N = s.batch, T = s.steps, H = s.hidden, G = 4 * s.hidden;
    for (int64_t k = 0; k < s.layers; ++k) {
      const int64_t I = k == 0 ? s.input : H;
      Layer l;
      // gates [N*T, G] = X [N*T, I] W_ih^T (W_ih [G, I] is B^T).
      l.project = plan(shape_of(N * T, G, I, false, true, 0, 0, 0, false));
      // gates_t [N, G] (row stride T*G) += h_{t-1} [N, H] (row stride T*H) W_hh^T.
      l.recur = plan(shape_of(N, G, H, false, true, T * H, 0, T * G, true));
      // dh_next [N, H] = d_gates_t [N, G] (row stride T*G) W_hh [G, H].
      l.d_h_prev = plan(shape_of(N, H, G, false, false, T * G, 0, 0, false));
      // d_W_ih [G, I] = d_gates^T X (d_gates [N*T, G] is A^T).
      l.d_w_ih = plan(shape_of(G, I, N * T, true, false, 0, 0, 0, false));
      // d_W_hh [G, H] = d_gates[1:]^T h[:-1], k = N*T - 1 rows (none when N*T = 1: T = 1 then,
      // and the gradient is zero, see backward).
      if (N * T > 1) l.d_w_hh = plan(shape_of(G, H, N * T - 1, true, false, 0, 0, 0, false));
      // d_x [N*T, I] = d_gates W_ih.
      if (k > 0 || s.need_d_src) l.d_x = plan(shape_of(N * T, I, G, false, false, 0, 0, 0, false));
      l.gates = be.allocate(bytes(N * T * G));
      l.c = be.allocate(bytes(N * T * H));
      l.h = be.allocate(bytes(N * T * H));
      layers_.push_back(std::move(l));
    }
    d_gates_ = be.allocate(bytes(N * T * G));
    if (s.layers > 1) d_h_below_ = be.allocate(bytes(N * T * H));
    dh_next_ = be.allocate(bytes(N * H));
    dc_ = be.allocate(bytes(N * H));
  }

  void forward(const float* src, const LstmLayerParams* params, float* dst) override {
    const int64_t N = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const cudaStream_t stream = be_.stream();
    const float* x = src;
    for (int64_t k = 0; k < s_.layers; ++k) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      float* gates = l.gates.as<float>();
      float* c = l.c.as<float>();
      float* h = l.h.as<float>();
      l.project->run(x, p.weight_ih, gates);
      for (int64_t t = 0; t < T; ++t) {
        // h_{-1} = 0: step 0 has no recurrent term.
        if (t > 0) l.recur->run(h + (t - 1) * H, p.weight_hh, gates + t * G);
        XO_CUDA_LAUNCH(cell_forward_kernel, blocks_for(N * H), kThreads, 0, stream, gates + t * G,
                       T * G, p.bias_ih, p.bias_hh, t > 0 ? c + (t - 1) * H : nullptr, c + t * H,
                       h + t * H, T * H, N, H);
      }
      x = h;  // the next layer reads this layer's h as its [N*T, H] input
    }
    const float* top = layers_.back().h.as<float>();
    if (s_.sequence) {
      XO_CUDA_CHECK(cudaMemcpyAsync(dst, top, bytes(N * T * H), cudaMemcpyDeviceToDevice, stream));
    } else {
      // Row b of dst [N, H] is h_{T-1} of sample b: a pitched copy.
      XO_CUDA_CHECK(cudaMemcpy2DAsync(dst, bytes(H), top + (T - 1) * H, bytes(T * H), bytes(H), N,
                                      cudaMemcpyDeviceToDevice, stream));
    }
  }

  void backward(const float* src, const LstmLayerParams* params, const float* d_dst,
                const LstmLayerGrads* grads, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    const int64_t N = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const cudaStream_t stream = be_.stream();
    float* d_gates = d_gates_.as<float>();
    float* dh_next = dh_next_.as<float>();
    float* dc = dc_.as<float>();
    for (int64_t k = s_.layers; k-- > 0;) {
      Layer& l = layers_[k];
      const LstmLayerParams& p = params[k];
      const LstmLayerGrads& gr = grads[k];
      const float* gates = l.gates.as<float>();
      const float* c = l.c.as<float>();
      const float* h = l.h.as<float>();
      const bool top = k == s_.layers - 1;
      for (int64_t t = T; t-- > 0;) {
        // What arrives at h_t from above: d_dst (all steps, or only the last) for the top layer,
        // the layer above's d_x for the others.
        const float* above = nullptr;
        int64_t above_ld = T * H;
        if (!top) {
          above = d_h_below_.as<float>() + t * H;
        } else if (s_.sequence) {
          above = d_dst + t * H;
        } else if (t == T - 1) {
          above = d_dst;
          above_ld = H;
        }
        const bool last = t == T - 1;
        XO_CUDA_LAUNCH(cell_backward_kernel, blocks_for(N * H), kThreads, 0, stream, gates + t * G,
                       T * G, t > 0 ? c + (t - 1) * H : nullptr, c + t * H, T * H, above, above_ld,
                       last ? nullptr : dh_next, dc, last, d_gates + t * G, N, H);
        if (t > 0) l.d_h_prev->run(d_gates + t * G, p.weight_hh, dh_next);
      }
      // Everything that needs d_gates_0 first: d_x (which overwrites d_h_below_, read only by the
      // step loop above), d_W_ih and the bias gradients.
      if (k > 0) {
        l.d_x->run(d_gates, p.weight_ih, d_h_below_.as<float>());
      } else if (d_src != nullptr) {
        l.d_x->run(d_gates, p.weight_ih, d_src);
      }
      const float* x = k == 0 ? src : layers_[k - 1].h.as<float>();
      l.d_w_ih->run(d_gates, x, gr.weight_ih);
      const dim3 block(kColumnTile, kRowLanes);
      const unsigned tiles = static_cast<unsigned>((G + kColumnTile - 1) / kColumnTile);
      XO_CUDA_LAUNCH(column_sums_kernel, tiles, block, 0, stream, d_gates, N * T, G, gr.bias_ih,
                     gr.bias_hh);
      if (T > 1) {
        // Zero d_gates_0 of every sample, so that the shifted matmul's cross-sample rows add
        // nothing (see the header comment).
        XO_CUDA_CHECK(cudaMemset2DAsync(d_gates, bytes(T * G), 0, bytes(G), N, stream));
        l.d_w_hh->run(d_gates + G, h, gr.weight_hh);
      } else {
        // One step: h_{-1} = 0 is the only previous state, so W_hh gets no gradient.
        XO_CUDA_CHECK(cudaMemsetAsync(gr.weight_hh, 0, bytes(G * H), stream));
      }
    }
  }

 private:
  struct Layer {
    Matmul* project = nullptr;
    Matmul* recur = nullptr;
    Matmul* d_h_prev = nullptr;
    Matmul* d_w_ih = nullptr;
    Matmul* d_w_hh = nullptr;
    Matmul* d_x = nullptr;
    DeviceBuffer gates;  // [N, T, 4H]: the pre-activations, then the gate values (i, f, g, o)
    DeviceBuffer c, h;   // [N, T, H]: c_t and h_t of every step
  };

  static size_t bytes(int64_t floats) { return static_cast<size_t>(floats) * sizeof(float); }

  // The planned matmul for a shape, shared with any earlier request for the same shape.
  Matmul* plan(const MatmulShape& shape) {
    for (const auto& m : matmuls_) {
      if (same_shape(m.first, shape)) return m.second.get();
    }
    matmuls_.emplace_back(shape, std::make_unique<Matmul>(be_, shape));
    return matmuls_.back().second.get();
  }

  CudaBackend& be_;
  LstmShape s_;
  // Keyed by the shape as requested (Matmul::shape() has the strides filled in).
  std::vector<std::pair<MatmulShape, std::unique_ptr<Matmul>>> matmuls_;
  std::vector<Layer> layers_;
  DeviceBuffer d_gates_;    // [N, T, 4H], reused by every layer
  DeviceBuffer d_h_below_;  // [N, T, H]: the gradient at the layer below's h (layers > 1)
  DeviceBuffer dh_next_;    // [N, H]: d_gates_{t+1} W_hh
  DeviceBuffer dc_;         // [N, H]: d c carried from step t + 1 to step t
};

}  // namespace

std::unique_ptr<LstmKernel> make_lstm(CudaBackend& be, const LstmShape& shape) {
  return std::make_unique<GpuLstm>(be, shape);
}

}  // namespace xo::cuda

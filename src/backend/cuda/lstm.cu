// LSTM on the GPU (PyTorch's nn.LSTM, batch-first, zero initial states; gates i, f, g, o), forward
// and backward, with the CPU's algorithm (cpu/lstm.cpp) and formulas: the products over all steps
// at once are planned cuBLASLt Matmuls (matmul.h), and each time step is one kernel of ours.
//
// Layout: batch-major throughout, as the tensors come: per layer gates [N, T, 4H], c and h
// [N, T, H] (h_t at step t; the zero initial state is not stored, step 0 simply has no recurrent
// term). One step is then a strided view (row stride T*4H or T*H) that the kernels read and write
// in place, layer 0 reads src as it is, the next layer reads h as its packed [N*T, H] input,
// d_src comes out of its matmul already batch-first, and nothing is transposed.
//
// Forward, per layer:
//   gates [N*T, 4H]  = X [N*T, in] W_ih^T                      one matmul over all steps
//   per step t:      step kernel: pre = gates_t + h_{t-1} W_hh^T (no recurrent term at t = 0)
//                    + (b_ih + b_hh), the gate nonlinearities (written back over gates_t, kept
//                    for backward), c_t, h_t
// then dst is the top layer's h (sequence: one copy; else the last step: a 2-D copy).
//
// Backward, per layer from the top, steps in reverse:
//   per step t:      step kernel: dh = d_h_above_t + d_gates_{t+1} W_hh (absent at t = T - 1),
//                    then d_gates_t and the carried dc (in place, [N, H])
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
// Why a kernel per step: a step's recurrent product is small (N*4H*H multiply-adds, 2.1M for
// N = 32, H = 128) and each step waits for the one before, so the step chain costs launches and
// their latency more than arithmetic. A cuBLASLt matmul plus an element-wise kernel made two
// dependent kernels per forward step and three per backward step (the d_h_prev matmul's split-K
// reduction); the step kernels make it one per step and direction, with nothing between steps.
// A block owns U = 4 hidden units (a tile past H leaves the rest idle), hence the gate columns
// {j, H + j, 2H + j, 3H + j} of each of its units j, and a tile of batch rows. It stages its dot
// products' operands in shared memory (cp.async: every copy in flight at once), takes the dot
// products, and updates exactly the (row, unit) cells whose gates it computed, so no block needs
// another's result within a step: the kernel boundary is the only synchronisation.
//   forward:  W_hh's rows of its 4U gates ([4U, H]) and its rows of h_{t-1}; a thread computes
//             the four gate dot products (length H) of its (row, unit), then that cell.
//   backward: W_hh's columns of its units ([4H, U], staged as [U, 4H]) and its rows of
//             d_gates_{t+1} (written by the previous launch; this one writes d_gates_t, another
//             step's slice); a thread computes the dot product (length 4H) of its (row, unit),
//             then that cell. dc [N, H] is read and written by that one thread only.
// Eight lanes share a (row, unit): lane l sums the terms l, l + 8, l + 16, ... of the dot product
// (chunk after chunk, in order, where the operands do not fit in shared memory at once; backward
// in four interleaved chains, added in a fixed order) and a butterfly of shuffles adds the eight
// partial sums: a fixed order for a given shape, so results are deterministic. For big batches a
// thread owns R = 4 rows (four times the multiply-adds per weight read from shared memory), when
// that still leaves at least two blocks per SM. Shared rows are padded to chunk + 8 floats (chunk
// a multiple of 32): the eight lanes of a (row, unit) read eight consecutive floats and the four
// units of a warp read rows eight banks apart, so the inner loops have no bank conflicts. The
// tiles are chosen at plan time (plan_step); for N = 32, H = 128: 8 rows, R = 1, 32 x 4 = 128
// blocks of 256 threads, 13,056 (forward) and 24,960 (backward) bytes of dynamic shared memory
// (the cap is 48 KB: no opt-in attribute).
//
// Arithmetic: f32, the CPU's formulas and operation order within each element, the biases added
// after the recurrent term as there ((x W_ih^T + h W_hh^T) + (b_ih + b_hh)); sigmoid is
// 1 / (1 + expf(-x)) and tanh is tanhf (the CPU's exp_math.h versions are within 9e-8 absolute of
// the exact functions, tanhf 1.0e-7). The sums inside the dot products, the matmuls and the bias
// column sums run in their own (deterministic) orders, within f32 tolerance of the CPU's.
//
// Matmuls are planned at construction, one per distinct shape (layers above the first share
// theirs), and so are the step kernels' tiles. All buffers are allocated at construction; forward
// and backward only queue work on be.stream() (capturable).
#include <cuda_pipeline_primitives.h>

#include <memory>
#include <utility>
#include <vector>

#include "backend/cuda/matmul.h"

namespace xo::cuda {
namespace {

// Column tile of the bias-gradient kernel: 32 columns (one warp, coalesced rows) by 32 row lanes
// (blocks of 1024 threads: there are only 4H / 32 blocks, and every thread sums N*T / 32 rows).
constexpr int kColumnTile = 32;
constexpr int kRowLanes = 32;
constexpr int kColumnSumThreads = kColumnTile * kRowLanes;

// The step kernels (see the header comment): blocks of kStepThreads threads, kLanes of them per
// (row slot, unit) pair, kUnits units by kSlots row slots; a row slot covers R batch rows, kSlots
// apart (a block covers kSlots * R rows). Dynamic shared memory: at most kStepShared bytes.
constexpr int kStepThreads = 256;
constexpr int kLanes = 8;
constexpr int kUnits = 4;
constexpr int kSlots = kStepThreads / kLanes / kUnits;
constexpr int kWarps = kStepThreads / 32;
constexpr size_t kStepShared = 48 * 1024;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Copies one float from global to shared memory without waiting for it (cp.async on sm_80 and
// later): a thread's copies are all in flight at once rather than one load latency each. Visible
// after stage_wait() and a barrier.
__device__ __forceinline__ void stage(float* dst_shared, const float* src) {
  __pipeline_memcpy_async(dst_shared, src, sizeof(float));
}
__device__ __forceinline__ void stage_wait() {
  __pipeline_commit();
  __pipeline_wait_prior(0);
}

// Adds the partial sums of the kLanes lanes of a pair (consecutive lanes of one warp); every lane
// gets the total. The whole warp must call it.
__device__ __forceinline__ float lane_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullWarp, v, offset);
  }
  return v;
}

// Forward step t of one layer. gates points at step t of [N, T, 4H] (row stride g_ld) and holds
// x_t W_ih^T; it gets the gate values (i, f, g, o) back, which backward needs. h_prev and c_prev
// point at step t - 1 of [N, T, H] (row stride s_ld), both null at t = 0 (the zero initial state);
// c and h at step t. w_hh is [4H, H]. Grid: (unit tiles of kUnits, batch tiles of kSlots * R
// rows). Shared: w_s [4 * kUnits][ld] (row gate * kUnits + u: W_hh row gate * H + j0 + u) and
// h_s [kSlots * R][ld], chunk columns of the dot product at a time.
template <int R>
__global__ void __launch_bounds__(kStepThreads)
    step_forward_kernel(float* gates, int64_t g_ld, const float* h_prev, const float* c_prev,
                        float* c, float* h, int64_t s_ld, const float* w_hh, const float* bias_ih,
                        const float* bias_hh, int64_t batch, int64_t hidden, int chunk, int ld,
                        int64_t w_stride) {
  extern __shared__ float step_shared[];
  {  // fused models: model blockIdx.z's rows (batch rows further on per model) and parameters
    const int64_t z = blockIdx.z;
    gates += z * batch * g_ld;
    if (h_prev != nullptr) h_prev += z * batch * s_ld;
    if (c_prev != nullptr) c_prev += z * batch * s_ld;
    c += z * batch * s_ld;
    h += z * batch * s_ld;
    w_hh += z * w_stride;
    bias_ih += z * w_stride;
    bias_hh += z * w_stride;
  }
  constexpr int rows = kSlots * R;
  float* w_s = step_shared;
  float* h_s = step_shared + 4 * kUnits * ld;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int pair = static_cast<int>(threadIdx.x) / kLanes;
  const int u = pair % kUnits, slot = pair / kUnits;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t j0 = int64_t{blockIdx.x} * kUnits, b0 = int64_t{blockIdx.y} * rows;
  const int64_t j = j0 + u;
  // The cell of this thread: lane r < R updates row slot + r * kSlots (all lanes of the pair get
  // the dot products). Its inputs are read now, while the dot products run.
  const int64_t b = b0 + slot + int64_t{lane} * kSlots;
  const bool owner = lane < R && b < batch && j < hidden;
  float x_proj[4] = {0.0f, 0.0f, 0.0f, 0.0f}, bias[4] = {0.0f, 0.0f, 0.0f, 0.0f}, cp = 0.0f;
  if (owner) {
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      x_proj[g] = gates[b * g_ld + g * hidden + j];
      bias[g] = bias_ih[g * hidden + j] + bias_hh[g * hidden + j];
    }
    if (c_prev != nullptr) cp = c_prev[b * s_ld + j];
  }

  // acc[r][g]: this lane's share of h_{t-1}[row r] . W_hh[g * H + j].
  float acc[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int g = 0; g < 4; ++g) acc[r][g] = 0.0f;
  }
  if (h_prev != nullptr) {  // the same for the whole grid
    for (int64_t k0 = 0; k0 < hidden; k0 += chunk) {
      const int width = static_cast<int>(hidden - k0 < chunk ? hidden - k0 : chunk);
      if (k0 > 0) __syncthreads();  // the previous chunk's reads are done
      // A warp copies a row at a time, its lanes consecutive floats. Rows past the edges are zeros.
      for (int q = warp; q < 4 * kUnits; q += kWarps) {
        const int gate = q / kUnits;
        const int64_t jj = j0 + q % kUnits;
        if (jj < hidden) {
          const float* from = w_hh + (gate * hidden + jj) * hidden + k0;
          for (int k = warp_lane; k < width; k += 32) stage(&w_s[q * ld + k], from + k);
        } else {
          for (int k = warp_lane; k < width; k += 32) w_s[q * ld + k] = 0.0f;
        }
      }
      for (int r = warp; r < rows; r += kWarps) {
        const int64_t bb = b0 + r;
        if (bb < batch) {
          const float* from = h_prev + bb * s_ld + k0;
          for (int k = warp_lane; k < width; k += 32) stage(&h_s[r * ld + k], from + k);
        } else {
          for (int k = warp_lane; k < width; k += 32) h_s[r * ld + k] = 0.0f;
        }
      }
      stage_wait();
      __syncthreads();
      const float* h_row = h_s + slot * ld;  // rows r * kSlots further on
      const float* w_row = w_s + u * ld;     // gates g * kUnits rows further on
#pragma unroll 4
      for (int k = lane; k < width; k += kLanes) {
        float hv[R], wv[4];
#pragma unroll
        for (int r = 0; r < R; ++r) hv[r] = h_row[r * kSlots * ld + k];
#pragma unroll
        for (int g = 0; g < 4; ++g) wv[g] = w_row[g * kUnits * ld + k];
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int g = 0; g < 4; ++g) acc[r][g] = fmaf(hv[r], wv[g], acc[r][g]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int g = 0; g < 4; ++g) acc[r][g] = lane_sum(acc[r][g]);
    }
  }
  if (!owner) return;  // no barrier or shuffle below

  float pre[4];
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (lane == r) dot = acc[r][g];  // compile-time indices: acc stays in registers
    }
    pre[g] = (h_prev != nullptr ? x_proj[g] + dot : x_proj[g]) + bias[g];
  }
  const float i = sigmoid(pre[0]), f = sigmoid(pre[1]), cell = tanhf(pre[2]);
  const float o = sigmoid(pre[3]);
  float* gb = gates + b * g_ld + j;
  gb[0] = i;
  gb[hidden] = f;
  gb[2 * hidden] = cell;
  gb[3 * hidden] = o;
  const float cv = f * cp + i * cell;
  c[b * s_ld + j] = cv;
  h[b * s_ld + j] = o * tanhf(cv);
}

// Backward step t of one layer, the CPU's formulas. gates (the gate values) and d_gates point at
// step t of [N, T, 4H] (row stride g_ld); d_gates_next at step t + 1 of the same buffer, null at
// t = T - 1 (no later step: no recurrent term, and dc is read as zero). c and c_prev point at
// steps t and t - 1 of [N, T, H] (row stride s_ld; c_prev null at t = 0); d_h_above is the
// gradient arriving at h_t from above (row stride a_ld; null where none arrives: below the last
// step when dst is only the last step); dc [N, H] carries d c_t in and d c_{t-1} out. Grid as the
// forward's. Shared: w_s [kUnits][ld] (row u: W_hh[:, j0 + u]) and dg_s [kSlots * R][ld].
template <int R>
__global__ void __launch_bounds__(kStepThreads)
    step_backward_kernel(const float* gates, float* d_gates, const float* d_gates_next,
                         int64_t g_ld, const float* c_prev, const float* c, int64_t s_ld,
                         const float* d_h_above, int64_t a_ld, const float* w_hh, float* dc,
                         int64_t batch, int64_t hidden, int chunk, int ld, int64_t w_stride) {
  extern __shared__ float step_shared[];
  {  // fused models, as the forward's
    const int64_t z = blockIdx.z;
    gates += z * batch * g_ld;
    d_gates += z * batch * g_ld;
    if (d_gates_next != nullptr) d_gates_next += z * batch * g_ld;
    if (c_prev != nullptr) c_prev += z * batch * s_ld;
    c += z * batch * s_ld;
    if (d_h_above != nullptr) d_h_above += z * batch * a_ld;
    w_hh += z * w_stride;
    dc += z * batch * hidden;
  }
  constexpr int rows = kSlots * R;
  float* w_s = step_shared;
  float* dg_s = step_shared + kUnits * ld;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int pair = static_cast<int>(threadIdx.x) / kLanes;
  const int u = pair % kUnits, slot = pair / kUnits;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t j0 = int64_t{blockIdx.x} * kUnits, b0 = int64_t{blockIdx.y} * rows;
  const int64_t j = j0 + u;
  const int64_t gate_cols = 4 * hidden;
  const int64_t b = b0 + slot + int64_t{lane} * kSlots;
  const bool owner = lane < R && b < batch && j < hidden;
  float gi = 0.0f, gf = 0.0f, gg = 0.0f, go = 0.0f, cv = 0.0f, cp = 0.0f, above = 0.0f;
  float dc_in = 0.0f;
  if (owner) {
    const float* gb = gates + b * g_ld + j;
    gi = gb[0];
    gf = gb[hidden];
    gg = gb[2 * hidden];
    go = gb[3 * hidden];
    cv = c[b * s_ld + j];
    if (c_prev != nullptr) cp = c_prev[b * s_ld + j];
    if (d_h_above != nullptr) above = d_h_above[b * a_ld + j];
    if (d_gates_next != nullptr) dc_in = dc[b * hidden + j];
  }

  // acc[a][r]: this lane's share of d_gates_{t+1}[row r] . W_hh[:, j], in four independent
  // chains a (the terms k, k + 8, k + 16, k + 24 of each stride of 32), added up at the end.
  float acc[4][R];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[a][r] = 0.0f;
  }
  if (d_gates_next != nullptr) {  // the same for the whole grid
    for (int64_t k0 = 0; k0 < gate_cols; k0 += chunk) {
      const int width = static_cast<int>(gate_cols - k0 < chunk ? gate_cols - k0 : chunk);
      if (k0 > 0) __syncthreads();  // the previous chunk's reads are done
      // W_hh[k0 + k, j0 + uu] to w_s[uu][k], consecutive threads taking consecutive units, then
      // rows. Then a warp copies a row of d_gates_{t+1} at a time. Past the edges: zeros.
      for (int e = static_cast<int>(threadIdx.x); e < kUnits * width; e += kStepThreads) {
        const int k = e / kUnits, uu = e % kUnits;
        const int64_t jj = j0 + uu;
        if (jj < hidden) {
          stage(&w_s[uu * ld + k], &w_hh[(k0 + k) * hidden + jj]);
        } else {
          w_s[uu * ld + k] = 0.0f;
        }
      }
      for (int r = warp; r < rows; r += kWarps) {
        const int64_t bb = b0 + r;
        if (bb < batch) {
          const float* from = d_gates_next + bb * g_ld + k0;
          for (int k = warp_lane; k < width; k += 32) stage(&dg_s[r * ld + k], from + k);
        } else {
          for (int k = warp_lane; k < width; k += 32) dg_s[r * ld + k] = 0.0f;
        }
      }
      stage_wait();
      __syncthreads();
      const float* dg_row = dg_s + slot * ld;  // rows r * kSlots further on
      const float* w_row = w_s + u * ld;
      int k = lane;
      for (; k + 3 * kLanes < width; k += 4 * kLanes) {
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float wv = w_row[k + a * kLanes];
#pragma unroll
          for (int r = 0; r < R; ++r) {
            acc[a][r] = fmaf(dg_row[r * kSlots * ld + k + a * kLanes], wv, acc[a][r]);
          }
        }
      }
      for (; k < width; k += kLanes) {  // the chunk's last (width % 32) terms
        const float wv = w_row[k];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[0][r] = fmaf(dg_row[r * kSlots * ld + k], wv, acc[0][r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      acc[0][r] = lane_sum((acc[0][r] + acc[1][r]) + (acc[2][r] + acc[3][r]));
    }
  }
  if (!owner) return;  // no barrier or shuffle below

  float dot = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (lane == r) dot = acc[0][r];  // compile-time indices: acc stays in registers
  }
  // 0 + x where a term is absent, exactly as the CPU adds its zero-filled buffers.
  const float dh = (d_h_above != nullptr ? above : 0.0f) + (d_gates_next != nullptr ? dot : 0.0f);
  const float tc = tanhf(cv);
  const float dcv = dc_in + dh * go * (1.0f - tc * tc);
  float* dg = d_gates + b * g_ld + j;
  dg[3 * hidden] = dh * tc * go * (1.0f - go);
  dg[0] = dcv * gg * gi * (1.0f - gi);
  dg[hidden] = dcv * cp * gf * (1.0f - gf);
  dg[2 * hidden] = dcv * gi * (1.0f - gg * gg);
  dc[b * hidden + j] = dcv * gf;
}

// d_bias_ih[c] = d_bias_hh[c] = sum over rows of m[:, c] (the two biases enter the gates the same
// way, so their gradients are equal). A block owns 32 columns; its 32 row lanes each sum every
// 32nd row and the partial sums are added in lane order: the result does not depend on scheduling.
// Fused models: model blockIdx.y's m rows * cols floats further on, its biases w_stride.
__global__ void __launch_bounds__(kColumnSumThreads)
    column_sums_kernel(const float* m, int64_t rows, int64_t cols, float* d_bias_ih,
                       float* d_bias_hh, int64_t w_stride) {
  __shared__ float partial[kRowLanes][kColumnTile + 1];  // +1: no bank conflicts on the way back
  m += int64_t{blockIdx.y} * rows * cols;
  d_bias_ih += int64_t{blockIdx.y} * w_stride;
  d_bias_hh += int64_t{blockIdx.y} * w_stride;
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t c = tile * kColumnTile + threadIdx.x;
    float sum = 0.0f;
    if (c < cols) {
#pragma unroll 8
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
         a.accumulate == b.accumulate && a.epilogue == b.epilogue && a.batch == b.batch &&
         a.stride_a == b.stride_a && a.stride_b == b.stride_b && a.stride_d == b.stride_d;
}

// A product of every fused model at once: `models` entries, each operand's at its stride.
MatmulShape batched(MatmulShape s, int64_t models, int64_t stride_a, int64_t stride_b,
                    int64_t stride_d) {
  if (models > 1) {
    s.batch = models;
    s.stride_a = stride_a;
    s.stride_b = stride_b;
    s.stride_d = stride_d;
  }
  return s;
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

// The tiles of a step kernel, chosen at plan time.
struct StepPlan {
  int rows_per_thread = 1;  // R: the kernel's template argument (1 or 4)
  int chunk = 0;            // dot-product terms staged in shared memory at a time (multiple of 32)
  int ld = 0;               // shared row stride in floats: chunk + kLanes
  size_t shared_bytes = 0;  // dynamic shared memory
  dim3 grid;
};

// Tiles for a step kernel over batch rows and hidden units whose dot products have `length` terms,
// staging weight_rows rows of weights per unit (4 forward, 1 backward). Blocks of kUnits units by
// kSlots row slots; a thread owns R = 4 rows when that still leaves two blocks per SM, else one.
// The chunk is the dot product rounded up to 32 terms, capped so that the shared rows fit in
// kStepShared.
StepPlan plan_step(int64_t batch, int64_t hidden, int64_t length, int weight_rows, int sms) {
  StepPlan p;
  const int64_t unit_tiles = (hidden + kUnits - 1) / kUnits;
  const auto batch_tiles = [&](int r) { return (batch + kSlots * r - 1) / (kSlots * r); };
  p.rows_per_thread = unit_tiles * batch_tiles(4) >= 2 * int64_t{sms} ? 4 : 1;
  const int shared_rows = weight_rows * kUnits + kSlots * p.rows_per_thread;
  const int64_t max_chunk =
      (static_cast<int64_t>(kStepShared / sizeof(float)) / shared_rows - kLanes) / 32 * 32;
  const int64_t rounded = (length + 31) / 32 * 32;
  p.chunk = static_cast<int>(rounded < max_chunk ? rounded : max_chunk);
  p.ld = p.chunk + kLanes;
  p.shared_bytes = static_cast<size_t>(shared_rows) * p.ld * sizeof(float);
  const int64_t tiles = batch_tiles(p.rows_per_thread);
  XO_ASSERT(p.chunk >= 32 && p.shared_bytes <= kStepShared);
  XO_ASSERT(unit_tiles <= 0x7fffffff && tiles <= 65535);
  p.grid = dim3(static_cast<unsigned>(unit_tiles), static_cast<unsigned>(tiles));
  return p;
}

// Fused models: LstmShape::models > 1 (or a model_stride) runs every model at once, its tensors
// [models * N, T, ...] (the models' batch-first tensors one after another), its parameters
// model_stride floats apart: the step kernels take the model as blockIdx.z, the matmuls as
// cuBLASLt's strided batch, the bias sums as blockIdx.y; one launch per step for all the models.

class GpuLstm final : public LstmKernel {
 public:
  GpuLstm(CudaBackend& be, const LstmShape& s) : be_(be), s_(s) {
    XO_ASSERT(s.batch > 0 && s.steps > 0 && s.input > 0 && s.hidden > 0 && s.layers > 0);
    XO_ASSERT(s.models >= 1 && (s.models == 1 || s.model_stride > 0));
    const int64_t N = s.batch, T = s.steps, H = s.hidden, G = 4 * s.hidden;
    const int64_t K = s.models, W = s.model_stride;
    const int sms = be.properties().multiProcessorCount;
    step_forward_ = plan_step(N, H, H, 4, sms);
    step_backward_ = plan_step(N, H, G, 1, sms);
    step_forward_.grid.z = step_backward_.grid.z = static_cast<unsigned>(K);
    for (int64_t k = 0; k < s.layers; ++k) {
      const int64_t I = k == 0 ? s.input : H;
      Layer l;
      // gates [N*T, G] = X [N*T, I] W_ih^T (W_ih [G, I] is B^T).
      l.project = plan(
          batched(shape_of(N * T, G, I, false, true, 0, 0, 0, false), K, N * T * I, W, N * T * G));
      // d_W_ih [G, I] = d_gates^T X (d_gates [N*T, G] is A^T).
      l.d_w_ih = plan(
          batched(shape_of(G, I, N * T, true, false, 0, 0, 0, false), K, N * T * G, N * T * I, W));
      // d_W_hh [G, H] = d_gates[1:]^T h[:-1], k = N*T - 1 rows (none when N*T = 1: T = 1 then,
      // and the gradient is zero, see backward).
      if (N * T > 1) {
        l.d_w_hh = plan(batched(shape_of(G, H, N * T - 1, true, false, 0, 0, 0, false), K,
                                N * T * G, N * T * H, W));
      }
      // d_x [N*T, I] = d_gates W_ih.
      if (k > 0 || s.need_d_src) {
        l.d_x = plan(batched(shape_of(N * T, I, G, false, false, 0, 0, 0, false), K, N * T * G, W,
                             N * T * I));
      }
      l.gates = be.allocate(bytes(K * N * T * G));
      l.c = be.allocate(bytes(K * N * T * H));
      l.h = be.allocate(bytes(K * N * T * H));
      layers_.push_back(std::move(l));
    }
    d_gates_ = be.allocate(bytes(K * N * T * G));
    if (s.layers > 1) d_h_below_ = be.allocate(bytes(K * N * T * H));
    dc_ = be.allocate(bytes(K * N * H));
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
      const StepPlan& sp = step_forward_;
      for (int64_t t = 0; t < T; ++t) {
        // h_{-1} = c_{-1} = 0: step 0 has no recurrent term.
        const float* h_prev = t > 0 ? h + (t - 1) * H : nullptr;
        const float* c_prev = t > 0 ? c + (t - 1) * H : nullptr;
        if (sp.rows_per_thread == 4) {
          XO_CUDA_LAUNCH(step_forward_kernel<4>, sp.grid, kStepThreads, sp.shared_bytes, stream,
                         gates + t * G, T * G, h_prev, c_prev, c + t * H, h + t * H, T * H,
                         p.weight_hh, p.bias_ih, p.bias_hh, N, H, sp.chunk, sp.ld, s_.model_stride);
        } else {
          XO_CUDA_LAUNCH(step_forward_kernel<1>, sp.grid, kStepThreads, sp.shared_bytes, stream,
                         gates + t * G, T * G, h_prev, c_prev, c + t * H, h + t * H, T * H,
                         p.weight_hh, p.bias_ih, p.bias_hh, N, H, sp.chunk, sp.ld, s_.model_stride);
        }
      }
      x = h;  // the next layer reads this layer's h as its [N*T, H] input
    }
    const float* top = layers_.back().h.as<float>();
    const int64_t rows = s_.models * N;  // every model's samples
    if (s_.sequence) {
      XO_CUDA_CHECK(
          cudaMemcpyAsync(dst, top, bytes(rows * T * H), cudaMemcpyDeviceToDevice, stream));
    } else {
      // Row b of dst [N, H] is h_{T-1} of sample b: a pitched copy.
      XO_CUDA_CHECK(cudaMemcpy2DAsync(dst, bytes(H), top + (T - 1) * H, bytes(T * H), bytes(H),
                                      rows, cudaMemcpyDeviceToDevice, stream));
    }
  }

  void backward(const float* src, const LstmLayerParams* params, const float* d_dst,
                const LstmLayerGrads* grads, float* d_src) override {
    XO_ASSERT((d_src != nullptr) == s_.need_d_src);
    const int64_t N = s_.batch, T = s_.steps, H = s_.hidden, G = 4 * H;
    const cudaStream_t stream = be_.stream();
    float* d_gates = d_gates_.as<float>();
    float* dc = dc_.as<float>();
    const StepPlan& sp = step_backward_;
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
        // d_gates_{t+1}, written by the previous launch; none after the last step.
        const float* d_next = t < T - 1 ? d_gates + (t + 1) * G : nullptr;
        const float* c_prev = t > 0 ? c + (t - 1) * H : nullptr;
        if (sp.rows_per_thread == 4) {
          XO_CUDA_LAUNCH(step_backward_kernel<4>, sp.grid, kStepThreads, sp.shared_bytes, stream,
                         gates + t * G, d_gates + t * G, d_next, T * G, c_prev, c + t * H, T * H,
                         above, above_ld, p.weight_hh, dc, N, H, sp.chunk, sp.ld, s_.model_stride);
        } else {
          XO_CUDA_LAUNCH(step_backward_kernel<1>, sp.grid, kStepThreads, sp.shared_bytes, stream,
                         gates + t * G, d_gates + t * G, d_next, T * G, c_prev, c + t * H, T * H,
                         above, above_ld, p.weight_hh, dc, N, H, sp.chunk, sp.ld, s_.model_stride);
        }
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
      XO_CUDA_LAUNCH(column_sums_kernel, dim3(tiles, static_cast<unsigned>(s_.models)), block, 0,
                     stream, d_gates, N * T, G, gr.bias_ih, gr.bias_hh, s_.model_stride);
      if (T > 1) {
        // Zero d_gates_0 of every sample, so that the shifted matmul's cross-sample rows add
        // nothing (see the header comment).
        XO_CUDA_CHECK(cudaMemset2DAsync(d_gates, bytes(T * G), 0, bytes(G), s_.models * N, stream));
        l.d_w_hh->run(d_gates + G, h, gr.weight_hh);
      } else {
        // One step: h_{-1} = 0 is the only previous state, so W_hh gets no gradient.
        for (int64_t n = 0; n < s_.models; ++n) {
          XO_CUDA_CHECK(
              cudaMemsetAsync(gr.weight_hh + n * s_.model_stride, 0, bytes(G * H), stream));
        }
      }
    }
  }

 private:
  struct Layer {
    Matmul* project = nullptr;
    Matmul* d_w_ih = nullptr;
    Matmul* d_w_hh = nullptr;
    Matmul* d_x = nullptr;
    DeviceBuffer gates;  // [K*N, T, 4H]: the pre-activations, then the gate values (i, f, g, o)
    DeviceBuffer c, h;   // [K*N, T, H]: c_t and h_t of every step (K: the fused models, or 1)
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
  StepPlan step_forward_, step_backward_;
  DeviceBuffer d_gates_;    // [K*N, T, 4H], reused by every layer
  DeviceBuffer d_h_below_;  // [K*N, T, H]: the gradient at the layer below's h (layers > 1)
  DeviceBuffer dc_;         // [K*N, H]: d c carried from step t + 1 to step t
};

}  // namespace

std::unique_ptr<LstmKernel> make_lstm(CudaBackend& be, const LstmShape& shape) {
  return std::make_unique<GpuLstm>(be, shape);
}

}  // namespace xo::cuda

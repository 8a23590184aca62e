// Pooling on the GPU, forward and backward, as kernels of our own rather than cuDNN's:
//  - 2-D max / average pooling of NCHW tensors. cuDNN's cudnnPoolingBackward needs the forward's
//    src and dst again, which PoolKernel::backward(d_dst, d_src) does not get (and a later layer
//    may have overwritten in place); like oneDNN's workspace on the CPU we keep the arg-max
//    position of each output instead, which also fixes the tie-breaking: the first maximum in
//    window order (rows, then columns), as PyTorch and oneDNN pick it. Padded positions never win
//    a max; average pooling divides by kernel^2, counting the zero padding (PyTorch's
//    count_include_pad = true; without ceil_mode every window lies inside the padded input, so
//    the divisor is always kernel^2).
//  - Pooling over the steps of a sequence [N, T, F] -> [N, F] (global average / max), as pool.cpp:
//    the average sums steps in order and multiplies by 1/T; the max keeps the first maximal step.
// Backward kernels gather (one thread per input element summing the outputs whose window holds
// it, in output order) rather than scatter, so overlapping windows need no atomics and the result
// is the same every run.
#include <cmath>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

struct PoolGeometry {
  int64_t planes;  // batch * channels
  int64_t h, w, oh, ow;
  int64_t k, stride, pad;
};

// One thread per output. arg (may be null: inference) receives the arg-max's offset in its plane.
template <PoolType T>
__global__ void pool2d_forward_kernel(const float* src, float* dst, int32_t* arg, PoolGeometry g) {
  const int64_t n = g.planes * g.oh * g.ow;
  const float inv_area = 1.0f / static_cast<float>(g.k * g.k);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t x = i % g.ow, t = i / g.ow;
    const int64_t y = t % g.oh, plane = t / g.oh;
    const float* p = src + plane * g.h * g.w;
    const int64_t h0 = y * g.stride - g.pad, w0 = x * g.stride - g.pad;
    const int64_t hs = h0 > 0 ? h0 : 0, ws = w0 > 0 ? w0 : 0;
    const int64_t he = h0 + g.k < g.h ? h0 + g.k : g.h, we = w0 + g.k < g.w ? w0 + g.k : g.w;
    if constexpr (T == PoolType::Max) {
      float best = -INFINITY;
      int64_t best_at = -1;
      for (int64_t r = hs; r < he; ++r) {
        for (int64_t c = ws; c < we; ++c) {
          const float v = p[r * g.w + c];
          // Strictly greater: ties keep the first position, as PyTorch and oneDNN do.
          if (best_at < 0 || v > best) {
            best = v;
            best_at = r * g.w + c;
          }
        }
      }
      dst[i] = best;
      if (arg) arg[i] = static_cast<int32_t>(best_at);
    } else {
      float sum = 0.0f;
      for (int64_t r = hs; r < he; ++r) {
        for (int64_t c = ws; c < we; ++c) sum += p[r * g.w + c];
      }
      dst[i] = sum * inv_area;
    }
  }
}

// One thread per input element: sums the gradients of the outputs whose window covers it (for max
// pooling, only those whose arg-max it is). Output y's window covers rows [y s - pad, y s - pad +
// k), so row r is covered by y in [ceil((r + pad - k + 1) / s), floor((r + pad) / s)].
template <PoolType T>
__global__ void pool2d_backward_kernel(const float* d_dst, const int32_t* arg, float* d_src,
                                       PoolGeometry g) {
  const int64_t n = g.planes * g.h * g.w;
  const float inv_area = 1.0f / static_cast<float>(g.k * g.k);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % g.w, t = i / g.w;
    const int64_t r = t % g.h, plane = t / g.h;
    const int64_t pr = r + g.pad, pc = c + g.pad;
    const int64_t y0 = pr < g.k ? 0 : (pr - g.k) / g.stride + 1;
    const int64_t x0 = pc < g.k ? 0 : (pc - g.k) / g.stride + 1;
    const int64_t y1 = pr / g.stride < g.oh - 1 ? pr / g.stride : g.oh - 1;
    const int64_t x1 = pc / g.stride < g.ow - 1 ? pc / g.stride : g.ow - 1;
    const int64_t base = plane * g.oh * g.ow;
    const int32_t self = static_cast<int32_t>(r * g.w + c);
    float sum = 0.0f;
    for (int64_t y = y0; y <= y1; ++y) {
      for (int64_t x = x0; x <= x1; ++x) {
        const int64_t o = base + y * g.ow + x;
        if constexpr (T == PoolType::Max) {
          if (arg[o] == self) sum += d_dst[o];
        } else {
          sum += d_dst[o] * inv_area;
        }
      }
    }
    d_src[i] = sum;
  }
}

class GpuPool2d final : public PoolKernel {
 public:
  GpuPool2d(CudaBackend& be, const Pool2dShape& s) : be_(be), s_(s) {
    g_ = {.planes = s.batch * s.channels,
          .h = s.height,
          .w = s.width,
          .oh = s.out_height(),
          .ow = s.out_width(),
          .k = s.kernel,
          .stride = s.stride,
          .pad = s.padding};
    XO_ASSERT(s.kernel > 0 && s.stride > 0 && g_.oh > 0 && g_.ow > 0);
    XO_ASSERT(s.height * s.width < (int64_t{1} << 31));  // arg-max offsets are int32
    if (s.type == PoolType::Max && s.training) {
      arg_ = be.allocate(static_cast<size_t>(g_.planes * g_.oh * g_.ow) * sizeof(int32_t));
    }
  }

  void forward(const float* src, float* dst) override {
    const int64_t n = g_.planes * g_.oh * g_.ow;
    if (n == 0) return;
    if (s_.type == PoolType::Max) {
      XO_CUDA_LAUNCH(pool2d_forward_kernel<PoolType::Max>, blocks_for(n), kThreads, 0, be_.stream(),
                     src, dst, arg_ ? arg_.as<int32_t>() : nullptr, g_);
    } else {
      XO_CUDA_LAUNCH(pool2d_forward_kernel<PoolType::Avg>, blocks_for(n), kThreads, 0, be_.stream(),
                     src, dst, nullptr, g_);
    }
  }

  void backward(const float* d_dst, float* d_src) override {
    XO_ASSERT(s_.training && "pooling kernel built for inference");
    const int64_t n = g_.planes * g_.h * g_.w;
    if (n == 0) return;
    if (s_.type == PoolType::Max) {
      XO_CUDA_LAUNCH(pool2d_backward_kernel<PoolType::Max>, blocks_for(n), kThreads, 0,
                     be_.stream(), d_dst, arg_.as<const int32_t>(), d_src, g_);
    } else {
      XO_CUDA_LAUNCH(pool2d_backward_kernel<PoolType::Avg>, blocks_for(n), kThreads, 0,
                     be_.stream(), d_dst, nullptr, d_src, g_);
    }
  }

 private:
  CudaBackend& be_;
  Pool2dShape s_;
  PoolGeometry g_{};
  DeviceBuffer arg_;  // [N, C, OH, OW]: the arg-max's offset in its H*W plane (max, training)
};

// One thread per (sample, feature), stepping through the sequence in order; consecutive threads
// read consecutive features, so each step's loads are coalesced.
template <PoolType T>
__global__ void sequence_pool_forward_kernel(const float* src, float* dst, int32_t* arg,
                                             int64_t batch, int64_t steps, int64_t features) {
  const int64_t n = batch * features;
  const float inv = 1.0f / static_cast<float>(steps);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t f = i % features, b = i / features;
    const float* x = src + b * steps * features + f;
    if constexpr (T == PoolType::Avg) {
      float sum = 0.0f;
      for (int64_t t = 0; t < steps; ++t) sum += x[t * features];
      dst[i] = sum * inv;
    } else {
      float best = x[0];
      int32_t best_t = 0;
      for (int64_t t = 1; t < steps; ++t) {
        // Strictly greater: ties go to the first step, as torch.max and pool.cpp do.
        if (x[t * features] > best) {
          best = x[t * features];
          best_t = static_cast<int32_t>(t);
        }
      }
      dst[i] = best;
      arg[i] = best_t;
    }
  }
}

// One thread per element of d_src [N, T, F]: every element is written, so no zeroing pass.
template <PoolType T>
__global__ void sequence_pool_backward_kernel(const float* d_dst, const int32_t* arg, float* d_src,
                                              int64_t batch, int64_t steps, int64_t features) {
  const int64_t n = batch * steps * features;
  const float inv = 1.0f / static_cast<float>(steps);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t f = i % features, bt = i / features;
    const int64_t t = bt % steps, b = bt / steps;
    const int64_t o = b * features + f;
    if constexpr (T == PoolType::Avg) {
      d_src[i] = d_dst[o] * inv;
    } else {
      d_src[i] = arg[o] == t ? d_dst[o] : 0.0f;
    }
  }
}

class GpuSequencePool final : public PoolKernel {
 public:
  GpuSequencePool(CudaBackend& be, const SequencePoolShape& s) : be_(be), s_(s) {
    XO_ASSERT(s.steps > 0 && s.steps < (int64_t{1} << 31));
    if (s.type == PoolType::Max) {
      arg_ = be.allocate(static_cast<size_t>(s.batch * s.features) * sizeof(int32_t));
    }
  }

  void forward(const float* src, float* dst) override {
    const int64_t n = s_.batch * s_.features;
    if (n == 0) return;
    if (s_.type == PoolType::Max) {
      XO_CUDA_LAUNCH(sequence_pool_forward_kernel<PoolType::Max>, blocks_for(n), kThreads, 0,
                     be_.stream(), src, dst, arg_.as<int32_t>(), s_.batch, s_.steps, s_.features);
    } else {
      XO_CUDA_LAUNCH(sequence_pool_forward_kernel<PoolType::Avg>, blocks_for(n), kThreads, 0,
                     be_.stream(), src, dst, nullptr, s_.batch, s_.steps, s_.features);
    }
  }

  void backward(const float* d_dst, float* d_src) override {
    const int64_t n = s_.batch * s_.steps * s_.features;
    if (n == 0) return;
    if (s_.type == PoolType::Max) {
      XO_CUDA_LAUNCH(sequence_pool_backward_kernel<PoolType::Max>, blocks_for(n), kThreads, 0,
                     be_.stream(), d_dst, arg_.as<const int32_t>(), d_src, s_.batch, s_.steps,
                     s_.features);
    } else {
      XO_CUDA_LAUNCH(sequence_pool_backward_kernel<PoolType::Avg>, blocks_for(n), kThreads, 0,
                     be_.stream(), d_dst, nullptr, d_src, s_.batch, s_.steps, s_.features);
    }
  }

 private:
  CudaBackend& be_;
  SequencePoolShape s_;
  DeviceBuffer arg_;  // [N, F]: the step each max came from
};

}  // namespace

std::unique_ptr<PoolKernel> make_pool2d(CudaBackend& be, const Pool2dShape& shape) {
  return std::make_unique<GpuPool2d>(be, shape);
}

std::unique_ptr<PoolKernel> make_sequence_pool(CudaBackend& be, const SequencePoolShape& shape) {
  return std::make_unique<GpuSequencePool>(be, shape);
}

}  // namespace xo::cuda

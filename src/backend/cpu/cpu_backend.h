// The CPU backend: oneDNN matmuls (primitives built once per shape at plan time) and vectorised
// loops for the element-wise work, parallelised with OpenMP (the runtime Debian's oneDNN uses).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <dnnl.hpp>
#include <string>

#include "backend/backend.h"
#include "backend/cpu/bf16_weights.h"

namespace xo::cpu {

// Element counts below this run on one thread: an OpenMP fork/join costs more than the loop itself
// for the small layers of the disc sweep.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Runs body(begin, end) over [0, n): on the calling thread when `work` (the element count, unless
// the caller knows better) is below kParallelThreshold, since an OpenMP `if` clause would still pay
// for a serialized parallel region, and inside a batch shard (already in a parallel region); else
// split statically across the OpenMP threads, so each element is always handled the same way.
template <typename Body>
void parallel_for(int64_t n, Body&& body, int64_t work = -1) {
  if ((work < 0 ? n : work) < kParallelThreshold || omp_in_parallel()) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (n + threads - 1) / threads;
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) body(begin, end);
  }
}

// Matmuls below this many FLOPs run on one thread. Measured on the 2-core machine with the disc
// sweep (thresholds 1e6 ... 3.2e7 compared): disc-2 ... disc-7 run faster single-threaded, disc-8
// is even, and from disc-9 on both threads win (docs/benchmarks.md, "Figures once quoted in code
// comments").
inline constexpr double kSingleThreadMatmulFlops = 4e6;

// Batch sharding (see Backend::batch_shards). Measured on the 2-core VM with the disc sweep, the
// step with one shard per thread against one thread per op, A/B interleaved, in two phases of the
// host's load: disc-8, disc-9 and disc-10 trained faster in shards in both. Smaller models (disc-4
// ... disc-7) won or lost depending on the phase, and disc-11/12 (1.7 and 6.7 GFLOP per step) ran
// faster on oneDNN's own threading in the slow phase. Shards are used only where they won in both
// (the figures: docs/benchmarks.md, "Figures once quoted in code comments").
inline constexpr double kMinShardedStepFlops = 1e7;
inline constexpr double kMaxShardedStepFlops = 1e9;
inline constexpr int64_t kMinShardBatch = 16;

class CpuBackend final : public Backend {
 public:
  // precision: F32, or BF16 (products in bf16 on the CPU's AMX or AVX-512 BF16 units: throws
  // UserError naming what is missing where oneDNN finds neither). TF32 is a GPU format: the CPU
  // computes it in f32.
  CpuBackend(int threads, Precision precision = Precision::F32);
  const DeviceInfo& info() const override { return info_; }

  DeviceBuffer allocate(size_t bytes) override;
  // Host memory is this device's: read where it is.
  DeviceBuffer borrow_host(const void* host, size_t bytes,
                           const std::shared_ptr<const void>& owner) override {
    return DeviceBuffer(
        std::shared_ptr<void>(std::const_pointer_cast<void>(owner), const_cast<void*>(host)),
        bytes);
  }
  std::optional<int64_t> free_memory_bytes() const override;
  int64_t bytes_allocated() const override {
    return bytes_allocated_.load(std::memory_order_relaxed);
  }
  void upload(void* device_dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* device_src, size_t bytes) override;
  void fill_zero(void* device_dst, size_t bytes) override;
  void next_batch(const float* src, const int32_t* src_labels, const int32_t* order,
                  int64_t* position, int64_t rows, int64_t row_floats, float* dst,
                  int32_t* dst_labels) override;
  void increment(uint64_t* counter) override { ++*counter; }
  void synchronize() override {}
  void release_threads() override;
  std::unique_ptr<RecordedWork> capture(FunctionRef<void()>) override { return nullptr; }
  std::unique_ptr<QueueClock> clock(int marks) override;
  void accumulate(float* dst, const float* src, int64_t n) override;
  void accumulate_stats(LossStats* dst, const LossStats* src) override;
  ExecutionPolicy execution_policy() const override;
  void parallel_shards(int shards, FunctionRef<void(int shard)> body) override;

  std::unique_ptr<WeightedKernel> linear(const LinearShape& shape) override;
  std::unique_ptr<ActivationKernel> activation(Activation act, int64_t elements,
                                               float negative_slope) override;
  std::unique_ptr<LossKernel> loss(LossKind kind, int64_t batch, int64_t classes,
                                   int64_t normalizer) override;
  std::unique_ptr<WeightedKernel> conv2d(const Conv2dShape& shape) override;
  std::unique_ptr<PoolKernel> pool2d(const Pool2dShape& shape) override;
  std::unique_ptr<PoolKernel> sequence_pool(const SequencePoolShape& shape) override;
  std::unique_ptr<DropoutKernel> dropout(const DropoutShape& shape) override;
  std::unique_ptr<EmbeddingKernel> embedding(const EmbeddingShape& shape) override;
  std::unique_ptr<LstmKernel> lstm(const LstmShape& shape) override;
  bool lstm_fuses_models() const override { return true; }
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormShape& shape) override;
  std::unique_ptr<OptimizerKernel> optimizer(const OptimizerSettings& spec,
                                             int64_t parameters) override;

 private:
  DeviceInfo info_;
  bool bf16_ = false;  // the products of Linear, Conv2d and LSTM in bf16
  // bf16: the weights' copies the optimizers keep. Shared with the deleters of the buffers this
  // backend allocates (a buffer freed is forgotten), which may outlive it.
  std::shared_ptr<Bf16Weights> kept_;
  const Bf16Weights* bf16_weights() const { return kept_.get(); }
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::atomic<int64_t> bytes_allocated_{0};
};

// Kernel factories, one per op-family file.
// bf16_operands: the layer's products in bf16 (--precision bf16), f32 everywhere else. Where the
// factory takes bf16_weights instead, its products are bf16 when it is set, reading the weights'
// copies kept there.
std::unique_ptr<WeightedKernel> make_linear(const LinearShape& shape,
                                            const Bf16Weights* bf16_weights,
                                            const dnnl::engine& engine, const dnnl::stream& stream);
std::unique_ptr<ActivationKernel> make_activation(Activation act, int64_t elements,
                                                  float negative_slope);
std::unique_ptr<LossKernel> make_loss(LossKind kind, int64_t batch, int64_t classes,
                                      int64_t normalizer);
std::unique_ptr<WeightedKernel> make_conv2d(const Conv2dShape& shape, bool bf16_operands,
                                            const dnnl::engine& engine, const dnnl::stream& stream);
std::unique_ptr<PoolKernel> make_pool2d(const Pool2dShape& shape, const dnnl::engine& engine,
                                        const dnnl::stream& stream);
std::unique_ptr<PoolKernel> make_sequence_pool(const SequencePoolShape& shape);
std::unique_ptr<BatchNormKernel> make_batch_norm(const BatchNormShape& shape,
                                                 const dnnl::engine& engine,
                                                 const dnnl::stream& stream);
std::unique_ptr<DropoutKernel> make_dropout(const DropoutShape& shape);
std::unique_ptr<EmbeddingKernel> make_embedding(const EmbeddingShape& shape);
std::unique_ptr<LstmKernel> make_lstm(const LstmShape& shape, const Bf16Weights* bf16_weights,
                                      const dnnl::engine& engine, const dnnl::stream& stream);
// The optimizer's state (momentum, moments) is allocated through `backend`, as every buffer a run
// plans. bf16_weights (--precision bf16): the optimizer keeps a bf16 copy of the parameters it
// updates there.
std::unique_ptr<OptimizerKernel> make_optimizer(Backend& backend, const OptimizerSettings& spec,
                                                int64_t parameters, Bf16Weights* bf16_weights);

// d_dst[i] *= act'(.) computed from the activation's output dst, for n elements: the Conv2d
// backward and the stand-alone activation use it. The Linear backward applies the derivative in
// its own pass, where it also sums the bias gradient's columns. negative_slope: LeakyReLU's.
void activation_backward_inplace(Activation act, const float* dst, float* d_dst, int64_t n,
                                 float negative_slope = 0.0f);

// Number of CPU cores this process may run on.
int available_cores();
// See xo::cpu_bf16_unit (backend/backend.h).
std::string cpu_bf16_unit();
// A Linear the fused loops of linear.cpp run (widths powers of two up to 64, in x out up to
// 64 x 64): f32 at any precision.
bool small_linear(int64_t in_features, int64_t out_features);

}  // namespace xo::cpu

// The CUDA backend: one stream per device, cuBLASLt for matmuls (bias and activation fused into
// the epilogue), cuDNN for convolutions, custom kernels for the element-wise work, the loss and
// the optimizers, and CUDA Graphs to launch a whole training step at once. Every buffer and
// workspace is allocated at plan time, so a step (and its recording) allocates nothing.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <atomic>
#include <memory>

#include "backend/backend.h"
#include "backend/cuda/check.h"

namespace xo::cuda {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, Precision precision);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const DeviceInfo& info() const override { return info_; }

  // What the op files use.
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  Precision precision() const { return precision_; }
  const cudaDeviceProp& properties() const { return properties_; }
  // The cuBLASLt workspace, shared by every matmul: they run one at a time on the one stream.
  void* matmul_workspace() const { return workspace_.as<void>(); }
  size_t matmul_workspace_bytes() const { return workspace_.bytes(); }

  DeviceBuffer allocate(size_t bytes) override;
  DeviceBuffer allocate_host(size_t bytes) override;  // cudaMallocHost: page-locked
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
  void increment(uint64_t* counter) override;
  void synchronize() override;
  std::unique_ptr<RecordedWork> capture(FunctionRef<void()> body) override;
  // NCCL (collective.cpp): an ncclUniqueId's bytes, and a communicator over them on this stream.
  std::string collective_id() override;
  std::unique_ptr<Collective> collective(const std::string& id, int rank, int ranks) override;
  std::unique_ptr<QueueClock> clock(int marks) override;
  void accumulate(float* dst, const float* src, int64_t n) override;
  void accumulate_stats(LossStats* dst, const LossStats* src) override;
  // A GPU runs the whole batch at once: no shards.
  ExecutionPolicy execution_policy() const override { return {}; }
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
  // A fused group's LSTM as one kernel (lstm.cu: the model as blockIdx.z, the products as
  // strided batches), unless CROSSOVER_GPU_FUSE_LSTM=0 (then model by model). Measured on an
  // H200 on 2026-12-04: 16 fused lstm-small trials 3.96x one trial's steps/s, against 1.06x
  // model by model (docs/benchmarks.md).
  bool lstm_fuses_models() const override;
  std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormShape& shape) override;
  std::unique_ptr<OptimizerKernel> optimizer(const OptimizerSettings& spec,
                                             int64_t parameters) override;
  std::unique_ptr<FusedStepKernel> fused_step(const FusedStepShape& shape) override;

 private:
  int device_ = 0;
  Precision precision_ = Precision::F32;
  DeviceInfo info_;
  cudaDeviceProp properties_{};
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  DeviceBuffer workspace_;
  std::atomic<int64_t> bytes_allocated_{0};
};

// The backend's own kernels (queue.cu).
void launch_next_batch(cudaStream_t stream, const float* src, const int32_t* src_labels,
                       const int32_t* order, int64_t* position, int64_t rows, int64_t row_floats,
                       float* dst, int32_t* dst_labels);
void launch_increment(cudaStream_t stream, uint64_t* counter);
void launch_accumulate(cudaStream_t stream, float* dst, const float* src, int64_t n);
void launch_accumulate_stats(cudaStream_t stream, LossStats* dst, const LossStats* src);
// Fused models (queue.cu): model t's next batch from sources[t] into rows [t rows, (t + 1) rows)
// of dst, then each model's position advanced; each of `counters` incremented. The arrays are in
// device memory, `models` long.
struct ModelBatchSource {
  const float* x;
  const int32_t* y;
  const int32_t* order;
  int64_t* position;
};
void launch_fused_next_batch(cudaStream_t stream, const ModelBatchSource* sources, int models,
                             int64_t rows, int64_t row_floats, float* dst, int32_t* dst_labels);
void launch_fused_increment(cudaStream_t stream, uint64_t* const* counters, int models);

// Kernel factories, one per op-family file (same names as the CPU backend's files).
std::unique_ptr<WeightedKernel> make_linear(CudaBackend& be,
                                            const LinearShape& shape);  // linear.cu
std::unique_ptr<ActivationKernel> make_activation(CudaBackend& be, Activation act, int64_t elements,
                                                  float negative_slope);  // activation.cu
std::unique_ptr<LossKernel> make_loss(CudaBackend& be, LossKind kind, int64_t batch,
                                      int64_t classes, int64_t normalizer);              // loss.cu
std::unique_ptr<WeightedKernel> make_conv2d(CudaBackend& be, const Conv2dShape& shape);  // conv.cu
std::unique_ptr<PoolKernel> make_pool2d(CudaBackend& be, const Pool2dShape& shape);      // pool.cu
std::unique_ptr<PoolKernel> make_sequence_pool(CudaBackend& be,
                                               const SequencePoolShape& shape);  // pool.cu
std::unique_ptr<DropoutKernel> make_dropout(CudaBackend& be, const DropoutShape& shape);
std::unique_ptr<EmbeddingKernel> make_embedding(CudaBackend& be, const EmbeddingShape& shape);
std::unique_ptr<LstmKernel> make_lstm(CudaBackend& be, const LstmShape& shape);  // lstm.cu
std::unique_ptr<BatchNormKernel> make_batch_norm(CudaBackend& be,
                                                 const BatchNormShape& shape);  // batchnorm.cu
std::unique_ptr<OptimizerKernel> make_optimizer(CudaBackend& be, const OptimizerSettings& spec,
                                                int64_t parameters);  // optimizer.cu

// Fused models' own work batched over the models (models.cpp composes them with the gather): each
// model's loss over its rows, with its own stats (loss.cu); each model's optimizer step, one
// launch for all (optimizer.cu: null where the models' optimizers are not all of one kind).
class FusedLoss {
 public:
  virtual ~FusedLoss() = default;
  virtual void run(const float* logits, const int32_t* labels, float* d_logits) = 0;
};
class FusedUpdate {
 public:
  virtual ~FusedUpdate() = default;
  virtual void run() = 0;
};
std::unique_ptr<FusedLoss> make_fused_loss(CudaBackend& be, LossKind kind, int64_t rows,
                                           int64_t classes,
                                           const std::vector<LossStats*>& stats);  // loss.cu
std::unique_ptr<FusedUpdate> make_fused_update(
    CudaBackend& be, const std::vector<FusedStepShape::Member>& models);  // optimizer.cu

}  // namespace xo::cuda

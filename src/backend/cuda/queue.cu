// The backend's own kernels: batch selection on the device, counters, and the merging of sums.
#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

__global__ void next_batch_kernel(const float* src, const int32_t* src_labels, const int32_t* order,
                                  const int64_t* position, int64_t rows, int64_t row_floats,
                                  float* dst, int32_t* dst_labels) {
  const int32_t* index = order + *position;
  const int64_t n = rows * row_floats;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / row_floats, c = i - r * row_floats;
    const int64_t from = index[r];
    dst[i] = src[from * row_floats + c];
    if (c == 0) dst_labels[r] = src_labels[from];
  }
}

// Runs after next_batch_kernel (same stream): every thread of that one has read *position.
__global__ void advance_kernel(int64_t* position, int64_t by) { *position += by; }
__global__ void increment_kernel(uint64_t* counter) { *counter += 1; }

// Fused models: model blockIdx.y's batch from its own source and order into its rows of dst.
__global__ void fused_next_batch_kernel(const ModelBatchSource* sources, int64_t rows,
                                        int64_t row_floats, float* dst, int32_t* dst_labels) {
  const ModelBatchSource s = sources[blockIdx.y];
  const int32_t* index = s.order + *s.position;
  const int64_t n = rows * row_floats;
  dst += blockIdx.y * n;
  dst_labels += blockIdx.y * rows;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / row_floats, c = i - r * row_floats;
    const int64_t from = index[r];
    dst[i] = s.x[from * row_floats + c];
    if (c == 0) dst_labels[r] = s.y[from];
  }
}

// Runs after fused_next_batch_kernel: every thread of that one has read its model's position.
__global__ void fused_advance_kernel(const ModelBatchSource* sources, int models, int64_t by) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < models) *sources[t].position += by;
}

__global__ void fused_increment_kernel(uint64_t* const* counters, int models) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < models) *counters[t] += 1;
}

__global__ void accumulate_kernel(float* dst, const float* src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dst[i] += src[i];
  }
}

__global__ void accumulate_stats_kernel(LossStats* dst, const LossStats* src) {
  dst->loss_sum += src->loss_sum;
  dst->correct += src->correct;
  dst->samples += src->samples;
}

}  // namespace

void launch_next_batch(cudaStream_t stream, const float* src, const int32_t* src_labels,
                       const int32_t* order, int64_t* position, int64_t rows, int64_t row_floats,
                       float* dst, int32_t* dst_labels) {
  XO_CUDA_LAUNCH(next_batch_kernel, blocks_for(rows * row_floats), kThreads, 0, stream, src,
                 src_labels, order, position, rows, row_floats, dst, dst_labels);
  XO_CUDA_LAUNCH(advance_kernel, 1, 1, 0, stream, position, rows);
}

void launch_fused_next_batch(cudaStream_t stream, const ModelBatchSource* sources, int models,
                             int64_t rows, int64_t row_floats, float* dst, int32_t* dst_labels) {
  const dim3 grid(blocks_for(rows * row_floats), static_cast<unsigned>(models));
  XO_CUDA_LAUNCH(fused_next_batch_kernel, grid, kThreads, 0, stream, sources, rows, row_floats, dst,
                 dst_labels);
  XO_CUDA_LAUNCH(fused_advance_kernel, blocks_for(models), kThreads, 0, stream, sources, models,
                 rows);
}

void launch_fused_increment(cudaStream_t stream, uint64_t* const* counters, int models) {
  XO_CUDA_LAUNCH(fused_increment_kernel, blocks_for(models), kThreads, 0, stream, counters, models);
}

void launch_increment(cudaStream_t stream, uint64_t* counter) {
  XO_CUDA_LAUNCH(increment_kernel, 1, 1, 0, stream, counter);
}

void launch_accumulate(cudaStream_t stream, float* dst, const float* src, int64_t n) {
  XO_CUDA_LAUNCH(accumulate_kernel, blocks_for(n), kThreads, 0, stream, dst, src, n);
}

void launch_accumulate_stats(cudaStream_t stream, LossStats* dst, const LossStats* src) {
  XO_CUDA_LAUNCH(accumulate_stats_kernel, 1, 1, 0, stream, dst, src);
}

}  // namespace xo::cuda

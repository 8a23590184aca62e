// Embedding on the GPU. Forward gathers the table rows of the ids (one thread per output element).
// Backward overwrites d_table with zeros except the rows of the ids present, each the sum of its
// positions' gradients, and it does so deterministically, with the CPU's summation order:
//  1. the positions' ids become int32 sort keys, the positions themselves the values;
//  2. a stable radix sort by id (CUB; its scratch sized and allocated at plan time, only the bits
//     that vocab needs sorted) groups each id's positions, still in position order;
//  3. d_table is zeroed, and one thread per (first position of an id's run, column) adds the run's
//     gradients in order and writes the row's element once.
// So every row element is the same float sum embedding.cpp forms (0 + g_p1 + g_p2 + ..., positions
// ascending): bit-for-bit the CPU's result, every run. Float atomics would be simpler but make the
// low bits of the gradient depend on thread timing, and frequent ids (padding) would contend; a
// thread per (vocab row, column) scanning every position would do vocab times the work.
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

// One thread per element of dst [positions, dim]; consecutive threads copy consecutive columns.
__global__ void embedding_forward_kernel(const float* ids, const float* table, float* dst,
                                         int64_t positions, int64_t dim) {
  const int64_t n = positions * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = i / dim, k = i - p * dim;
    const auto id = static_cast<int64_t>(ids[p]);
    dst[i] = table[id * dim + k];
  }
}

__global__ void embedding_keys_kernel(const float* ids, int32_t* keys, int32_t* values,
                                      int64_t positions) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < positions;
       p += int64_t{gridDim.x} * blockDim.x) {
    keys[p] = static_cast<int32_t>(ids[p]);  // ids hold integers below 2^24: exact
    values[p] = static_cast<int32_t>(p);
  }
}

// One thread per (sorted position j, column k); only the first position of each id's run works:
// it sums the run's gradients (positions ascending, as the stable sort left them) and writes the
// row's element. Consecutive threads take consecutive columns, so a run's d_dst rows are read
// coalesced.
__global__ void embedding_rows_kernel(const int32_t* sorted_ids, const int32_t* sorted_positions,
                                      const float* d_dst, float* d_table, int64_t positions,
                                      int64_t dim) {
  const int64_t n = positions * dim;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = i / dim, k = i - j * dim;
    const int32_t id = sorted_ids[j];
    if (j > 0 && sorted_ids[j - 1] == id) continue;  // not the first of its run
    float sum = 0.0f;
    for (int64_t q = j; q < positions && sorted_ids[q] == id; ++q) {
      sum += d_dst[int64_t{sorted_positions[q]} * dim + k];
    }
    d_table[int64_t{id} * dim + k] = sum;
  }
}

class GpuEmbedding final : public EmbeddingKernel {
 public:
  GpuEmbedding(CudaBackend& be, const EmbeddingShape& s)
      : be_(be), s_(s), positions_(s.batch * s.steps) {
    XO_ASSERT(positions_ < (int64_t{1} << 31) && s.vocab <= (int64_t{1} << 24));
    if (positions_ == 0) return;
    // Only the bits an id in [0, vocab) can have are sorted on.
    while ((int64_t{1} << end_bit_) < s.vocab) ++end_bit_;
    const size_t bytes = static_cast<size_t>(positions_) * sizeof(int32_t);
    keys_ = be.allocate(bytes);
    sorted_keys_ = be.allocate(bytes);
    values_ = be.allocate(bytes);
    sorted_values_ = be.allocate(bytes);
    // With no scratch pointer CUB only reports the scratch it needs (nothing is queued).
    size_t scratch_bytes = 0;
    XO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, scratch_bytes, keys_.as<const int32_t>(), sorted_keys_.as<int32_t>(),
        values_.as<const int32_t>(), sorted_values_.as<int32_t>(), static_cast<int>(positions_), 0,
        end_bit_, be.stream()));
    scratch_ = be.allocate(scratch_bytes);
  }

  void forward(const float* ids, const float* table, float* dst) override {
    const int64_t n = positions_ * s_.dim;
    if (n == 0) return;
    XO_CUDA_LAUNCH(embedding_forward_kernel, blocks_for(n), kThreads, 0, be_.stream(), ids, table,
                   dst, positions_, s_.dim);
  }

  void backward(const float* ids, const float* d_dst, float* d_table) override {
    const size_t table_bytes = static_cast<size_t>(s_.vocab * s_.dim) * sizeof(float);
    if (table_bytes > 0) XO_CUDA_CHECK(cudaMemsetAsync(d_table, 0, table_bytes, be_.stream()));
    if (positions_ == 0 || s_.dim == 0) return;
    XO_CUDA_LAUNCH(embedding_keys_kernel, blocks_for(positions_), kThreads, 0, be_.stream(), ids,
                   keys_.as<int32_t>(), values_.as<int32_t>(), positions_);
    size_t scratch_bytes = scratch_.bytes();
    XO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        scratch_.as<void>(), scratch_bytes, keys_.as<const int32_t>(), sorted_keys_.as<int32_t>(),
        values_.as<const int32_t>(), sorted_values_.as<int32_t>(), static_cast<int>(positions_), 0,
        end_bit_, be_.stream()));
    const int64_t n = positions_ * s_.dim;
    XO_CUDA_LAUNCH(embedding_rows_kernel, blocks_for(n), kThreads, 0, be_.stream(),
                   sorted_keys_.as<const int32_t>(), sorted_values_.as<const int32_t>(), d_dst,
                   d_table, positions_, s_.dim);
  }

 private:
  CudaBackend& be_;
  EmbeddingShape s_;
  int64_t positions_;
  int end_bit_ = 1;
  DeviceBuffer keys_, sorted_keys_, values_, sorted_values_;  // int32 [positions]
  DeviceBuffer scratch_;                                      // CUB's radix-sort scratch
};

}  // namespace

std::unique_ptr<EmbeddingKernel> make_embedding(CudaBackend& be, const EmbeddingShape& shape) {
  return std::make_unique<GpuEmbedding>(be, shape);
}

}  // namespace xo::cuda

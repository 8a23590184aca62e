// Embedding on the CPU: forward copies the table rows of the ids; backward zeroes the table's
// gradient and adds each position's gradient to its id's row. The rows are split across threads
// by id (each thread owns a range of rows and scans every position), so the sums are added in
// position order for any thread count.
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {
namespace {

class CpuEmbedding final : public EmbeddingKernel {
 public:
  explicit CpuEmbedding(const EmbeddingShape& s) : s_(s) {}

  void forward(const float* ids, const float* table, float* dst) override {
    const int64_t positions = s_.batch * s_.steps, dim = s_.dim;
    parallel_for(
        positions,
        [&](int64_t p0, int64_t p1) {
          for (int64_t p = p0; p < p1; ++p) {
            const auto id = static_cast<int64_t>(ids[p]);
            std::memcpy(dst + p * dim, table + id * dim, sizeof(float) * dim);
          }
        },
        positions * dim);
  }

  void backward(const float* ids, const float* d_dst, float* d_table) override {
    const int64_t positions = s_.batch * s_.steps, dim = s_.dim, vocab = s_.vocab;
    parallel_for(
        vocab,
        [&](int64_t r0, int64_t r1) {
          std::fill(d_table + r0 * dim, d_table + r1 * dim, 0.0f);
          for (int64_t p = 0; p < positions; ++p) {
            const auto id = static_cast<int64_t>(ids[p]);
            if (id < r0 || id >= r1) continue;
            float* row = d_table + id * dim;
            const float* g = d_dst + p * dim;
#pragma omp simd
            for (int64_t k = 0; k < dim; ++k) row[k] += g[k];
          }
        },
        vocab * dim);
  }

 private:
  EmbeddingShape s_;
};

}  // namespace

std::unique_ptr<EmbeddingKernel> make_embedding(const EmbeddingShape& shape) {
  return std::make_unique<CpuEmbedding>(shape);
}

}  // namespace xo::cpu

// A planned cuBLASLt matmul on row-major views, with an optional fused epilogue, built once at plan
// time (descriptors, layouts and the algorithms chosen by cuBLASLt's heuristic) and run without
// allocating: D [m, n] = op(A) op(B) (+ D when accumulating) (+ the epilogue).
// Implemented in matmul.cpp (host code: cuBLASLt's API is host-only), which documents how the
// row-major views map onto cuBLASLt's column-major layouts.
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {

// The epilogues Linear needs, in row-major terms (matmul.cpp maps each onto cuBLASLt's).
// cuBLASLt's DRELU_BGRAD is deliberately absent: it applies ReLU's derivative to the output of the
// matmul that produces the gradient of the layer *below*, through a bit mask written by the
// forward's RELU_AUX epilogue, which does not fit the per-layer WeightedKernel contract (see
// linear.cu).
enum class MatmulEpilogue {
  None,
  Bias,      // D = op(A) op(B) + bias[n] (one bias per column of D, broadcast over the rows)
  Relu,      // D = relu(op(A) op(B))
  ReluBias,  // D = relu(op(A) op(B) + bias[n])
  BGradA,    // D = op(A) op(B), bias_grad[m] = row sums of op(A) (sums over k)
  BGradB,    // D = op(A) op(B), bias_grad[n] = column sums of op(B) (sums over k)
};

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // A is [m, k] row-major, or [k, m] when transposed
  bool trans_b = false;  // B is [k, n] row-major, or [n, k] when transposed
  // Row strides in elements (0: packed), so that a step of a [batch, steps, features] tensor can
  // be used in place.
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool accumulate = false;  // D += op(A) op(B) instead of D = op(A) op(B)
  // Batched (fused models): `batch` products at once, entry i's A, B and D at i * stride_a,
  // stride_b, stride_d elements from the first's.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  MatmulEpilogue epilogue = MatmulEpilogue::None;
};

class Matmul {
 public:
  // Throws InternalError when cuBLASLt has no algorithm for the shape and epilogue.
  Matmul(CudaBackend& be, const MatmulShape& shape);
  // Null instead of throwing when cuBLASLt has no algorithm (e.g. an epilogue it does not support
  // for this layout or precision), so that the caller can fall back to a kernel of its own.
  static std::unique_ptr<Matmul> try_create(CudaBackend& be, const MatmulShape& shape);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // bias: [n] for Bias/ReluBias; bias_grad: [m] for BGradA, [n] for BGradB (overwritten, also when
  // accumulating D); aux is reserved for epilogues with an auxiliary matrix and must be null. Null
  // where the epilogue does not use it. Queues the matmul on be.stream() (capturable: no
  // allocation, no synchronisation). Any pointer alignment works (4 bytes for floats); 16-byte
  // aligned pointers get the faster, vectorised algorithm.
  void run(const float* a, const float* b, float* d, const float* bias = nullptr,
           const float* aux = nullptr, float* bias_grad = nullptr);

  // Whether run() has an algorithm for pointers of these alignments (always true for 16-byte
  // aligned ones; for others, only when cuBLASLt offered an algorithm for 4-byte alignment).
  bool can_run(const void* a, const void* b, const void* d, const void* epilogue_vector) const;

  const MatmulShape& shape() const { return shape_; }

 private:
  struct Plan;
  struct NoThrow {};
  Matmul(CudaBackend& be, const MatmulShape& shape, NoThrow);
  CudaBackend& be_;
  MatmulShape shape_;
  Plan* plan_ = nullptr;
};

}  // namespace xo::cuda

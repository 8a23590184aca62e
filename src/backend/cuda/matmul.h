// A planned cuBLASLt matmul on row-major views, with an optional fused epilogue, built once at plan
// time (descriptors, layouts and the algorithm chosen by cuBLASLt's heuristic) and run without
// allocating: D [m, n] = op(A) op(B) (+ D when accumulating) (+ the epilogue).
// Implemented in matmul.cpp (host code: cuBLASLt's API is host-only).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {

// The epilogues Linear needs (cuBLASLt's BIAS, RELU_BIAS, DRELU_BGRAD, BGRADA/BGRADB); see
// matmul.cpp for the exact mapping of each onto the row-major operands.
enum class MatmulEpilogue {
  None,
  Bias,        // D = op(A) op(B) + bias[n] (one bias per column of D)
  ReluBias,    // D = relu(op(A) op(B) + bias[n])
  DReluBGrad,  // D = (op(A) op(B)) * (aux > 0), bias_grad[n] = column sums of D
  BGrad,       // D = op(A) op(B), bias_grad = the sums the bias gradient needs (matmul.cpp)
};

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;  // A is [m, k] row-major, or [k, m] when transposed
  bool trans_b = false;  // B is [k, n] row-major, or [n, k] when transposed
  // Row strides in elements (0: packed), so that a step of a [batch, steps, features] tensor can
  // be used in place.
  int64_t lda = 0, ldb = 0, ldd = 0;
  bool accumulate = false;  // D += op(A) op(B) instead of D = op(A) op(B)
  MatmulEpilogue epilogue = MatmulEpilogue::None;
};

class Matmul {
 public:
  Matmul(CudaBackend& be, const MatmulShape& shape);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;
  // bias: [n] for Bias/ReluBias; aux: the epilogue's auxiliary input (DReluBGrad: the forward's
  // output); bias_grad: [n] for the gradient epilogues. Null where the epilogue does not use it.
  void run(const float* a, const float* b, float* d, const float* bias = nullptr,
           const float* aux = nullptr, float* bias_grad = nullptr);

 private:
  struct Plan;
  CudaBackend& be_;
  MatmulShape shape_;
  Plan* plan_ = nullptr;
};

}  // namespace xo::cuda

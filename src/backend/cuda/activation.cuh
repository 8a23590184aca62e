// The activations and their derivatives as device functions, shared by the kernels that apply them
// (activation.cu) and the ones that fuse them (linear.cu, conv.cu). The CPU's formulas
// (cpu/activation.cpp): relu(x) = x > 0 ? x : 0, tanh, sigmoid = 1 / (1 + exp(-x)); derivatives
// from the output: relu' = [y > 0], tanh' = 1 - y^2, sigmoid' = y (1 - y).
#pragma once

#include "backend/backend.h"

namespace xo::cuda {

template <Activation A>
__device__ __forceinline__ float activate(float x) {
  if constexpr (A == Activation::ReLU) return x > 0.0f ? x : 0.0f;
  if constexpr (A == Activation::Tanh) return tanhf(x);
  if constexpr (A == Activation::Sigmoid) return 1.0f / (1.0f + expf(-x));
  return x;
}

// g times the activation's derivative at output y.
template <Activation A>
__device__ __forceinline__ float derivative_times(float y, float g) {
  if constexpr (A == Activation::ReLU) return y > 0.0f ? g : 0.0f;
  if constexpr (A == Activation::Tanh) return g * (1.0f - y * y);
  if constexpr (A == Activation::Sigmoid) return g * (y * (1.0f - y));
  return g;
}

}  // namespace xo::cuda

// The activations and their derivatives as plain functions, shared by the CPU backend's loops and
// the CUDA backend's kernels, so that both compute the same expressions. They are constexpr, like
// dropout_keep in core/random.h: nvcc compiles them for the device (--expt-relaxed-constexpr),
// where std::tanh, std::exp and std::sqrt are the device's tanhf, expf and sqrtf.
#pragma once

#include <cmath>

#include "backend/backend.h"

namespace xo {

// relu(x) = x > 0 ? x : 0, tanh(x), sigmoid(x) = 1 / (1 + exp(-x)); None is the identity.
template <Activation A>
constexpr float activate(float x) {
  if constexpr (A == Activation::ReLU) return x > 0.0f ? x : 0.0f;
  if constexpr (A == Activation::Tanh) return std::tanh(x);
  if constexpr (A == Activation::Sigmoid) return 1.0f / (1.0f + std::exp(-x));
  return x;
}

// g times the activation's derivative, computed from the activation's output y (what forward
// keeps): relu' = [y > 0], tanh' = 1 - y^2, sigmoid' = y (1 - y); None's is 1.
template <Activation A>
constexpr float derivative_times(float y, float g) {
  if constexpr (A == Activation::ReLU) return y > 0.0f ? g : 0.0f;
  if constexpr (A == Activation::Tanh) return g * (1.0f - y * y);
  if constexpr (A == Activation::Sigmoid) return g * (y * (1.0f - y));
  return g;
}

}  // namespace xo

// The activations and their derivatives as plain functions, shared by the CPU backend's loops and
// the CUDA backend's kernels, so that both compute the same expressions. They are constexpr, like
// dropout_keep in core/random.h: nvcc compiles them for the device (--expt-relaxed-constexpr),
// where std::tanh, std::exp and std::sqrt are the device's tanhf, expf and sqrtf.
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "backend/backend.h"
#include "core/error.h"

namespace xo {

// What an activation reads besides its input: LeakyReLU's slope below zero. The others have no
// parameter, which is why only they fuse into a Linear or a Conv2d epilogue
// (with_fused_activation).
struct ActivationParams {
  float negative_slope = 0.0f;
};

// relu(x) = x > 0 ? x : 0, tanh(x), sigmoid(x) = 1 / (1 + exp(-x)), leaky_relu(x) = x > 0 ? x :
// slope x; None is the identity.
template <Activation A>
constexpr float activate(float x, ActivationParams p = {}) {
  if constexpr (A == Activation::ReLU) return x > 0.0f ? x : 0.0f;
  if constexpr (A == Activation::LeakyReLU) return x > 0.0f ? x : p.negative_slope * x;
  if constexpr (A == Activation::Tanh) return std::tanh(x);
  if constexpr (A == Activation::Sigmoid) return 1.0f / (1.0f + std::exp(-x));
  return x;
}

// g times the activation's derivative, computed from the activation's output y (what forward
// keeps): relu' = [y > 0], tanh' = 1 - y^2, sigmoid' = y (1 - y), leaky_relu' = y > 0 ? 1 : slope
// (a slope >= 0 keeps the sign of x in y; at x = 0 it is the slope, as PyTorch's); None's is 1.
template <Activation A>
constexpr float derivative_times(float y, float g, ActivationParams p = {}) {
  if constexpr (A == Activation::ReLU) return y > 0.0f ? g : 0.0f;
  if constexpr (A == Activation::LeakyReLU) return y > 0.0f ? g : p.negative_slope * g;
  if constexpr (A == Activation::Tanh) return g * (1.0f - y * y);
  if constexpr (A == Activation::Sigmoid) return g * (y * (1.0f - y));
  return g;
}

// Whether a SIMD loop of the activation rounds as its scalar loop does: no call into libm, whose
// vector tanh and exp need not round as the scalar ones (the CPU keeps those loops scalar).
template <Activation A>
constexpr bool exact_in_simd() {
  return A != Activation::Tanh && A != Activation::Sigmoid;
}

template <Activation A>
using ActivationConstant = std::integral_constant<Activation, A>;

// f(ActivationConstant<A>{}) for the activation `act`: the one place where the standalone
// activation kernels (cpu/activation.cpp, cuda/activation.cu) turn the runtime activation into
// their template argument, so that a new activation reaches them from here.
template <typename F>
decltype(auto) with_activation(Activation act, F&& f) {
  switch (act) {
    case Activation::ReLU:
      return f(ActivationConstant<Activation::ReLU>{});
    case Activation::Tanh:
      return f(ActivationConstant<Activation::Tanh>{});
    case Activation::Sigmoid:
      return f(ActivationConstant<Activation::Sigmoid>{});
    case Activation::LeakyReLU:
      return f(ActivationConstant<Activation::LeakyReLU>{});
    case Activation::None:
      break;
  }
  return f(ActivationConstant<Activation::None>{});
}

// Whether a Linear or a Conv2d computes the activation in its epilogue: those without a
// parameter, which the epilogues (a oneDNN post-op, the CUDA kernels' last line) do not carry.
// The layer kinds' table (model/layer_kinds.cpp) reads it for its activation rows.
constexpr bool fuses_into_epilogue(Activation a) { return a != Activation::LeakyReLU; }

// As with_activation, for the activations a Linear or a Conv2d computes in its epilogue
// (cpu/linear.cpp, cuda/linear.cu, cuda/conv.cu); any other is an internal error.
template <typename F>
decltype(auto) with_fused_activation(Activation act, F&& f) {
  XO_ASSERT(fuses_into_epilogue(act));
  return with_activation(act, [&](auto a) -> decltype(f(ActivationConstant<Activation::None>{})) {
    if constexpr (fuses_into_epilogue(decltype(a)::value)) {
      return f(a);
    } else {
      return f(ActivationConstant<Activation::None>{});  // not reached: asserted above
    }
  });
}

}  // namespace xo

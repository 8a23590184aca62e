// The optimizers' update rules (torch.optim's) for one parameter, as plain functions shared by the
// CPU backend's loops and the CUDA backend's kernels, so that both apply the same expressions in
// the same order. They are constexpr, like dropout_keep in core/random.h: nvcc compiles them for
// the device (--expt-relaxed-constexpr), where std::sqrt and std::pow are the device's.
//
// Hyperparameters arrive in double (the settings) and are rounded to f32 once, in the
// *_coefficients functions; the per-parameter arithmetic is f32.
#pragma once

#include <cmath>

namespace xo {

// SGD with momentum, dampening, Nesterov and weight decay (an L2 penalty added to the gradient).
struct SgdCoefficients {
  float lr = 0;
  float weight_decay = 0;
  float momentum = 0;  // 0: plain SGD, no momentum buffer
  float damp = 1;      // 1 - dampening
  bool nesterov = false;
};
constexpr SgdCoefficients sgd_coefficients(double lr, double weight_decay, double momentum,
                                           double dampening, bool nesterov) {
  return {static_cast<float>(lr), static_cast<float>(weight_decay), static_cast<float>(momentum),
          1.0f - static_cast<float>(dampening), nesterov};
}

// p -= lr (g + wd p).
constexpr void sgd_update(float& param, float grad, const SgdCoefficients& c) {
  param -= c.lr * (grad + c.weight_decay * param);
}

// b = mu b + (1 - dampening) g, except on the first step, where torch.optim.SGD starts the buffer
// at the gradient; p -= lr (Nesterov ? g + mu b : b).
constexpr void sgd_momentum_update(float& param, float grad, float& buf, bool first,
                                   const SgdCoefficients& c) {
  const float g = grad + c.weight_decay * param;
  const float b = first ? g : c.momentum * buf + c.damp * g;
  buf = b;
  param -= c.lr * (c.nesterov ? g + c.momentum * b : b);
}

// Adam and AdamW. AdamW shrinks the weights before the update (decoupled decay: shrink = 1 - lr wd,
// l2 = 0); Adam adds wd p to the gradient (an L2 penalty: shrink = 1, l2 = wd). Both as in
// torch.optim.
struct AdamCoefficients {
  float beta1 = 0, beta2 = 0, eps = 0;
  float shrink = 1;
  float l2 = 0;
};
constexpr AdamCoefficients adam_coefficients(double lr, double weight_decay, double beta1,
                                             double beta2, double eps, bool decoupled) {
  const float lr_f = static_cast<float>(lr), wd = static_cast<float>(weight_decay);
  return {static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(eps),
          decoupled ? 1.0f - lr_f * wd : 1.0f, decoupled ? 0.0f : wd};
}

// What Adam's bias correction makes of step t (counted from 1): computed in double, then rounded.
struct AdamStepScale {
  float step_size = 0;  // lr / (1 - beta1^t)
  float sqrt_bc2 = 0;   // sqrt(1 - beta2^t)
};
constexpr AdamStepScale adam_step_scale(double lr, double beta1, double beta2, double t) {
  return {static_cast<float>(lr / (1.0 - std::pow(beta1, t))),
          static_cast<float>(std::sqrt(1.0 - std::pow(beta2, t)))};
}

// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p = shrink p - step_size m / (sqrt(v) / sqrt_bc2
// + eps), with g the gradient plus the L2 penalty.
constexpr void adam_update(float& param, float grad, float& m, float& v, const AdamCoefficients& c,
                           const AdamStepScale& s) {
  const float p = param * c.shrink;
  const float g = grad + c.l2 * param;
  const float mi = c.beta1 * m + (1.0f - c.beta1) * g;
  const float vi = c.beta2 * v + (1.0f - c.beta2) * g * g;
  m = mi;
  v = vi;
  param = p - s.step_size * mi / (std::sqrt(vi) / s.sqrt_bc2 + c.eps);
}

// RMSprop without momentum, not centered.
struct RmspropCoefficients {
  float lr = 0, eps = 0, alpha = 0, weight_decay = 0;
};
constexpr RmspropCoefficients rmsprop_coefficients(double lr, double eps, double alpha,
                                                   double weight_decay) {
  return {static_cast<float>(lr), static_cast<float>(eps), static_cast<float>(alpha),
          static_cast<float>(weight_decay)};
}

// v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps).
constexpr void rmsprop_update(float& param, float grad, float& v, const RmspropCoefficients& c) {
  const float g = grad + c.weight_decay * param;
  const float vi = c.alpha * v + (1.0f - c.alpha) * g * g;
  v = vi;
  param -= c.lr * g / (std::sqrt(vi) + c.eps);
}

struct AdadeltaCoefficients {
  float lr = 0, eps = 0, rho = 0, weight_decay = 0;
};
constexpr AdadeltaCoefficients adadelta_coefficients(double lr, double eps, double rho,
                                                     double weight_decay) {
  return {static_cast<float>(lr), static_cast<float>(eps), static_cast<float>(rho),
          static_cast<float>(weight_decay)};
}

// v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g; u = rho u + (1 - rho) d^2;
// p -= lr d.
constexpr void adadelta_update(float& param, float grad, float& v, float& u,
                               const AdadeltaCoefficients& c) {
  const float g = grad + c.weight_decay * param;
  const float vi = c.rho * v + (1.0f - c.rho) * g * g;
  const float d = std::sqrt(u + c.eps) / std::sqrt(vi + c.eps) * g;
  v = vi;
  u = c.rho * u + (1.0f - c.rho) * d * d;
  param -= c.lr * d;
}

}  // namespace xo

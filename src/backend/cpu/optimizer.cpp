// Optimizers on the CPU as single fused passes over the flat parameter and gradient buffers, with
// torch.optim's update rules (SGD with momentum/dampening/Nesterov/weight decay, Adam, AdamW,
// RMSprop without momentum or centering, Adadelta).
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace xo::cpu {
namespace {

struct AlignedFloats {
  explicit AlignedFloats(int64_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64 + 64)),
             std::free) {
    if (!data) throw std::bad_alloc();
    std::fill(data.get(), data.get() + n, 0.0f);
  }
  std::unique_ptr<float, decltype(&std::free)> data;
};

class CpuSgd final : public OptimizerKernel {
 public:
  CpuSgd(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), momentum_(s.momentum > 0 ? n : 0) {}

  void step(float* params, const float* grads) override {
    const float lr = static_cast<float>(s_.lr), wd = static_cast<float>(s_.weight_decay);
    const float mu = static_cast<float>(s_.momentum),
                damp = 1.0f - static_cast<float>(s_.dampening);
    const int64_t n = n_;
    if (mu == 0.0f) {
      parallel_for(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
      });
    } else {
      float* buf = momentum_.data.get();
      const bool first = steps_ == 0;  // torch.optim.SGD starts the buffer at the first gradient
      const bool nesterov = s_.nesterov;
      parallel_for(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          const float g = grads[i] + wd * params[i];
          const float b = first ? g : mu * buf[i] + damp * g;
          buf[i] = b;
          params[i] -= lr * (nesterov ? g + mu * b : b);
        }
      });
    }
    ++steps_;
  }
  int64_t steps() const override { return steps_; }

 private:
  OptimizerSettings s_;
  int64_t n_;
  AlignedFloats momentum_;
  int64_t steps_ = 0;
};

class CpuAdam final : public OptimizerKernel {
 public:
  CpuAdam(const OptimizerSettings& s, int64_t n, bool decoupled)
      : s_(s), n_(n), decoupled_(decoupled), m_(n), v_(n) {}

  void step(float* params, const float* grads) override {
    ++steps_;
    const double t = static_cast<double>(steps_);
    const float b1 = static_cast<float>(s_.beta1), b2 = static_cast<float>(s_.beta2);
    const float lr = static_cast<float>(s_.lr), eps = static_cast<float>(s_.eps);
    const float wd = static_cast<float>(s_.weight_decay);
    const float step_size = static_cast<float>(s_.lr / (1.0 - std::pow(s_.beta1, t)));
    const float sqrt_bc2 = static_cast<float>(std::sqrt(1.0 - std::pow(s_.beta2, t)));
    // AdamW shrinks the weights before the update (decoupled decay); Adam adds wd * p to the
    // gradient (L2 penalty). Both as in torch.optim.
    const float shrink = decoupled_ ? 1.0f - lr * wd : 1.0f;
    const float l2 = decoupled_ ? 0.0f : wd;
    float* m = m_.data.get();
    float* v = v_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        const float p = params[i] * shrink;
        const float g = grads[i] + l2 * params[i];
        const float mi = b1 * m[i] + (1.0f - b1) * g;
        const float vi = b2 * v[i] + (1.0f - b2) * g * g;
        m[i] = mi;
        v[i] = vi;
        params[i] = p - step_size * mi / (std::sqrt(vi) / sqrt_bc2 + eps);
      }
    });
  }
  int64_t steps() const override { return steps_; }

 private:
  OptimizerSettings s_;
  int64_t n_;
  bool decoupled_;
  AlignedFloats m_, v_;
  int64_t steps_ = 0;
};

// torch.optim.RMSprop: v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps).
class CpuRmsprop final : public OptimizerKernel {
 public:
  CpuRmsprop(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), v_(n) {}

  void step(float* params, const float* grads) override {
    const float lr = static_cast<float>(s_.lr), eps = static_cast<float>(s_.eps);
    const float alpha = static_cast<float>(s_.alpha), wd = static_cast<float>(s_.weight_decay);
    float* v = v_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        const float g = grads[i] + wd * params[i];
        const float vi = alpha * v[i] + (1.0f - alpha) * g * g;
        v[i] = vi;
        params[i] -= lr * g / (std::sqrt(vi) + eps);
      }
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }

 private:
  OptimizerSettings s_;
  int64_t n_;
  AlignedFloats v_;
  int64_t steps_ = 0;
};

// torch.optim.Adadelta: v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g;
// u = rho u + (1 - rho) d^2; p -= lr d.
class CpuAdadelta final : public OptimizerKernel {
 public:
  CpuAdadelta(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), v_(n), u_(n) {}

  void step(float* params, const float* grads) override {
    const float lr = static_cast<float>(s_.lr), eps = static_cast<float>(s_.eps);
    const float rho = static_cast<float>(s_.rho), wd = static_cast<float>(s_.weight_decay);
    float* v = v_.data.get();
    float* u = u_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        const float g = grads[i] + wd * params[i];
        const float vi = rho * v[i] + (1.0f - rho) * g * g;
        const float d = std::sqrt(u[i] + eps) / std::sqrt(vi + eps) * g;
        v[i] = vi;
        u[i] = rho * u[i] + (1.0f - rho) * d * d;
        params[i] -= lr * d;
      }
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }

 private:
  OptimizerSettings s_;
  int64_t n_;
  AlignedFloats v_, u_;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerSettings& spec, int64_t parameters) {
  switch (spec.type) {
    case OptimizerType::SGD:
      return std::make_unique<CpuSgd>(spec, parameters);
    case OptimizerType::Adam:
      return std::make_unique<CpuAdam>(spec, parameters, false);
    case OptimizerType::AdamW:
      return std::make_unique<CpuAdam>(spec, parameters, true);
    case OptimizerType::RMSprop:
      return std::make_unique<CpuRmsprop>(spec, parameters);
    case OptimizerType::Adadelta:
      return std::make_unique<CpuAdadelta>(spec, parameters);
  }
  return nullptr;
}

}  // namespace xo::cpu

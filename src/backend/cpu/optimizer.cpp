// Optimizers on the CPU as single fused passes over the flat parameter and gradient buffers, with
// torch.optim's update rules (SGD with momentum/dampening/Nesterov/weight decay, Adam, AdamW,
// RMSprop without momentum or centering, Adadelta), written once for both backends in
// optim/update_math.h.
#include <cstdlib>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "optim/update_math.h"

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

// Each pass below copies its coefficients into the worker's locals before the loop. Read through
// the lambda's captures, they might alias the arrays the loop writes, so the compiler would load
// them again in every iteration (measured on 100,000 parameters and one thread: plain SGD's pass
// takes ~25% less time with the copies, the others the same or a few percent less).
class CpuSgd final : public OptimizerKernel {
 public:
  CpuSgd(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), momentum_(s.momentum > 0 ? n : 0) {}

  void step(float* params, const float* grads) override {
    const SgdCoefficients coefficients =
        sgd_coefficients(s_.lr, s_.weight_decay, s_.momentum, s_.dampening, s_.nesterov);
    const int64_t n = n_;
    if (coefficients.momentum == 0.0f) {
      parallel_for(n, [=](int64_t begin, int64_t end) {
        const SgdCoefficients c = coefficients;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) sgd_update(params[i], grads[i], c);
      });
    } else {
      float* buf = momentum_.data.get();
      const bool first = steps_ == 0;  // the momentum buffer starts at the first gradient
      parallel_for(n, [=](int64_t begin, int64_t end) {
        const SgdCoefficients c = coefficients;
#pragma omp simd
        for (int64_t i = begin; i < end; ++i)
          sgd_momentum_update(params[i], grads[i], buf[i], first, c);
      });
    }
    ++steps_;
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    if (s_.momentum <= 0) return {};
    return {{"momentum_buffer", momentum_.data.get()}};
  }

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
    const AdamCoefficients coefficients =
        adam_coefficients(s_.lr, s_.weight_decay, s_.beta1, s_.beta2, s_.eps, decoupled_);
    const AdamStepScale scale =
        adam_step_scale(s_.lr, s_.beta1, s_.beta2, static_cast<double>(steps_));
    float* m = m_.data.get();
    float* v = v_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const AdamCoefficients c = coefficients;
      const AdamStepScale s = scale;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) adam_update(params[i], grads[i], m[i], v[i], c, s);
    });
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    return {{"exp_avg", m_.data.get()}, {"exp_avg_sq", v_.data.get()}};
  }

 private:
  OptimizerSettings s_;
  int64_t n_;
  bool decoupled_;
  AlignedFloats m_, v_;
  int64_t steps_ = 0;
};

class CpuRmsprop final : public OptimizerKernel {
 public:
  CpuRmsprop(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), v_(n) {}

  void step(float* params, const float* grads) override {
    const RmspropCoefficients coefficients =
        rmsprop_coefficients(s_.lr, s_.eps, s_.alpha, s_.weight_decay);
    float* v = v_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const RmspropCoefficients c = coefficients;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) rmsprop_update(params[i], grads[i], v[i], c);
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  std::vector<OptimizerStateBuffer> state_buffers() override { return {{"square_avg", v_.data.get()}}; }

 private:
  OptimizerSettings s_;
  int64_t n_;
  AlignedFloats v_;
  int64_t steps_ = 0;
};

class CpuAdadelta final : public OptimizerKernel {
 public:
  CpuAdadelta(const OptimizerSettings& s, int64_t n) : s_(s), n_(n), v_(n), u_(n) {}

  void step(float* params, const float* grads) override {
    const AdadeltaCoefficients coefficients =
        adadelta_coefficients(s_.lr, s_.eps, s_.rho, s_.weight_decay);
    float* v = v_.data.get();
    float* u = u_.data.get();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const AdadeltaCoefficients c = coefficients;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) adadelta_update(params[i], grads[i], v[i], u[i], c);
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    return {{"square_avg", v_.data.get()}, {"acc_delta", u_.data.get()}};
  }

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

// Optimizers on the CPU as single fused passes over the flat parameter and gradient buffers, with
// torch.optim's update rules (SGD with momentum/dampening/Nesterov/weight decay, Adam, AdamW,
// RMSprop without momentum or centering, Adadelta), written once for both backends in
// optim/update_math.h.
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "optim/update_math.h"

namespace xo::cpu {
namespace {

// The optimizer's state: `n` floats, zeroed, from the backend (so that planning counts them and a
// failed allocation is an OutOfMemory naming the size).
DeviceBuffer state_floats(Backend& be, int64_t n) { return be.allocate(sizeof(float) * n); }

// Each pass below copies its coefficients into the worker's locals before the loop. Read through
// the lambda's captures, they might alias the arrays the loop writes, so the compiler would load
// them again in every iteration (measured on 100,000 parameters and one thread: plain SGD's pass
// takes ~25% less time with the copies, the others the same or a few percent less).
class CpuSgd final : public OptimizerKernel {
 public:
  // The momentum buffer exists exactly when step() takes the momentum path (mu != 0 in f32).
  CpuSgd(Backend& be, const OptimizerSettings& s, int64_t n) : s_(s), n_(n) {
    if (static_cast<float>(s.momentum) != 0.0f) momentum_ = state_floats(be, n);
  }

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
      float* buf = momentum_.as<float>();
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
  // step() computes its coefficients from s_.lr every time: the next step takes the new rate.
  void set_learning_rate(double lr) override { s_.lr = lr; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    if (!momentum_) return {};
    return {{"momentum_buffer", momentum_.as<float>()}};
  }

 private:
  OptimizerSettings s_;
  int64_t n_;
  DeviceBuffer momentum_;
  int64_t steps_ = 0;
};

class CpuAdam final : public OptimizerKernel {
 public:
  CpuAdam(Backend& be, const OptimizerSettings& s, int64_t n, bool decoupled)
      : s_(s), n_(n), decoupled_(decoupled), m_(state_floats(be, n)), v_(state_floats(be, n)) {}

  void step(float* params, const float* grads) override {
    ++steps_;
    const AdamCoefficients coefficients =
        adam_coefficients(s_.lr, s_.weight_decay, s_.beta1, s_.beta2, s_.eps, decoupled_);
    const AdamStepScale scale =
        adam_step_scale(s_.lr, s_.beta1, s_.beta2, static_cast<double>(steps_));
    float* m = m_.as<float>();
    float* v = v_.as<float>();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const AdamCoefficients c = coefficients;
      const AdamStepScale s = scale;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) adam_update(params[i], grads[i], m[i], v[i], c, s);
    });
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  // step() computes its coefficients and the bias-corrected step scale (lr / (1 - beta1^t)) from
  // s_.lr every time: the next step takes the new rate.
  void set_learning_rate(double lr) override { s_.lr = lr; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    return {{"exp_avg", m_.as<float>()}, {"exp_avg_sq", v_.as<float>()}};
  }

 private:
  OptimizerSettings s_;
  int64_t n_;
  bool decoupled_;
  DeviceBuffer m_, v_;
  int64_t steps_ = 0;
};

class CpuRmsprop final : public OptimizerKernel {
 public:
  CpuRmsprop(Backend& be, const OptimizerSettings& s, int64_t n)
      : s_(s), n_(n), v_(state_floats(be, n)) {}

  void step(float* params, const float* grads) override {
    const RmspropCoefficients coefficients =
        rmsprop_coefficients(s_.lr, s_.eps, s_.alpha, s_.weight_decay);
    float* v = v_.as<float>();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const RmspropCoefficients c = coefficients;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) rmsprop_update(params[i], grads[i], v[i], c);
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  // step() computes its coefficients from s_.lr every time: the next step takes the new rate.
  void set_learning_rate(double lr) override { s_.lr = lr; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    return {{"square_avg", v_.as<float>()}};
  }

 private:
  OptimizerSettings s_;
  int64_t n_;
  DeviceBuffer v_;
  int64_t steps_ = 0;
};

class CpuAdadelta final : public OptimizerKernel {
 public:
  CpuAdadelta(Backend& be, const OptimizerSettings& s, int64_t n)
      : s_(s), n_(n), v_(state_floats(be, n)), u_(state_floats(be, n)) {}

  void step(float* params, const float* grads) override {
    const AdadeltaCoefficients coefficients =
        adadelta_coefficients(s_.lr, s_.eps, s_.rho, s_.weight_decay);
    float* v = v_.as<float>();
    float* u = u_.as<float>();
    parallel_for(n_, [=](int64_t begin, int64_t end) {
      const AdadeltaCoefficients c = coefficients;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) adadelta_update(params[i], grads[i], v[i], u[i], c);
    });
    ++steps_;
  }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }
  // step() computes its coefficients from s_.lr every time: the next step takes the new rate.
  void set_learning_rate(double lr) override { s_.lr = lr; }
  std::vector<OptimizerStateBuffer> state_buffers() override {
    return {{"square_avg", v_.as<float>()}, {"acc_delta", u_.as<float>()}};
  }

 private:
  OptimizerSettings s_;
  int64_t n_;
  DeviceBuffer v_, u_;
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_optimizer(Backend& be, const OptimizerSettings& spec,
                                                int64_t parameters) {
  switch (spec.type) {
    case OptimizerType::SGD:
      return std::make_unique<CpuSgd>(be, spec, parameters);
    case OptimizerType::Adam:
      return std::make_unique<CpuAdam>(be, spec, parameters, false);
    case OptimizerType::AdamW:
      return std::make_unique<CpuAdam>(be, spec, parameters, true);
    case OptimizerType::RMSprop:
      return std::make_unique<CpuRmsprop>(be, spec, parameters);
    case OptimizerType::Adadelta:
      return std::make_unique<CpuAdadelta>(be, spec, parameters);
  }
  return nullptr;
}

}  // namespace xo::cpu

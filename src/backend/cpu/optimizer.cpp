// Optimizers on the CPU as single fused passes over the flat parameter and gradient buffers, with
// torch.optim's update rules (SGD with momentum/dampening/Nesterov/weight decay, Adam, AdamW,
// RMSprop without momentum or centering, Adadelta), written once for both backends in
// optim/update_math.h.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/primitive.h"
#include "core/error.h"
#include "optim/update_math.h"

namespace xo::cpu {
namespace {

// What every CPU optimizer shares: its settings, its step count and its state buffers (each as
// many floats as the flat buffer, zeroed, from the backend, so that planning counts them and a
// failed allocation is an OutOfMemory naming the size). A step is one parallel pass, each thread
// over its range in pieces: a data-parallel rank's part (step_part) first sums the other ranks'
// gradients into its own, piece by piece, and updates each piece while it is in the caches. At
// bf16 the pass also writes the parameters' bf16 copy, piece by piece, for the products of the
// next forward and backward (Bf16Weights).
class CpuOptimizer : public OptimizerKernel {
 public:
  CpuOptimizer(Backend& be, const OptimizerSettings& s, int64_t n, std::vector<const char*> names,
               Bf16Weights* kept)
      : s_(s), n_(n), names_(std::move(names)), kept_(kept) {
    XO_ASSERT(names_.size() <= 2);  // pass() hands update() two state pointers at most
    for (size_t k = 0; k < names_.size(); ++k) state_.push_back(be.allocate(sizeof(float) * n));
    if (kept_) copy_ = be.allocate(sizeof(uint16_t) * n);
  }
  ~CpuOptimizer() override {
    if (kept_) kept_->forget(this);
  }
  CpuOptimizer(const CpuOptimizer&) = delete;
  CpuOptimizer& operator=(const CpuOptimizer&) = delete;

  void step(float* params, const float* grads) final {
    pass(params, grads, nullptr, {}, 0, n_);
    if (kept_) kept_->keep(this, params, n_, copy_.as<uint16_t>());
  }
  // At bf16 the copy is whole once every rank's part is done: the ranks share it
  // (swap_weights_copy), and the data-parallel code waits for them all before the next forward.
  void step_part(float* params, float* grads, const std::vector<const float*>& add, int64_t begin,
                 int64_t end) final {
    XO_ASSERT(0 <= begin && begin <= end && end <= n_);
    XO_ASSERT(!kept_ || copy_moved_);
    pass(params, grads, grads, add, begin, end);
    if (kept_) kept_->keep(this, params, n_, copy_.as<uint16_t>());
  }
  int64_t steps() const final { return steps_; }
  void set_steps(int64_t steps) final { steps_ = steps; }
  // prepare() computes the coefficients from s_.lr at every step: the next step takes the new rate.
  void set_learning_rate(double lr) final { s_.lr = lr; }
  std::vector<OptimizerStateBuffer> state_buffers() final {
    std::vector<OptimizerStateBuffer> out;
    for (size_t k = 0; k < state_.size(); ++k) out.push_back({names_[k], state_[k].as<float>()});
    return out;
  }
  size_t weights_copy_bytes() const final { return kept_ ? sizeof(uint16_t) * n_ : 0; }
  std::vector<DeviceBuffer> swap_state(std::vector<DeviceBuffer> memory) final {
    XO_ASSERT(memory.size() == state_.size());
    for (const DeviceBuffer& m : memory) XO_ASSERT(m.bytes() >= sizeof(float) * n_);
    std::swap(memory, state_);
    return memory;
  }
  DeviceBuffer swap_weights_copy(DeviceBuffer memory) final {
    XO_ASSERT(kept_ && memory.bytes() >= weights_copy_bytes());
    kept_->forget(this);
    std::swap(memory, copy_);
    copy_moved_ = !copy_moved_;  // moved in to share, back out to unshare
    return memory;
  }

 protected:
  // The coefficients of the step about to run (steps_ steps were taken before it).
  virtual void prepare() = 0;
  // The update of floats [begin, end): the parameters, their gradients and the state buffers (in
  // names' order), indexed from the buffers' start; on the calling thread.
  virtual void update(float* params, const float* grads, float* const* state, int64_t begin,
                      int64_t end) const = 0;

  OptimizerSettings s_;
  int64_t steps_ = 0;

 private:
  // 16 Ki floats: a piece of the summed gradients (64 KiB) is still in the core's L2 cache when
  // its update reads it.
  static constexpr int64_t kPiece = 16 << 10;

  void pass(float* params, const float* grads, float* sum, const std::vector<const float*>& add,
            int64_t begin, int64_t end) {
    prepare();
    float* state[2] = {};
    for (size_t k = 0; k < state_.size(); ++k) state[k] = state_[k].as<float>();
    uint16_t* copy = kept_ ? copy_.as<uint16_t>() : nullptr;
    parallel_for(end - begin, [&](int64_t b, int64_t e) {
      for (int64_t at = begin + b, stop = begin + e; at < stop; at += kPiece) {
        const int64_t to = std::min(stop, at + kPiece);
        for (const float* other : add) {
#pragma omp simd
          for (int64_t i = at; i < to; ++i) sum[i] += other[i];
        }
        update(params, grads, state, at, to);
        if (copy) bf16_row_streamed(params + at, copy + at, to - at);
      }
    });
    ++steps_;
  }

  int64_t n_;
  std::vector<const char*> names_;
  std::vector<DeviceBuffer> state_;
  Bf16Weights* kept_;        // bf16: where the copy is announced current
  DeviceBuffer copy_;        // bf16: the parameters' copy, [n_] bf16
  bool copy_moved_ = false;  // the copy is in memory shared with others (swap_weights_copy)
};

// Each update copies its coefficients into locals before the loop. Read through `this`, they
// might alias the arrays the loop writes, so the compiler would load them again in every iteration
// (measured on 100,000 parameters and one thread: plain SGD's pass takes less time with the copies,
// the others the same or a little less; docs/benchmarks.md, "Figures once quoted in code
// comments").
class CpuSgd final : public CpuOptimizer {
 public:
  // The momentum buffer exists exactly when update() takes the momentum path (mu != 0 in f32).
  CpuSgd(Backend& be, const OptimizerSettings& s, int64_t n, Bf16Weights* kept)
      : CpuOptimizer(be, s, n,
                     static_cast<float>(s.momentum) != 0.0f ? std::vector{"momentum_buffer"}
                                                            : std::vector<const char*>{},
                     kept) {}

 private:
  void prepare() override {
    c_ = sgd_coefficients(s_.lr, s_.weight_decay, s_.momentum, s_.dampening, s_.nesterov);
    first_ = steps_ == 0;  // the momentum buffer starts at the first gradient
  }
  void update(float* params, const float* grads, float* const* state, int64_t begin,
              int64_t end) const override {
    const SgdCoefficients c = c_;
    if (c.momentum == 0.0f) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) sgd_update(params[i], grads[i], c);
    } else {
      float* buf = state[0];
      const bool first = first_;
#pragma omp simd
      for (int64_t i = begin; i < end; ++i)
        sgd_momentum_update(params[i], grads[i], buf[i], first, c);
    }
  }

  SgdCoefficients c_{};
  bool first_ = false;
};

class CpuAdam final : public CpuOptimizer {
 public:
  CpuAdam(Backend& be, const OptimizerSettings& s, int64_t n, bool decoupled, Bf16Weights* kept)
      : CpuOptimizer(be, s, n, {"exp_avg", "exp_avg_sq"}, kept), decoupled_(decoupled) {}

 private:
  // The bias-corrected step scale (lr / (1 - beta1^t)) of step t = steps_ + 1.
  void prepare() override {
    c_ = adam_coefficients(s_.lr, s_.weight_decay, s_.beta1, s_.beta2, s_.eps, decoupled_);
    scale_ = adam_step_scale(s_.lr, s_.beta1, s_.beta2, static_cast<double>(steps_ + 1));
  }
  void update(float* params, const float* grads, float* const* state, int64_t begin,
              int64_t end) const override {
    const AdamCoefficients c = c_;
    const AdamStepScale s = scale_;
    float* m = state[0];
    float* v = state[1];
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) adam_update(params[i], grads[i], m[i], v[i], c, s);
  }

  bool decoupled_;
  AdamCoefficients c_{};
  AdamStepScale scale_{};
};

class CpuRmsprop final : public CpuOptimizer {
 public:
  CpuRmsprop(Backend& be, const OptimizerSettings& s, int64_t n, Bf16Weights* kept)
      : CpuOptimizer(be, s, n, {"square_avg"}, kept) {}

 private:
  void prepare() override { c_ = rmsprop_coefficients(s_.lr, s_.eps, s_.alpha, s_.weight_decay); }
  void update(float* params, const float* grads, float* const* state, int64_t begin,
              int64_t end) const override {
    const RmspropCoefficients c = c_;
    float* v = state[0];
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) rmsprop_update(params[i], grads[i], v[i], c);
  }

  RmspropCoefficients c_{};
};

class CpuAdadelta final : public CpuOptimizer {
 public:
  CpuAdadelta(Backend& be, const OptimizerSettings& s, int64_t n, Bf16Weights* kept)
      : CpuOptimizer(be, s, n, {"square_avg", "acc_delta"}, kept) {}

 private:
  void prepare() override { c_ = adadelta_coefficients(s_.lr, s_.eps, s_.rho, s_.weight_decay); }
  void update(float* params, const float* grads, float* const* state, int64_t begin,
              int64_t end) const override {
    const AdadeltaCoefficients c = c_;
    float* v = state[0];
    float* u = state[1];
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) adadelta_update(params[i], grads[i], v[i], u[i], c);
  }

  AdadeltaCoefficients c_{};
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_optimizer(Backend& be, const OptimizerSettings& spec,
                                                int64_t parameters, Bf16Weights* kept) {
  switch (spec.type) {
    case OptimizerType::SGD:
      return std::make_unique<CpuSgd>(be, spec, parameters, kept);
    case OptimizerType::Adam:
      return std::make_unique<CpuAdam>(be, spec, parameters, false, kept);
    case OptimizerType::AdamW:
      return std::make_unique<CpuAdam>(be, spec, parameters, true, kept);
    case OptimizerType::RMSprop:
      return std::make_unique<CpuRmsprop>(be, spec, parameters, kept);
    case OptimizerType::Adadelta:
      return std::make_unique<CpuAdadelta>(be, spec, parameters, kept);
  }
  return nullptr;
}

}  // namespace xo::cpu

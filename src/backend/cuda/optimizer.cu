// Optimizers on the GPU: one fused element-wise kernel per step over the flat parameter and
// gradient buffers, with the update rules the CPU shares (optim/update_math.h, torch.optim's): SGD
// with momentum, dampening, Nesterov and weight decay (the momentum buffer starts at the first
// gradient), Adam and AdamW (L2 penalty vs decoupled decay, bias-corrected), RMSprop (no momentum,
// not centered) and Adadelta.
//
// A step is recorded once into a CUDA Graph and replayed, so nothing that changes from step to step
// may be a kernel argument: the step count, the learning rate and the coefficients derived from it
// (the hyperparameters in f32) live in device memory. Where the update reads the step count (Adam,
// SGD with momentum), each step first runs a one-thread kernel that increments it and derives what
// depends on it (Adam's bias corrections, computed in double from the rate in device memory exactly
// as the CPU does, then rounded to f32), and the update kernel reads those; where the update does
// not (plain SGD, RMSprop, Adadelta), the update kernel's first thread counts the step itself,
// saving a launch. A schedule changes the rate between epochs (set_learning_rate): the host
// computes the new coefficients with the CPU's functions and uploads them, queued before the next
// replay, so the recorded step takes the new rate with nothing recorded again.
#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "optim/update_math.h"

namespace xo::cuda {
namespace {

// The rate and the coefficients of the steps from the next one on: the host's copy is uploaded
// whole when the rate changes.
struct Rates {
  double lr = 0;  // Adam's step size derives from it at every step
  SgdCoefficients sgd;
  AdamCoefficients adam;
  RmspropCoefficients rmsprop;
  AdadeltaCoefficients adadelta;
};

Rates rates(const OptimizerSettings& s, double lr) {
  Rates r;
  r.lr = lr;
  r.sgd = sgd_coefficients(lr, s.weight_decay, s.momentum, s.dampening, s.nesterov);
  r.adam = adam_coefficients(lr, s.weight_decay, s.beta1, s.beta2, s.eps,
                             s.type == OptimizerType::AdamW);
  r.rmsprop = rmsprop_coefficients(lr, s.eps, s.alpha, s.weight_decay);
  r.adadelta = adadelta_coefficients(lr, s.eps, s.rho, s.weight_decay);
  return r;
}

// The per-step values, in device memory.
struct StepState {
  uint64_t steps;      // steps taken, including the one being applied once begin_step has run
  AdamStepScale adam;  // Adam: the bias corrections of the step being applied
  Rates rates;
};

__device__ __forceinline__ void begin_step(StepState* state, bool adam, double beta1,
                                           double beta2) {
  const uint64_t t = state->steps + 1;
  state->steps = t;
  if (adam) state->adam = adam_step_scale(state->rates.lr, beta1, beta2, static_cast<double>(t));
}

__global__ void begin_step_kernel(StepState* state, bool adam, double beta1, double beta2) {
  begin_step(state, adam, beta1, beta2);
}

// The step counted by the update kernel itself (the kernels that do not read it).
__device__ __forceinline__ void count_step(StepState* state) {
  if (blockIdx.x == 0 && threadIdx.x == 0) state->steps += 1;
}

__global__ void sgd_kernel(float* params, const float* grads, int64_t n, StepState* state) {
  const SgdCoefficients c = state->rates.sgd;
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    sgd_update(params[i], grads[i], c);
  }
}

__global__ void sgd_momentum_kernel(float* params, const float* grads, float* buf, int64_t n,
                                    const StepState* state) {
  const SgdCoefficients c = state->rates.sgd;
  const bool first = state->steps == 1;  // begin_step has counted the step being applied
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    sgd_momentum_update(params[i], grads[i], buf[i], first, c);
  }
}

__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, int64_t n,
                            const StepState* state) {
  const AdamCoefficients c = state->rates.adam;
  const AdamStepScale scale = state->adam;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    adam_update(params[i], grads[i], m[i], v[i], c, scale);
  }
}

__global__ void rmsprop_kernel(float* params, const float* grads, float* v, int64_t n,
                               StepState* state) {
  const RmspropCoefficients c = state->rates.rmsprop;
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    rmsprop_update(params[i], grads[i], v[i], c);
  }
}

__global__ void adadelta_kernel(float* params, const float* grads, float* v, float* u, int64_t n,
                                StepState* state) {
  const AdadeltaCoefficients c = state->rates.adadelta;
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    adadelta_update(params[i], grads[i], v[i], u[i], c);
  }
}

// Fused trials: each trial's optimizer (all of one kind) in one launch, trial blockIdx.y's buffers
// and StepState from its entry; the same updates as the kernels above, trial by trial.
struct TrialOptimizer {
  float* params;
  const float* grads;
  float* first;
  float* second;
  StepState* state;
  double beta1, beta2;
};

__global__ void trials_begin_step_kernel(const TrialOptimizer* trials, int count, bool adam) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < count) begin_step(trials[t].state, adam, trials[t].beta1, trials[t].beta2);
}

__global__ void trials_update_kernel(const TrialOptimizer* trials, int64_t n, OptimizerType type,
                                     bool momentum) {
  const TrialOptimizer b = trials[blockIdx.y];
  StepState* state = b.state;
  const int64_t first_i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  switch (type) {
    case OptimizerType::SGD:
      if (momentum) {
        const SgdCoefficients c = state->rates.sgd;
        const bool first = state->steps == 1;  // the trials' begin step has counted it
        for (int64_t i = first_i; i < n; i += stride)
          sgd_momentum_update(b.params[i], b.grads[i], b.first[i], first, c);
      } else {
        const SgdCoefficients c = state->rates.sgd;
        count_step(state);
        for (int64_t i = first_i; i < n; i += stride) sgd_update(b.params[i], b.grads[i], c);
      }
      return;
    case OptimizerType::Adam:
    case OptimizerType::AdamW: {
      const AdamCoefficients c = state->rates.adam;
      const AdamStepScale scale = state->adam;
      for (int64_t i = first_i; i < n; i += stride)
        adam_update(b.params[i], b.grads[i], b.first[i], b.second[i], c, scale);
      return;
    }
    case OptimizerType::RMSprop: {
      const RmspropCoefficients c = state->rates.rmsprop;
      count_step(state);
      for (int64_t i = first_i; i < n; i += stride)
        rmsprop_update(b.params[i], b.grads[i], b.first[i], c);
      return;
    }
    case OptimizerType::Adadelta: {
      const AdadeltaCoefficients c = state->rates.adadelta;
      count_step(state);
      for (int64_t i = first_i; i < n; i += stride)
        adadelta_update(b.params[i], b.grads[i], b.first[i], b.second[i], c);
      return;
    }
  }
}

class GpuOptimizer final : public OptimizerKernel {
 public:
  GpuOptimizer(CudaBackend& be, const OptimizerSettings& spec, int64_t n)
      : be_(be), s_(spec), type_(spec.type), n_(n) {
    XO_ASSERT(n >= 0);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    state_ = be.allocate(sizeof(StepState));  // zeroed: no steps taken
    upload_rates(s_.lr);
    switch (type_) {
      case OptimizerType::SGD:
        // Exactly when step() takes the momentum path (mu != 0 in f32).
        if (static_cast<float>(s_.momentum) != 0.0f) first_ = be.allocate(bytes);
        break;
      case OptimizerType::Adam:
      case OptimizerType::AdamW:
        first_ = be.allocate(bytes);
        second_ = be.allocate(bytes);
        break;
      case OptimizerType::RMSprop:
        first_ = be.allocate(bytes);
        break;
      case OptimizerType::Adadelta:
        first_ = be.allocate(bytes);
        second_ = be.allocate(bytes);
        break;
    }
  }

  void step(float* params, const float* grads) override {
    const bool adam = type_ == OptimizerType::Adam || type_ == OptimizerType::AdamW;
    StepState* state = state_.as<StepState>();
    const bool reads_step =
        adam || (type_ == OptimizerType::SGD && static_cast<float>(s_.momentum) != 0.0f);
    if (reads_step || n_ == 0) {
      XO_CUDA_LAUNCH(begin_step_kernel, 1, 1, 0, be_.stream(), state, adam, s_.beta1, s_.beta2);
    }
    if (n_ == 0) return;
    const unsigned blocks = blocks_for(n_);
    cudaStream_t stream = be_.stream();
    switch (type_) {
      case OptimizerType::SGD:
        if (static_cast<float>(s_.momentum) == 0.0f) {
          XO_CUDA_LAUNCH(sgd_kernel, blocks, kThreads, 0, stream, params, grads, n_, state);
        } else {
          XO_CUDA_LAUNCH(sgd_momentum_kernel, blocks, kThreads, 0, stream, params, grads,
                         first_.as<float>(), n_, state);
        }
        return;
      case OptimizerType::Adam:
      case OptimizerType::AdamW:
        XO_CUDA_LAUNCH(adam_kernel, blocks, kThreads, 0, stream, params, grads, first_.as<float>(),
                       second_.as<float>(), n_, state);
        return;
      case OptimizerType::RMSprop:
        XO_CUDA_LAUNCH(rmsprop_kernel, blocks, kThreads, 0, stream, params, grads,
                       first_.as<float>(), n_, state);
        return;
      case OptimizerType::Adadelta:
        XO_CUDA_LAUNCH(adadelta_kernel, blocks, kThreads, 0, stream, params, grads,
                       first_.as<float>(), second_.as<float>(), n_, state);
        return;
    }
  }

  // Downloads the device counter: waits for the queued steps.
  int64_t steps() const override {
    static_assert(offsetof(StepState, steps) == 0);
    uint64_t steps = 0;
    be_.download(&steps, state_.as<uint64_t>(), sizeof(steps));
    return static_cast<int64_t>(steps);
  }

  // The counter is the first member of StepState; the rest (Adam's bias corrections) is derived
  // from it by begin_step before the update reads it.
  void set_steps(int64_t steps) override {
    const auto value = static_cast<uint64_t>(steps);
    be_.upload(state_.as<uint64_t>(), &value, sizeof(value));
  }

  // Queued behind the steps already queued (the upload waits for them), before any later one: a
  // recorded step replayed after it reads the new coefficients.
  void set_learning_rate(double lr) override {
    s_.lr = lr;
    upload_rates(lr);
  }

  // What a fused group's one launch for all its trials' steps needs of this one (TrialsUpdate).
  bool reads_step() const {
    const bool adam = type_ == OptimizerType::Adam || type_ == OptimizerType::AdamW;
    return adam || (type_ == OptimizerType::SGD && momentum());
  }
  bool momentum() const { return static_cast<float>(s_.momentum) != 0.0f; }
  OptimizerType type() const { return type_; }
  int64_t parameters() const { return n_; }
  TrialOptimizer trial(float* params, const float* grads) {
    return {params,   grads,   first_.as<float>(), second_.as<float>(), state_.as<StepState>(),
            s_.beta1, s_.beta2};
  }

  std::vector<OptimizerStateBuffer> state_buffers() override {
    switch (type_) {
      case OptimizerType::SGD:
        if (!first_) return {};
        return {{"momentum_buffer", first_.as<float>()}};
      case OptimizerType::Adam:
      case OptimizerType::AdamW:
        return {{"exp_avg", first_.as<float>()}, {"exp_avg_sq", second_.as<float>()}};
      case OptimizerType::RMSprop:
        return {{"square_avg", first_.as<float>()}};
      case OptimizerType::Adadelta:
        return {{"square_avg", first_.as<float>()}, {"acc_delta", second_.as<float>()}};
    }
    return {};
  }

 private:
  void upload_rates(double lr) {
    const Rates r = rates(s_, lr);
    be_.upload(reinterpret_cast<char*>(state_.as<StepState>()) + offsetof(StepState, rates), &r,
               sizeof(r));
  }

  CudaBackend& be_;
  OptimizerSettings s_;
  OptimizerType type_;
  int64_t n_;
  DeviceBuffer state_;   // one StepState
  DeviceBuffer first_;   // SGD momentum, Adam m, RMSprop / Adadelta v
  DeviceBuffer second_;  // Adam v, Adadelta u
};

// The steps of a fused group's trials, one launch for all (two where the update reads the step:
// the trials' counts and Adam's corrections first, as GpuOptimizer::step does for one).
class GpuTrialsUpdate final : public TrialsUpdate {
 public:
  GpuTrialsUpdate(CudaBackend& be, std::vector<TrialOptimizer> trials, const GpuOptimizer& first)
      : be_(be),
        count_(static_cast<int>(trials.size())),
        n_(first.parameters()),
        type_(first.type()),
        momentum_(first.momentum()),
        reads_step_(first.reads_step()),
        trials_(be.allocate(trials.size() * sizeof(TrialOptimizer))) {
    be.upload(trials_.as<TrialOptimizer>(), trials.data(), trials.size() * sizeof(TrialOptimizer));
  }

  void run() override {
    const bool adam = type_ == OptimizerType::Adam || type_ == OptimizerType::AdamW;
    const TrialOptimizer* trials = trials_.as<TrialOptimizer>();
    if (reads_step_ || n_ == 0) {
      XO_CUDA_LAUNCH(trials_begin_step_kernel, blocks_for(count_), kThreads, 0, be_.stream(),
                     trials, count_, adam);
    }
    if (n_ == 0) return;
    XO_CUDA_LAUNCH(trials_update_kernel, dim3(blocks_for(n_), static_cast<unsigned>(count_)),
                   kThreads, 0, be_.stream(), trials, n_, type_, momentum_);
  }

 private:
  CudaBackend& be_;
  int count_;
  int64_t n_;
  OptimizerType type_;
  bool momentum_, reads_step_;
  DeviceBuffer trials_;  // [count] TrialOptimizer
};

}  // namespace

std::unique_ptr<TrialsUpdate> make_trials_update(
    CudaBackend& be, const std::vector<TrialsStepShape::Trial>& trials) {
  std::vector<TrialOptimizer> entries;
  const GpuOptimizer* first = nullptr;
  for (const TrialsStepShape::Trial& t : trials) {
    auto* o = dynamic_cast<GpuOptimizer*>(t.optimizer);
    if (o == nullptr) return nullptr;
    if (first == nullptr) first = o;
    // One launch takes one kind of update over buffers of one size.
    if (o->type() != first->type() || o->momentum() != first->momentum() ||
        o->parameters() != first->parameters())
      return nullptr;
    entries.push_back(o->trial(t.params, t.grads));
  }
  if (first == nullptr) return nullptr;
  return std::make_unique<GpuTrialsUpdate>(be, std::move(entries), *first);
}

std::unique_ptr<OptimizerKernel> make_optimizer(CudaBackend& be, const OptimizerSettings& spec,
                                                int64_t parameters) {
  return std::make_unique<GpuOptimizer>(be, spec, parameters);
}

}  // namespace xo::cuda

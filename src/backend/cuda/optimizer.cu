// Optimizers on the GPU: one fused element-wise kernel per step over the flat parameter and
// gradient buffers, with the update rules the CPU shares (optim/update_math.h, torch.optim's): SGD
// with momentum, dampening, Nesterov and weight decay (the momentum buffer starts at the first
// gradient), Adam and AdamW (L2 penalty vs decoupled decay, bias-corrected), RMSprop (no momentum,
// not centered) and Adadelta.
//
// A step is recorded once into a CUDA Graph and launched as a whole, so nothing that changes from
// step to step may be a kernel argument: the step count, the learning rate and the coefficients
// derived from it (the hyperparameters in f32) live in device memory. Where the update reads the
// step count (Adam, SGD with momentum), each step first runs a one-thread kernel that increments it
// and derives what depends on it (Adam's bias corrections, computed in double from the rate in
// device memory exactly as the CPU does, then rounded to f32), and the update kernel reads those;
// where the update does not (plain SGD, RMSprop, Adadelta), the update kernel's first thread counts
// the step itself, saving a launch. A schedule changes the rate between epochs (set_learning_rate):
// the host computes the new coefficients with the CPU's functions and uploads them, queued before
// the next launch, so the recorded step takes the new rate with nothing recorded again.
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

// The buffers and per-step values of one optimizer's step: its parameters and gradients, its state
// buffers (SGD momentum, Adam m and v, RMSprop v, Adadelta v and u) and its StepState, and Adam's
// betas for begin_step.
struct UpdateBuffers {
  float* params;
  const float* grads;
  float* first;
  float* second;
  StepState* state;
  double beta1, beta2;
};

// One step of the update rule over elements [0, n) of b's buffers (grid-stride over blockIdx.x),
// with the rates and counts in b's StepState.
__device__ __forceinline__ void update(const UpdateBuffers& b, int64_t n, OptimizerType type,
                                       bool momentum) {
  StepState* state = b.state;
  const int64_t first_i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  switch (type) {
    case OptimizerType::SGD: {
      const SgdCoefficients c = state->rates.sgd;
      if (momentum) {
        const bool first = state->steps == 1;  // begin_step has counted the step being applied
        for (int64_t i = first_i; i < n; i += stride)
          sgd_momentum_update(b.params[i], b.grads[i], b.first[i], first, c);
      } else {
        count_step(state);
        for (int64_t i = first_i; i < n; i += stride) sgd_update(b.params[i], b.grads[i], c);
      }
      return;
    }
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

__global__ void update_kernel(UpdateBuffers b, int64_t n, OptimizerType type, bool momentum) {
  update(b, n, type, momentum);
}

// Fused models: each model's optimizer (all of one kind) in one launch, model blockIdx.y's buffers
// and StepState from its entry.
__global__ void fused_begin_step_kernel(const UpdateBuffers* models, int count, bool adam) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < count) begin_step(models[t].state, adam, models[t].beta1, models[t].beta2);
}

__global__ void fused_update_kernel(const UpdateBuffers* models, int64_t n, OptimizerType type,
                                    bool momentum) {
  update(models[blockIdx.y], n, type, momentum);
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
        if (momentum()) first_ = be.allocate(bytes);
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
    StepState* state = state_.as<StepState>();
    if (reads_step() || n_ == 0) {
      XO_CUDA_LAUNCH(begin_step_kernel, 1, 1, 0, be_.stream(), state, adam(), s_.beta1, s_.beta2);
    }
    if (n_ == 0) return;
    XO_CUDA_LAUNCH(update_kernel, blocks_for(n_), kThreads, 0, be_.stream(), buffers(params, grads),
                   n_, type_, momentum());
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
  // recorded step launched after it reads the new coefficients.
  void set_learning_rate(double lr) override {
    s_.lr = lr;
    upload_rates(lr);
  }

  // What a step launches (and a fused group's one launch for all its models' steps, FusedUpdate):
  // whether the update reads the step count (begin_step first), the kind of update, its buffers.
  bool adam() const { return type_ == OptimizerType::Adam || type_ == OptimizerType::AdamW; }
  bool momentum() const { return static_cast<float>(s_.momentum) != 0.0f; }
  bool reads_step() const { return adam() || (type_ == OptimizerType::SGD && momentum()); }
  OptimizerType type() const { return type_; }
  int64_t parameters() const { return n_; }
  UpdateBuffers buffers(float* params, const float* grads) {
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

// The steps of a fused group's models, one launch for all (two where the update reads the step:
// the models' counts and Adam's corrections first, as GpuOptimizer::step does for one).
class GpuFusedUpdate final : public FusedUpdate {
 public:
  GpuFusedUpdate(CudaBackend& be, std::vector<UpdateBuffers> models, const GpuOptimizer& first)
      : be_(be),
        count_(static_cast<int>(models.size())),
        n_(first.parameters()),
        type_(first.type()),
        adam_(first.adam()),
        momentum_(first.momentum()),
        reads_step_(first.reads_step()),
        models_(be.allocate(models.size() * sizeof(UpdateBuffers))) {
    be.upload(models_.as<UpdateBuffers>(), models.data(), models.size() * sizeof(UpdateBuffers));
  }

  void run() override {
    const UpdateBuffers* models = models_.as<UpdateBuffers>();
    if (reads_step_ || n_ == 0) {
      XO_CUDA_LAUNCH(fused_begin_step_kernel, blocks_for(count_), kThreads, 0, be_.stream(), models,
                     count_, adam_);
    }
    if (n_ == 0) return;
    XO_CUDA_LAUNCH(fused_update_kernel, dim3(blocks_for(n_), static_cast<unsigned>(count_)),
                   kThreads, 0, be_.stream(), models, n_, type_, momentum_);
  }

 private:
  CudaBackend& be_;
  int count_;
  int64_t n_;
  OptimizerType type_;
  bool adam_, momentum_, reads_step_;
  DeviceBuffer models_;  // [count] UpdateBuffers
};

}  // namespace

std::unique_ptr<FusedUpdate> make_fused_update(CudaBackend& be,
                                               const std::vector<FusedStepShape::Member>& models) {
  std::vector<UpdateBuffers> entries;
  const GpuOptimizer* first = nullptr;
  for (const FusedStepShape::Member& t : models) {
    auto* o = dynamic_cast<GpuOptimizer*>(t.optimizer);
    if (o == nullptr) return nullptr;
    if (first == nullptr) first = o;
    // One launch takes one kind of update over buffers of one size.
    if (o->type() != first->type() || o->momentum() != first->momentum() ||
        o->parameters() != first->parameters())
      return nullptr;
    entries.push_back(o->buffers(t.params, t.grads));
  }
  if (first == nullptr) return nullptr;
  return std::make_unique<GpuFusedUpdate>(be, std::move(entries), *first);
}

std::unique_ptr<OptimizerKernel> make_optimizer(CudaBackend& be, const OptimizerSettings& spec,
                                                int64_t parameters) {
  return std::make_unique<GpuOptimizer>(be, spec, parameters);
}

}  // namespace xo::cuda

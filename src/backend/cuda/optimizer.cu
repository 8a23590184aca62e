// Optimizers on the GPU: one fused element-wise kernel per step over the flat parameter and
// gradient buffers, with the CPU's update rules (optimizer.cpp, i.e. torch.optim's): SGD with
// momentum, dampening, Nesterov and weight decay (the momentum buffer starts at the first
// gradient), Adam and AdamW (L2 penalty vs decoupled decay, bias-corrected), RMSprop (no momentum,
// not centered) and Adadelta.
//
// A step is recorded once into a CUDA Graph and replayed, so nothing that changes from step to step
// may be a kernel argument: the step count lives in device memory. Where the update reads it
// (Adam, SGD with momentum), each step first runs a one-thread kernel that increments it and
// derives what depends on it (Adam's bias corrections, computed in double exactly as the CPU does,
// then rounded to f32), and the update kernel reads those; where the update does not (plain SGD,
// RMSprop, Adadelta), the update kernel's first thread counts the step itself, saving a launch. Hyper- parameters are fixed for the kernel's life, so they are plain arguments.
#include <cmath>
#include <cstddef>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

// The per-step values, in device memory.
struct StepState {
  uint64_t steps;   // steps taken, including the one being applied once begin_step has run
  float step_size;  // Adam: lr / (1 - beta1^t)
  float sqrt_bc2;   // Adam: sqrt(1 - beta2^t)
};

__global__ void begin_step_kernel(StepState* state, bool adam, double lr, double beta1,
                                  double beta2) {
  const uint64_t t = state->steps + 1;
  state->steps = t;
  if (adam) {
    const double td = static_cast<double>(t);
    state->step_size = static_cast<float>(lr / (1.0 - pow(beta1, td)));
    state->sqrt_bc2 = static_cast<float>(sqrt(1.0 - pow(beta2, td)));
  }
}

// The step counted by the update kernel itself (the kernels that do not read it).
__device__ __forceinline__ void count_step(StepState* state) {
  if (blockIdx.x == 0 && threadIdx.x == 0) state->steps += 1;
}

__global__ void sgd_kernel(float* params, const float* grads, int64_t n, float lr, float wd,
                           StepState* state) {
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    params[i] -= lr * (grads[i] + wd * params[i]);
  }
}

__global__ void sgd_momentum_kernel(float* params, const float* grads, float* buf, int64_t n,
                                    float lr, float wd, float mu, float damp, bool nesterov,
                                    const StepState* state) {
  const bool first = state->steps == 1;  // torch.optim.SGD starts the buffer at the first gradient
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grads[i] + wd * params[i];
    const float b = first ? g : mu * buf[i] + damp * g;
    buf[i] = b;
    params[i] -= lr * (nesterov ? g + mu * b : b);
  }
}

// AdamW shrinks the weights before the update (shrink = 1 - lr wd, l2 = 0); Adam adds wd * p to the
// gradient (shrink = 1, l2 = wd).
__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, int64_t n,
                            float b1, float b2, float eps, float shrink, float l2,
                            const StepState* state) {
  const float step_size = state->step_size;
  const float sqrt_bc2 = state->sqrt_bc2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float p = params[i] * shrink;
    const float g = grads[i] + l2 * params[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = p - step_size * mi / (sqrtf(vi) / sqrt_bc2 + eps);
  }
}

// v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps).
__global__ void rmsprop_kernel(float* params, const float* grads, float* v, int64_t n, float lr,
                               float eps, float alpha, float wd, StepState* state) {
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grads[i] + wd * params[i];
    const float vi = alpha * v[i] + (1.0f - alpha) * g * g;
    v[i] = vi;
    params[i] -= lr * g / (sqrtf(vi) + eps);
  }
}

// v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g; u = rho u + (1 - rho) d^2;
// p -= lr d.
__global__ void adadelta_kernel(float* params, const float* grads, float* v, float* u, int64_t n,
                                float lr, float eps, float rho, float wd, StepState* state) {
  count_step(state);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = grads[i] + wd * params[i];
    const float vi = rho * v[i] + (1.0f - rho) * g * g;
    const float d = sqrtf(u[i] + eps) / sqrtf(vi + eps) * g;
    v[i] = vi;
    u[i] = rho * u[i] + (1.0f - rho) * d * d;
    params[i] -= lr * d;
  }
}

class GpuOptimizer final : public OptimizerKernel {
 public:
  GpuOptimizer(CudaBackend& be, const OptimizerSettings& spec, int64_t n)
      : be_(be), s_(spec), type_(spec.type), n_(n) {
    XO_ASSERT(n >= 0);
    const size_t bytes = static_cast<size_t>(n) * sizeof(float);
    state_ = be.allocate(sizeof(StepState));  // zeroed: no steps taken
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
      XO_CUDA_LAUNCH(begin_step_kernel, 1, 1, 0, be_.stream(), state, adam, s_.lr, s_.beta1,
                     s_.beta2);
    }
    if (n_ == 0) return;
    const unsigned blocks = blocks_for(n_);
    cudaStream_t stream = be_.stream();
    const float lr = static_cast<float>(s_.lr), wd = static_cast<float>(s_.weight_decay);
    const float eps = static_cast<float>(s_.eps);
    switch (type_) {
      case OptimizerType::SGD: {
        const float mu = static_cast<float>(s_.momentum);
        const float damp = 1.0f - static_cast<float>(s_.dampening);
        if (mu == 0.0f) {
          XO_CUDA_LAUNCH(sgd_kernel, blocks, kThreads, 0, stream, params, grads, n_, lr, wd,
                         state);
        } else {
          XO_CUDA_LAUNCH(sgd_momentum_kernel, blocks, kThreads, 0, stream, params, grads,
                         first_.as<float>(), n_, lr, wd, mu, damp, s_.nesterov, state);
        }
        return;
      }
      case OptimizerType::Adam:
      case OptimizerType::AdamW: {
        const bool decoupled = type_ == OptimizerType::AdamW;
        const float shrink = decoupled ? 1.0f - lr * wd : 1.0f;
        const float l2 = decoupled ? 0.0f : wd;
        XO_CUDA_LAUNCH(adam_kernel, blocks, kThreads, 0, stream, params, grads, first_.as<float>(),
                       second_.as<float>(), n_, static_cast<float>(s_.beta1),
                       static_cast<float>(s_.beta2), eps, shrink, l2, state);
        return;
      }
      case OptimizerType::RMSprop:
        XO_CUDA_LAUNCH(rmsprop_kernel, blocks, kThreads, 0, stream, params, grads,
                       first_.as<float>(), n_, lr, eps, static_cast<float>(s_.alpha), wd, state);
        return;
      case OptimizerType::Adadelta:
        XO_CUDA_LAUNCH(adadelta_kernel, blocks, kThreads, 0, stream, params, grads,
                       first_.as<float>(), second_.as<float>(), n_, lr, eps,
                       static_cast<float>(s_.rho), wd, state);
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

 private:
  CudaBackend& be_;
  OptimizerSettings s_;
  OptimizerType type_;
  int64_t n_;
  DeviceBuffer state_;   // one StepState
  DeviceBuffer first_;   // SGD momentum, Adam m, RMSprop / Adadelta v
  DeviceBuffer second_;  // Adam v, Adadelta u
};

}  // namespace

std::unique_ptr<OptimizerKernel> make_optimizer(CudaBackend& be, const OptimizerSettings& spec,
                                                int64_t parameters) {
  return std::make_unique<GpuOptimizer>(be, spec, parameters);
}

}  // namespace xo::cuda

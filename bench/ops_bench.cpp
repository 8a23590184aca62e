// Per-op timings on a backend with Google Benchmark: the Linear kernel's forward and backward at
// the disc sweep's layer shapes, and the optimizer's pass over a flat buffer, with achieved GFLOP/s
// (matmuls) or GB/s (optimizer) as counters. What a training step costs, op by op.
//   build/bench/crossover_ops_bench [--benchmark_filter=...] [google benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>

#include "backend/backend.h"

namespace {

constexpr int64_t kBatch = 100;  // the disc experiment's mini-batch

xo::Backend& backend() {
  static std::unique_ptr<xo::Backend> be = xo::make_backend(xo::parse_device("cpu", 0));
  return *be;
}

// The CPU at --precision bf16 (its optimizers write the parameters' bf16 copy), or nullptr on a CPU
// with no bf16 unit.
xo::Backend* bf16_backend() {
  static std::unique_ptr<xo::Backend> be =
      xo::cpu_bf16_unit().empty() ? nullptr : xo::make_backend(xo::parse_device(xo::kCpuBf16, 0));
  return be.get();
}

struct LinearBuffers {
  explicit LinearBuffers(int64_t in, int64_t out) {
    xo::Backend& be = backend();
    auto floats = [&](int64_t n) { return be.allocate(sizeof(float) * n); };
    src = floats(kBatch * in);
    weights = floats(in * out);
    bias = floats(out);
    dst = floats(kBatch * out);
    d_dst = floats(kBatch * out);
    d_weights = floats(in * out);
    d_bias = floats(out);
    d_src = floats(kBatch * in);
  }
  xo::DeviceBuffer src, weights, bias, dst, d_dst, d_weights, d_bias, d_src;
};

// Arguments: in_features, out_features. ReLU fused, as in the disc models' hidden layers.
void BM_LinearForward(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1);
  auto kernel = backend().linear({kBatch, in, out, true, xo::Activation::ReLU, true});
  LinearBuffers b(in, out);
  for (auto _ : state) {
    kernel->forward(b.src.as<float>(), b.weights.as<float>(), b.bias.as<float>(),
                    b.dst.as<float>());
    backend().synchronize();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kBatch * in * out * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LinearBackward(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1);
  auto kernel = backend().linear({kBatch, in, out, true, xo::Activation::ReLU, true});
  LinearBuffers b(in, out);
  for (auto _ : state) {
    kernel->backward(b.src.as<float>(), b.weights.as<float>(), b.dst.as<float>(),
                     b.d_dst.as<float>(), b.d_weights.as<float>(), b.d_bias.as<float>(),
                     b.d_src.as<float>());
    backend().synchronize();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * kBatch * in * out * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// A fused group's Linear (model/fused_network.h) on one worker: 8 trials (a 16-trial group's half
// on two cores), each its own weights a padded stride apart. Arguments: in_features, out_features;
// the activation ReLU where the output is wider than the disc models' 2 classes.
constexpr int64_t kTrials = 8;

struct TrialsLinear {
  TrialsLinear(int64_t in, int64_t out) {
    xo::LinearShape s{kBatch,
                      in,
                      out,
                      true,
                      out > 2 ? xo::Activation::ReLU : xo::Activation::None,
                      in > 2,
                      true,
                      kTrials,
                      (in * out + out + 15) / 16 * 16};
    kernel = backend().linear(s);
    auto floats = [&](int64_t n) {
      xo::DeviceBuffer b = backend().allocate(sizeof(float) * n);
      std::fill(b.as<float>(), b.as<float>() + n, 0.01f);
      return b;
    };
    src = floats(kTrials * kBatch * in);
    params = floats(kTrials * s.model_stride);
    grads = floats(kTrials * s.model_stride);
    dst = floats(kTrials * kBatch * out);
    d_dst = floats(kTrials * kBatch * out);
    d_src = s.need_d_src ? floats(kTrials * kBatch * in) : xo::DeviceBuffer();
    bias_at = in * out;
  }
  std::unique_ptr<xo::WeightedKernel> kernel;
  xo::DeviceBuffer src, params, grads, dst, d_dst, d_src;
  int64_t bias_at = 0;
};

void BM_TrialsLinearForward(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1);
  TrialsLinear l(in, out);
  for (auto _ : state) {
    l.kernel->forward(l.src.as<float>(), l.params.as<float>(), l.params.as<float>() + l.bias_at,
                      l.dst.as<float>());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * kTrials * kBatch * in * out * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TrialsLinearBackward(benchmark::State& state) {
  const int64_t in = state.range(0), out = state.range(1);
  TrialsLinear l(in, out);
  for (auto _ : state) {
    l.kernel->backward(l.src.as<float>(), l.params.as<float>(), l.dst.as<float>(),
                       l.d_dst.as<float>(), l.grads.as<float>(), l.grads.as<float>() + l.bias_at,
                       l.d_src ? l.d_src.as<float>() : nullptr);
  }
  const double products = in > 2 ? 4.0 : 2.0;  // d_W, and d_src above the first layer
  state.counters["GFLOP/s"] = benchmark::Counter(products * kTrials * kBatch * in * out * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// One optimizer pass of plain SGD over `n` parameters on `be`, `bytes` moved a parameter.
void time_sgd_step(benchmark::State& state, xo::Backend& be, double bytes) {
  const int64_t n = state.range(0);
  auto opt = be.optimizer(xo::OptimizerSettings{}, n);
  xo::DeviceBuffer params = be.allocate(sizeof(float) * n);
  xo::DeviceBuffer grads = be.allocate(sizeof(float) * n);
  for (auto _ : state) {
    opt->step(params.as<float>(), grads.as<float>());
    be.synchronize();
  }
  state.counters["GB/s"] =
      benchmark::Counter(bytes * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Argument: parameters. Plain SGD reads params and grads and writes params: 12 bytes each.
void BM_SgdStep(benchmark::State& state) { time_sgd_step(state, backend(), 12.0); }

// BM_SgdStep at --precision bf16: the pass also writes the parameters' bf16 copy (2 bytes more a
// parameter).
void BM_SgdStepBf16(benchmark::State& state) {
  xo::Backend* be = bf16_backend();
  if (!be) return state.SkipWithError("this CPU has no bf16 unit (AMX or AVX-512 BF16)");
  time_sgd_step(state, *be, 14.0);
}

// Argument: parameters of the model; a data-parallel rank of two steps its half on its gradients
// summed with the other rank's (OptimizerKernel::step_part): reads params, both gradients, writes
// params, 16 bytes a parameter of the half.
void BM_SgdStepPart(benchmark::State& state) {
  const int64_t n = state.range(0), half = n / 2;
  auto opt = backend().optimizer(xo::OptimizerSettings{}, n);
  xo::DeviceBuffer params = backend().allocate(sizeof(float) * n);
  xo::DeviceBuffer grads = backend().allocate(sizeof(float) * n);
  xo::DeviceBuffer theirs = backend().allocate(sizeof(float) * n);
  for (auto _ : state) {
    opt->step_part(params.as<float>(), grads.as<float>(), {theirs.as<float>()}, 0, half);
    backend().synchronize();
  }
  state.counters["GB/s"] =
      benchmark::Counter(16.0 * half * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void disc_layers(benchmark::internal::Benchmark* b) {
  for (int64_t in = 2; in <= 2048; in *= 2) b->Args({in, 2 * in});
  b->Args({1024, 2})->Args({2048, 2});  // the output layers of disc-10 and disc-12
}

BENCHMARK(BM_LinearForward)->Apply(disc_layers)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LinearBackward)->Apply(disc_layers)->Unit(benchmark::kMicrosecond);
// disc-6's layers.
void disc6_trial_layers(benchmark::internal::Benchmark* b) {
  for (int64_t in = 2; in <= 32; in *= 2) b->Args({in, 2 * in});
  b->Args({16, 2})->Args({32, 2})->Args({64, 2});
}
BENCHMARK(BM_TrialsLinearForward)->Apply(disc6_trial_layers)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TrialsLinearBackward)->Apply(disc6_trial_layers)->Unit(benchmark::kMicrosecond);
// disc-6, disc-10 and disc-12's parameter counts.
BENCHMARK(BM_SgdStep)->Arg(2982)->Arg(703142)->Arg(11201190)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SgdStepBf16)->Arg(703142)->Arg(11201190)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SgdStepPart)->Arg(703142)->Arg(11201190)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

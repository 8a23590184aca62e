// The op test harness: one table of op cases. Each case runs forward and backward on every backend
// this build has here and checks (1) the forward output against a double-precision reference,
// (2) every input gradient against central differences of that reference, (3) each backend against
// the CPU backend.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backend/backend.h"
#include "core/random.h"

namespace xo {
namespace {

using Tensors = std::vector<std::vector<double>>;

struct OpResult {
  std::vector<float> output;
  std::vector<std::vector<float>> input_grads;  // one per input; empty where not computed
};

struct OpCase {
  std::string name;
  std::vector<int64_t> input_sizes;  // element counts of the differentiable inputs
  double tolerance;                  // relative to the largest magnitude of the compared tensor
  // Reference forward in double precision: output for the inputs.
  std::function<std::vector<double>(const Tensors&)> reference;
  // Backend forward + backward. d_output is the upstream gradient of the output.
  std::function<OpResult(Backend&, const std::vector<std::vector<float>>&,
                         const std::vector<float>&)>
      run;
  // Inputs drawn uniformly from this range (kept away from kinks where a case needs it).
  double lo = -1.0, hi = 1.0;
};

// Device memory helpers for the cases.
struct DeviceTensor {
  DeviceBuffer buffer;
  int64_t size = 0;
  float* ptr() const { return buffer.as<float>(); }
};

DeviceTensor to_device(Backend& be, const std::vector<float>& host) {
  DeviceTensor t{be.allocate(sizeof(float) * host.size()), static_cast<int64_t>(host.size())};
  be.upload(t.ptr(), host.data(), sizeof(float) * host.size());
  return t;
}

DeviceTensor device_zeros(Backend& be, int64_t n) { return {be.allocate(sizeof(float) * n), n}; }

std::vector<float> to_host(Backend& be, const DeviceTensor& t) {
  std::vector<float> host(t.size);
  be.synchronize();
  be.download(host.data(), t.ptr(), sizeof(float) * t.size);
  return host;
}

double activate(Activation a, double x) {
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::Tanh:
      return std::tanh(x);
    case Activation::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case Activation::None:
      return x;
  }
  return x;
}

OpCase linear_case(int64_t batch, int64_t in, int64_t out, Activation act, bool bias, bool d_src) {
  OpCase c;
  c.name = fmt::format("linear_b{}_in{}_out{}_{}{}{}", batch, in, out, activation_name(act),
                       bias ? "_bias" : "", d_src ? "" : "_first");
  c.input_sizes = {batch * in, out * in};
  if (bias) c.input_sizes.push_back(out);
  c.tolerance = 2e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(batch * out);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t o = 0; o < out; ++o) {
        double acc = bias ? t[2][o] : 0.0;
        for (int64_t i = 0; i < in; ++i) acc += t[0][b * in + i] * t[1][o * in + i];
        y[b * out + o] = activate(act, acc);
      }
    }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.linear({batch, in, out, bias, act, d_src});
    auto src = to_device(be, inputs[0]);
    auto w = to_device(be, inputs[1]);
    auto b = bias ? to_device(be, inputs[2]) : DeviceTensor{};
    auto dst = device_zeros(be, batch * out);
    auto d_dst = to_device(be, d_output);
    auto d_w = device_zeros(be, out * in);
    auto d_b = device_zeros(be, out);
    auto d_x = device_zeros(be, batch * in);
    kernel->forward(src.ptr(), w.ptr(), bias ? b.ptr() : nullptr, dst.ptr());
    kernel->backward(src.ptr(), w.ptr(), dst.ptr(), d_dst.ptr(), d_w.ptr(),
                     bias ? d_b.ptr() : nullptr, d_src ? d_x.ptr() : nullptr);
    OpResult r{to_host(be, dst), {}};
    r.input_grads.push_back(d_src ? to_host(be, d_x) : std::vector<float>{});
    r.input_grads.push_back(to_host(be, d_w));
    if (bias) r.input_grads.push_back(to_host(be, d_b));
    return r;
  };
  return c;
}

OpCase activation_case(Activation act, int64_t n) {
  OpCase c;
  c.name = fmt::format("activation_{}_{}", activation_name(act), n);
  c.input_sizes = {n};
  c.tolerance = 1e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = activate(act, t[0][i]);
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.activation(act, n);
    auto src = to_device(be, inputs[0]);
    auto dst = device_zeros(be, n);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, n);
    kernel->forward(src.ptr(), dst.ptr());
    kernel->backward(dst.ptr(), d_dst.ptr(), d_src.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_src)}};
  };
  return c;
}

// The loss is a scalar; its upstream gradient is d_output[0].
OpCase cross_entropy_case(int64_t batch, int64_t classes, double scale) {
  OpCase c;
  c.name = fmt::format("cross_entropy_b{}_c{}_x{}", batch, classes, scale);
  c.input_sizes = {batch * classes};
  c.tolerance = 1e-4;
  c.lo = -scale;
  c.hi = scale;
  std::vector<int32_t> labels(batch);
  for (int64_t b = 0; b < batch; ++b) labels[b] = static_cast<int32_t>((b * 7 + 3) % classes);
  c.reference = [=](const Tensors& t) {
    double loss = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const double* x = &t[0][b * classes];
      double max = x[0];
      for (int64_t j = 1; j < classes; ++j) max = std::max(max, x[j]);
      double sum = 0;
      for (int64_t j = 0; j < classes; ++j) sum += std::exp(x[j] - max);
      loss += std::log(sum) + max - x[labels[b]];
    }
    return std::vector<double>{loss / batch};
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.cross_entropy(batch, classes, batch);
    auto logits = to_device(be, inputs[0]);
    auto d_logits = device_zeros(be, batch * classes);
    DeviceBuffer y = be.allocate(sizeof(int32_t) * batch);
    be.upload(y.as<int32_t>(), labels.data(), sizeof(int32_t) * batch);
    DeviceBuffer stats = be.allocate(sizeof(LossStats));
    kernel->forward_backward(logits.ptr(), y.as<int32_t>(), d_logits.ptr(), stats.as<LossStats>());
    LossStats host{};
    be.synchronize();
    be.download(&host, stats.as<LossStats>(), sizeof(host));
    std::vector<float> grad = to_host(be, d_logits);
    for (float& g : grad) g *= d_output[0];
    return OpResult{{static_cast<float>(host.loss_sum)}, {grad}};
  };
  return c;
}

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  for (Activation act :
       {Activation::None, Activation::ReLU, Activation::Tanh, Activation::Sigmoid}) {
    cases.push_back(linear_case(3, 5, 4, act, true, true));
  }
  cases.push_back(linear_case(4, 3, 6, Activation::ReLU, false, true));
  cases.push_back(linear_case(5, 2, 4, Activation::ReLU, true, false));
  cases.push_back(linear_case(1, 7, 3, Activation::Tanh, true, true));
  // Large enough for the multi-threaded bias/activation pass.
  cases.push_back(linear_case(256, 33, 160, Activation::ReLU, true, true));
  for (Activation act : {Activation::ReLU, Activation::Tanh, Activation::Sigmoid}) {
    cases.push_back(activation_case(act, 37));
  }
  cases.push_back(activation_case(Activation::ReLU, 40000));
  cases.push_back(cross_entropy_case(6, 2, 1.0));
  cases.push_back(cross_entropy_case(5, 10, 3.0));
  cases.push_back(cross_entropy_case(3, 4, 30.0));  // large logits: the max shift must hold
  return cases;
}

double max_abs(const std::vector<double>& v) {
  double m = 1e-3;  // floor: tolerances are relative, but never to a near-zero tensor
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

class OpTest : public ::testing::TestWithParam<OpCase> {};

std::vector<std::unique_ptr<Backend>> backends_here() {
  std::vector<std::unique_ptr<Backend>> out;
  for (const auto& id : list_devices().available) out.push_back(make_backend(parse_device(id, 0)));
  return out;
}

TEST_P(OpTest, ForwardGradientsAndBackends) {
  const OpCase& c = GetParam();
  Rng rng(1234);
  std::vector<std::vector<float>> inputs;
  Tensors inputs_d;
  for (int64_t n : c.input_sizes) {
    std::vector<float> v(n);
    for (float& x : v) {
      // Keep ReLU inputs off the kink so central differences are meaningful.
      do x = static_cast<float>(rng.uniform(c.lo, c.hi));
      while (std::abs(x) < 1e-2);
    }
    inputs.push_back(v);
    inputs_d.emplace_back(v.begin(), v.end());
  }
  const std::vector<double> ref_out = c.reference(inputs_d);
  std::vector<float> d_output(ref_out.size());
  for (float& g : d_output) g = static_cast<float>(rng.uniform(-1, 1));

  // Expected gradients: central differences of the double reference of sum(output * d_output).
  auto objective = [&](const Tensors& t) {
    const auto y = c.reference(t);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * d_output[i];
    return s;
  };
  // Large inputs are checked at a seeded sample of entries: each difference costs a full forward.
  constexpr double kEps = 1e-6;
  constexpr size_t kMaxCheckedPerInput = 64;
  Tensors expected_grads;
  std::vector<std::vector<size_t>> checked;
  for (size_t k = 0; k < inputs_d.size(); ++k) {
    std::vector<double> g(inputs_d[k].size(), 0.0);
    std::vector<size_t> indices;
    for (size_t i = 0; i < g.size(); ++i) indices.push_back(i);
    while (indices.size() > kMaxCheckedPerInput)
      indices.erase(indices.begin() + rng.below(indices.size()));
    checked.push_back(indices);
    for (size_t i : indices) {
      Tensors plus = inputs_d, minus = inputs_d;
      plus[k][i] += kEps;
      minus[k][i] -= kEps;
      g[i] = (objective(plus) - objective(minus)) / (2 * kEps);
    }
    expected_grads.push_back(std::move(g));
  }

  std::optional<OpResult> cpu_result;
  for (auto& be : backends_here()) {
    SCOPED_TRACE(be->info().id);
    const OpResult r = c.run(*be, inputs, d_output);
    ASSERT_EQ(r.output.size(), ref_out.size());
    const double out_scale = max_abs(ref_out);
    for (size_t i = 0; i < ref_out.size(); ++i) {
      EXPECT_NEAR(r.output[i], ref_out[i], c.tolerance * out_scale) << "output[" << i << "]";
    }
    ASSERT_EQ(r.input_grads.size(), expected_grads.size());
    for (size_t k = 0; k < expected_grads.size(); ++k) {
      if (r.input_grads[k].empty()) continue;  // not computed (e.g. the first layer's d_src)
      const double scale = max_abs(expected_grads[k]);
      ASSERT_EQ(r.input_grads[k].size(), expected_grads[k].size());
      for (size_t i : checked[k]) {
        EXPECT_NEAR(r.input_grads[k][i], expected_grads[k][i], c.tolerance * scale)
            << "gradient of input " << k << " [" << i << "]";
      }
    }
    if (!cpu_result) {
      cpu_result = r;
      continue;
    }
    for (size_t i = 0; i < r.output.size(); ++i) {
      EXPECT_NEAR(r.output[i], cpu_result->output[i], c.tolerance * out_scale) << "vs cpu";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& case_info) { return case_info.param.name; });

}  // namespace
}  // namespace xo

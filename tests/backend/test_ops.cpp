// The op test harness: one table of op cases. Each case runs forward and backward on every backend
// this build has here and checks (1) the forward output against a double-precision reference,
// (2) every input gradient against central differences of that reference, (3) each backend against
// the CPU backend.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <random>

#include "backend/backend.h"
#include "core/error.h"
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

// gtest prints a failing parameter with this (instead of its bytes).
void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

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

// negative_slope: LeakyReLU's, as torch.nn.LeakyReLU computes it.
double activate(Activation a, double x, double negative_slope = 0) {
  switch (a) {
    case Activation::ReLU:
      return x > 0 ? x : 0;
    case Activation::LeakyReLU:
      return x > 0 ? x : negative_slope * x;
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

constexpr double kPercent = 100;

// negative_slope: read by LeakyReLU only (its cases are named by it).
OpCase activation_case(Activation act, int64_t n, float negative_slope = 0) {
  OpCase c;
  // Test names take no dot: the slope in hundredths.
  c.name = act == Activation::LeakyReLU
               ? fmt::format("activation_{}_{}_slope{}pct", activation_name(act), n,
                             std::lround(negative_slope * kPercent))
               : fmt::format("activation_{}_{}", activation_name(act), n);
  c.input_sizes = {n};
  c.tolerance = 1e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) y[i] = activate(act, t[0][i], negative_slope);
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.activation(act, n, negative_slope);
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

// Runs a loss kernel on logits [batch, classes]: the loss sum as the output, and the logits'
// gradient scaled by the upstream gradient of the (scalar) loss.
OpResult run_loss(Backend& be, LossKind kind, int64_t classes, const std::vector<int32_t>& labels,
                  const std::vector<float>& logits_host, float d_loss) {
  const auto batch = static_cast<int64_t>(labels.size());
  auto kernel = be.loss(kind, batch, classes, batch);
  auto logits = to_device(be, logits_host);
  auto d_logits = device_zeros(be, batch * classes);
  DeviceBuffer y = be.allocate(sizeof(int32_t) * batch);
  be.upload(y.as<int32_t>(), labels.data(), sizeof(int32_t) * batch);
  DeviceBuffer stats = be.allocate(sizeof(LossStats));
  kernel->forward_backward(logits.ptr(), y.as<int32_t>(), d_logits.ptr(), stats.as<LossStats>());
  LossStats host{};
  be.synchronize();
  be.download(&host, stats.as<LossStats>(), sizeof(host));
  std::vector<float> grad = to_host(be, d_logits);
  for (float& g : grad) g *= d_loss;
  return OpResult{{static_cast<float>(host.loss_sum)}, {grad}};
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
    return run_loss(be, LossKind::CrossEntropy, classes, labels, inputs[0], d_output[0]);
  };
  return c;
}

// Binary cross-entropy on logits [batch] against fixed labels 0/1.
OpCase bce_case(int64_t batch, double scale) {
  OpCase c;
  c.name = fmt::format("bce_b{}_x{}", batch, scale);
  c.input_sizes = {batch};
  c.tolerance = 1e-4;
  c.lo = -scale;
  c.hi = scale;
  std::vector<int32_t> labels(batch);
  for (int64_t b = 0; b < batch; ++b) labels[b] = static_cast<int32_t>((b * 5 + 1) % 3 == 0);
  c.reference = [=](const Tensors& t) {
    double loss = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const double x = t[0][b];
      loss += std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))) - labels[b] * x;
    }
    return std::vector<double>{loss / batch};
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    return run_loss(be, LossKind::BinaryCrossEntropy, 1, labels, inputs[0], d_output[0]);
  };
  return c;
}

// Mean squared error on outputs [batch] against fixed real targets, carried as a float's bits.
OpCase mse_case(int64_t batch, double scale) {
  OpCase c;
  c.name = fmt::format("mse_b{}_x{}", batch, scale);
  c.input_sizes = {batch};
  c.tolerance = 1e-4;
  c.lo = -scale;
  c.hi = scale;
  std::vector<float> targets(batch);
  std::vector<int32_t> bits(batch);
  for (int64_t b = 0; b < batch; ++b) {
    targets[b] = static_cast<float>(scale * (static_cast<double>((b * 7 + 2) % 11) / 5.0 - 1.0));
    bits[b] = std::bit_cast<int32_t>(targets[b]);
  }
  c.reference = [=](const Tensors& t) {
    double loss = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const double d = t[0][b] - static_cast<double>(targets[b]);
      loss += d * d;
    }
    return std::vector<double>{loss / batch};
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    return run_loss(be, LossKind::MeanSquaredError, 1, bits, inputs[0], d_output[0]);
  };
  return c;
}

OpCase conv2d_case(const Conv2dShape& s) {
  OpCase c;
  c.name = fmt::format("conv2d_b{}_c{}_{}x{}_o{}_k{}_s{}_p{}_{}{}{}", s.batch, s.in_channels,
                       s.height, s.width, s.out_channels, s.kernel, s.stride, s.padding,
                       activation_name(s.activation), s.has_bias ? "_bias" : "",
                       s.need_d_src ? "" : "_first");
  const int64_t oh = s.out_height(), ow = s.out_width();
  const int64_t src_n = s.batch * s.in_channels * s.height * s.width;
  const int64_t w_n = s.out_channels * s.in_channels * s.kernel * s.kernel;
  const int64_t dst_n = s.batch * s.out_channels * oh * ow;
  c.input_sizes = {src_n, w_n};
  if (s.has_bias) c.input_sizes.push_back(s.out_channels);
  c.tolerance = 2e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(dst_n);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t o = 0; o < s.out_channels; ++o)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = s.has_bias ? t[2][o] : 0.0;
            for (int64_t ci = 0; ci < s.in_channels; ++ci)
              for (int64_t ki = 0; ki < s.kernel; ++ki)
                for (int64_t kj = 0; kj < s.kernel; ++kj) {
                  const int64_t r = i * s.stride + ki - s.padding,
                                q = j * s.stride + kj - s.padding;
                  if (r < 0 || r >= s.height || q < 0 || q >= s.width) continue;
                  acc += t[0][((b * s.in_channels + ci) * s.height + r) * s.width + q] *
                         t[1][((o * s.in_channels + ci) * s.kernel + ki) * s.kernel + kj];
                }
            y[((b * s.out_channels + o) * oh + i) * ow + j] = activate(s.activation, acc);
          }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.conv2d(s);
    auto src = to_device(be, inputs[0]);
    auto w = to_device(be, inputs[1]);
    auto b = s.has_bias ? to_device(be, inputs[2]) : DeviceTensor{};
    auto dst = device_zeros(be, dst_n);
    auto d_dst = to_device(be, d_output);
    auto d_w = device_zeros(be, w_n);
    auto d_b = device_zeros(be, s.out_channels);
    auto d_x = device_zeros(be, src_n);
    kernel->forward(src.ptr(), w.ptr(), s.has_bias ? b.ptr() : nullptr, dst.ptr());
    kernel->backward(src.ptr(), w.ptr(), dst.ptr(), d_dst.ptr(), d_w.ptr(),
                     s.has_bias ? d_b.ptr() : nullptr, s.need_d_src ? d_x.ptr() : nullptr);
    OpResult r{to_host(be, dst), {}};
    r.input_grads.push_back(s.need_d_src ? to_host(be, d_x) : std::vector<float>{});
    r.input_grads.push_back(to_host(be, d_w));
    if (s.has_bias) r.input_grads.push_back(to_host(be, d_b));
    return r;
  };
  return c;
}

Conv2dShape conv_shape(int64_t batch, int64_t in_c, int64_t hw, int64_t out_c, int64_t k,
                       int64_t stride, int64_t pad, Activation act, bool bias, bool d_src) {
  Conv2dShape s;
  s.batch = batch;
  s.in_channels = in_c;
  s.height = s.width = hw;
  s.out_channels = out_c;
  s.kernel = k;
  s.stride = stride;
  s.padding = pad;
  s.activation = act;
  s.has_bias = bias;
  s.need_d_src = d_src;
  return s;
}

OpCase pool2d_case(PoolType type, int64_t batch, int64_t channels, int64_t hw, int64_t k,
                   int64_t stride, int64_t pad) {
  Pool2dShape s{type, batch, channels, hw, hw, k, stride, pad, true};
  OpCase c;
  c.name = fmt::format("{}pool2d_b{}_c{}_{}x{}_k{}_s{}_p{}", type == PoolType::Max ? "max" : "avg",
                       batch, channels, hw, hw, k, stride, pad);
  const int64_t oh = s.out_height(), ow = s.out_width();
  const int64_t src_n = batch * channels * hw * hw, dst_n = batch * channels * oh * ow;
  c.input_sizes = {src_n};
  c.tolerance = 1e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(dst_n);
    for (int64_t p = 0; p < batch * channels; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = type == PoolType::Max ? -1e300 : 0.0;
          for (int64_t ki = 0; ki < k; ++ki)
            for (int64_t kj = 0; kj < k; ++kj) {
              const int64_t r = i * stride + ki - pad, q = j * stride + kj - pad;
              if (r < 0 || r >= hw || q < 0 || q >= hw) continue;  // padding: 0 for avg
              const double v = t[0][(p * hw + r) * hw + q];
              acc = type == PoolType::Max ? std::max(acc, v) : acc + v;
            }
          y[(p * oh + i) * ow + j] = type == PoolType::Max ? acc : acc / static_cast<double>(k * k);
        }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.pool2d(s);
    auto src = to_device(be, inputs[0]);
    auto dst = device_zeros(be, dst_n);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, src_n);
    kernel->forward(src.ptr(), dst.ptr());
    kernel->backward(d_dst.ptr(), d_src.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_src)}};
  };
  return c;
}

// Batch normalisation in training: the batch's mean and biased variance per channel over the batch
// and the spatial positions, then the per-channel scale and shift.
OpCase batch_norm_case(int64_t batch, int64_t channels, int64_t spatial) {
  OpCase c;
  c.name = fmt::format("batchnorm_b{}_c{}_s{}", batch, channels, spatial);
  const int64_t n = batch * channels * spatial;
  const double eps = 1e-5;
  c.input_sizes = {n, channels, channels};
  c.tolerance = 5e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(n);
    for (int64_t k = 0; k < channels; ++k) {
      double mean = 0, var = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < spatial; ++s) mean += t[0][(b * channels + k) * spatial + s];
      mean /= static_cast<double>(batch * spatial);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < spatial; ++s) {
          const double d = t[0][(b * channels + k) * spatial + s] - mean;
          var += d * d;
        }
      var /= static_cast<double>(batch * spatial);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t s = 0; s < spatial; ++s) {
          const int64_t i = (b * channels + k) * spatial + s;
          y[i] = (t[0][i] - mean) / std::sqrt(var + eps) * t[1][k] + t[2][k];
        }
    }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    BatchNormShape s;
    s.batch = batch;
    s.channels = channels;
    s.spatial = spatial;
    auto kernel = be.batch_norm(s);
    auto src = to_device(be, inputs[0]);
    auto w = to_device(be, inputs[1]);
    auto b = to_device(be, inputs[2]);
    auto mean = device_zeros(be, channels), var = device_zeros(be, channels);
    auto count = device_zeros(be, 1);
    auto dst = device_zeros(be, n);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, n), d_w = device_zeros(be, channels),
         d_b = device_zeros(be, channels);
    kernel->forward(src.ptr(), w.ptr(), b.ptr(), mean.ptr(), var.ptr(), count.ptr(), dst.ptr());
    kernel->backward(src.ptr(), w.ptr(), d_dst.ptr(), d_src.ptr(), d_w.ptr(), d_b.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_src), to_host(be, d_w), to_host(be, d_b)}};
  };
  return c;
}

OpCase sequence_pool_case(PoolType type, int64_t batch, int64_t steps, int64_t features) {
  OpCase c;
  c.name = fmt::format("global_{}pool_b{}_t{}_f{}", type == PoolType::Max ? "max" : "avg", batch,
                       steps, features);
  c.input_sizes = {batch * steps * features};
  c.tolerance = 1e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(batch * features);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < features; ++f) {
        double acc = type == PoolType::Max ? -1e300 : 0.0;
        for (int64_t s = 0; s < steps; ++s) {
          const double v = t[0][(b * steps + s) * features + f];
          acc = type == PoolType::Max ? std::max(acc, v) : acc + v;
        }
        y[b * features + f] = type == PoolType::Max ? acc : acc / static_cast<double>(steps);
      }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.sequence_pool({type, batch, steps, features});
    auto src = to_device(be, inputs[0]);
    auto dst = device_zeros(be, batch * features);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, batch * steps * features);
    kernel->forward(src.ptr(), dst.ptr());
    kernel->backward(d_dst.ptr(), d_src.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_src)}};
  };
  return c;
}

// The mask is dropout_keep()'s: the reference recomputes it, so this checks the scaling, which
// elements are kept for a given (seed, step, offset), and the backward pass.
OpCase dropout_case(int64_t n, double p, int64_t offset, uint64_t step) {
  OpCase c;
  c.name = fmt::format("dropout_{}_p{}_off{}_step{}", n, static_cast<int>(p * 100), offset, step);
  c.input_sizes = {n};
  c.tolerance = 1e-5;
  constexpr uint64_t kSeed = 42;
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i) {
      const bool keep =
          dropout_keep(kSeed, step, static_cast<uint64_t>(offset + i), dropout_threshold(p));
      y[i] = keep ? t[0][i] / (1.0 - p) : 0.0;
    }
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.dropout({n, offset, p, kSeed});
    auto src = to_device(be, inputs[0]);
    auto dst = device_zeros(be, n);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, n);
    DeviceBuffer counter = be.allocate(sizeof(uint64_t));
    const uint64_t host_step = step;
    be.upload(counter.as<uint64_t>(), &host_step, sizeof(host_step));
    kernel->forward(src.ptr(), dst.ptr(), counter.as<uint64_t>());
    kernel->backward(d_dst.ptr(), d_src.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_src)}};
  };
  return c;
}

// The table is the differentiable input; the ids are fixed, with repeats (their gradients add).
OpCase embedding_case(int64_t batch, int64_t steps, int64_t vocab, int64_t dim) {
  OpCase c;
  c.name = fmt::format("embedding_b{}_t{}_v{}_d{}", batch, steps, vocab, dim);
  c.input_sizes = {vocab * dim};
  c.tolerance = 1e-5;
  std::vector<float> ids(batch * steps);
  for (int64_t i = 0; i < batch * steps; ++i) ids[i] = static_cast<float>((i * 7 + 2) % vocab);
  c.reference = [=](const Tensors& t) {
    std::vector<double> y(batch * steps * dim);
    for (int64_t p = 0; p < batch * steps; ++p)
      for (int64_t k = 0; k < dim; ++k)
        y[p * dim + k] = t[0][static_cast<int64_t>(ids[p]) * dim + k];
    return y;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.embedding({batch, steps, vocab, dim});
    auto table = to_device(be, inputs[0]);
    auto id_buffer = to_device(be, ids);
    auto dst = device_zeros(be, batch * steps * dim);
    auto d_dst = to_device(be, d_output);
    auto d_table = to_device(be, std::vector<float>(vocab * dim, 7.0f));  // must be overwritten
    kernel->forward(id_buffer.ptr(), table.ptr(), dst.ptr());
    kernel->backward(id_buffer.ptr(), d_dst.ptr(), d_table.ptr());
    return OpResult{to_host(be, dst), {to_host(be, d_table)}};
  };
  return c;
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// PyTorch's LSTM equations in double precision; inputs: src [B, T, I], then per layer weight_ih,
// weight_hh, bias_ih, bias_hh.
OpCase lstm_case(const LstmShape& s) {
  OpCase c;
  c.name = fmt::format("lstm_b{}_t{}_i{}_h{}_l{}{}{}", s.batch, s.steps, s.input, s.hidden,
                       s.layers, s.sequence ? "_sequence" : "_last", s.need_d_src ? "" : "_first");
  const int64_t B = s.batch, T = s.steps, H = s.hidden, G = 4 * H;
  c.input_sizes = {B * T * s.input};
  for (int64_t k = 0; k < s.layers; ++k) {
    const int64_t in = k == 0 ? s.input : H;
    c.input_sizes.insert(c.input_sizes.end(), {G * in, G * H, G, G});
  }
  c.tolerance = 5e-4;
  c.reference = [=](const Tensors& t) {
    std::vector<double> x = t[0];  // [B, T, in]
    int64_t in = s.input;
    for (int64_t k = 0; k < s.layers; ++k) {
      const auto& w_ih = t[1 + 4 * k];
      const auto& w_hh = t[2 + 4 * k];
      const auto& b_ih = t[3 + 4 * k];
      const auto& b_hh = t[4 + 4 * k];
      std::vector<double> out(B * T * H);
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> h(H, 0.0), cell(H, 0.0);
        for (int64_t step = 0; step < T; ++step) {
          std::vector<double> g(G);
          for (int64_t r = 0; r < G; ++r) {
            double acc = b_ih[r] + b_hh[r];
            for (int64_t j = 0; j < in; ++j) acc += w_ih[r * in + j] * x[(b * T + step) * in + j];
            for (int64_t j = 0; j < H; ++j) acc += w_hh[r * H + j] * h[j];
            g[r] = acc;
          }
          for (int64_t j = 0; j < H; ++j) {
            const double i = sigmoid(g[j]), f = sigmoid(g[H + j]), gg = std::tanh(g[2 * H + j]);
            const double o = sigmoid(g[3 * H + j]);
            cell[j] = f * cell[j] + i * gg;
            h[j] = o * std::tanh(cell[j]);
            out[(b * T + step) * H + j] = h[j];
          }
        }
      }
      x = out;
      in = H;
    }
    if (s.sequence) return x;
    std::vector<double> last(B * H);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) last[b * H + j] = x[(b * T + T - 1) * H + j];
    return last;
  };
  c.run = [=](Backend& be, const std::vector<std::vector<float>>& inputs,
              const std::vector<float>& d_output) {
    auto kernel = be.lstm(s);
    std::vector<DeviceTensor> dev;
    for (const auto& v : inputs) dev.push_back(to_device(be, v));
    std::vector<DeviceTensor> grads;
    for (size_t i = 1; i < inputs.size(); ++i) grads.push_back(device_zeros(be, inputs[i].size()));
    std::vector<LstmLayerParams> params;
    std::vector<LstmLayerGrads> grad_views;
    for (int64_t k = 0; k < s.layers; ++k) {
      params.push_back(
          {dev[1 + 4 * k].ptr(), dev[2 + 4 * k].ptr(), dev[3 + 4 * k].ptr(), dev[4 + 4 * k].ptr()});
      grad_views.push_back({grads[4 * k].ptr(), grads[4 * k + 1].ptr(), grads[4 * k + 2].ptr(),
                            grads[4 * k + 3].ptr()});
    }
    const int64_t out_n = s.sequence ? B * T * H : B * H;
    auto dst = device_zeros(be, out_n);
    auto d_dst = to_device(be, d_output);
    auto d_src = device_zeros(be, B * T * s.input);
    kernel->forward(dev[0].ptr(), params.data(), dst.ptr());
    kernel->backward(dev[0].ptr(), params.data(), d_dst.ptr(), grad_views.data(),
                     s.need_d_src ? d_src.ptr() : nullptr);
    OpResult r{to_host(be, dst), {}};
    r.input_grads.push_back(s.need_d_src ? to_host(be, d_src) : std::vector<float>{});
    for (const auto& g : grads) r.input_grads.push_back(to_host(be, g));
    return r;
  };
  return c;
}

LstmShape lstm_shape(int64_t batch, int64_t steps, int64_t input, int64_t hidden, int64_t layers,
                     bool sequence, bool d_src) {
  LstmShape s;
  s.batch = batch;
  s.steps = steps;
  s.input = input;
  s.hidden = hidden;
  s.layers = layers;
  s.sequence = sequence;
  s.need_d_src = d_src;
  return s;
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
  // Widths that are powers of two up to 64 x 64: on the CPU the register-blocked loops of one
  // model's small Linear (forward rows in blocks and left over, W transposed in 16 x 16 tiles, d_W
  // along the inputs or the outputs, the activation's derivative and the bias gradient folded into
  // d_W's pass where the outputs are 16 wide or more), with and without a bias.
  cases.push_back(linear_case(21, 8, 16, Activation::Tanh, true, true));
  cases.push_back(linear_case(21, 64, 2, Activation::Sigmoid, true, true));
  cases.push_back(linear_case(21, 32, 64, Activation::ReLU, true, true));
  cases.push_back(linear_case(19, 16, 32, Activation::None, false, true));
  cases.push_back(linear_case(5, 16, 8, Activation::ReLU, false, false));
  // Large enough for the multi-threaded bias/activation pass; on a GPU, the small-layer kernels
  // over several tiles.
  cases.push_back(linear_case(256, 33, 160, Activation::ReLU, true, true));
  // Over 2^22 multiply-adds: cuBLASLt on a GPU (with the BGRAD epilogue), not the small kernels.
  cases.push_back(linear_case(64, 260, 260, Activation::Sigmoid, true, true));
  for (Activation act : {Activation::ReLU, Activation::Tanh, Activation::Sigmoid}) {
    cases.push_back(activation_case(act, 37));
  }
  cases.push_back(activation_case(Activation::ReLU, 40000));
  // PyTorch's default slope, a steep one, and 0 (a ReLU); odd and multi-threaded sizes.
  for (float slope : {0.01f, 0.3f, 0.0f}) {
    cases.push_back(activation_case(Activation::LeakyReLU, 37, slope));
    cases.push_back(activation_case(Activation::LeakyReLU, 40000, slope));
  }
  cases.push_back(cross_entropy_case(6, 2, 1.0));
  cases.push_back(cross_entropy_case(5, 10, 3.0));
  cases.push_back(cross_entropy_case(3, 4, 30.0));  // large logits: the max shift must hold
  cases.push_back(bce_case(7, 1.0));
  cases.push_back(bce_case(5, 40.0));  // large logits: softplus and sigmoid must not overflow
  cases.push_back(mse_case(9, 1.0));
  cases.push_back(mse_case(4, 30.0));  // large errors
  cases.push_back(conv2d_case(conv_shape(2, 1, 6, 3, 3, 1, 0, Activation::ReLU, true, false)));
  cases.push_back(conv2d_case(conv_shape(2, 3, 5, 4, 3, 1, 1, Activation::None, true, true)));
  cases.push_back(conv2d_case(conv_shape(1, 2, 7, 5, 3, 2, 1, Activation::Tanh, false, true)));
  cases.push_back(conv2d_case(conv_shape(3, 4, 6, 8, 2, 2, 0, Activation::ReLU, true, true)));
  cases.push_back(pool2d_case(PoolType::Max, 2, 3, 6, 2, 2, 0));
  // Windows that tile the input (crossover's own loops): 2 x 2 with a row and a column left over,
  // enough planes for two threads, and 3 x 3.
  cases.push_back(pool2d_case(PoolType::Max, 8, 16, 17, 2, 2, 0));
  cases.push_back(pool2d_case(PoolType::Max, 2, 3, 7, 3, 3, 0));
  cases.push_back(pool2d_case(PoolType::Max, 1, 2, 7, 3, 2, 1));
  cases.push_back(pool2d_case(PoolType::Avg, 2, 3, 6, 2, 2, 0));
  cases.push_back(pool2d_case(PoolType::Avg, 1, 2, 5, 3, 1, 1));
  cases.push_back(sequence_pool_case(PoolType::Avg, 3, 5, 4));
  cases.push_back(sequence_pool_case(PoolType::Max, 3, 5, 4));
  cases.push_back(dropout_case(1000, 0.5, 0, 0));
  cases.push_back(dropout_case(40000, 0.25, 123, 7));  // multi-threaded, shard offset
  cases.push_back(embedding_case(3, 4, 5, 6));
  cases.push_back(lstm_case(lstm_shape(2, 4, 3, 5, 1, false, false)));
  cases.push_back(lstm_case(lstm_shape(3, 3, 4, 2, 1, true, true)));
  cases.push_back(lstm_case(lstm_shape(2, 3, 3, 4, 2, false, true)));
  cases.push_back(batch_norm_case(6, 3, 1));  // BatchNorm1d over [C]
  cases.push_back(batch_norm_case(4, 2, 5));  // BatchNorm1d over [C, L]
  cases.push_back(batch_norm_case(3, 4, 9));  // BatchNorm2d over [C, 3, 3]
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

// The running statistics follow PyTorch (momentum, unbiased variance, a batch count), and
// inference normalises with them.
TEST(BatchNormKernel, RunningStatisticsAndInference) {
  auto be = make_backend(parse_device("cpu", 1));
  BatchNormShape s;
  s.batch = 4;
  s.channels = 2;
  s.momentum = 0.25;
  auto train = be->batch_norm(s);
  s.training = false;
  auto infer = be->batch_norm(s);
  // Channel 0: 1 2 3 4 (mean 2.5, unbiased variance 5/3); channel 1: all 7.
  const std::vector<float> x = {1, 7, 2, 7, 3, 7, 4, 7};
  auto src = to_device(*be, x);
  auto w = to_device(*be, {2, 1}), b = to_device(*be, {0.5, -1});
  auto mean = to_device(*be, {0, 0}), var = to_device(*be, {1, 1}), count = device_zeros(*be, 1);
  auto dst = device_zeros(*be, 8);
  train->forward(src.ptr(), w.ptr(), b.ptr(), mean.ptr(), var.ptr(), count.ptr(), dst.ptr());
  const auto m = to_host(*be, mean), v = to_host(*be, var);
  EXPECT_NEAR(m[0], 0.25 * 2.5, 1e-6);
  EXPECT_NEAR(m[1], 0.25 * 7, 1e-6);
  EXPECT_NEAR(v[0], 0.75 + 0.25 * 5.0 / 3.0, 1e-6);
  EXPECT_NEAR(v[1], 0.75, 1e-6);
  EXPECT_EQ(to_host(*be, count)[0], 1.0f);
  // Inference: (x - running mean) / sqrt(running var + eps) * w + b, and nothing updated.
  infer->forward(src.ptr(), w.ptr(), b.ptr(), mean.ptr(), var.ptr(), count.ptr(), dst.ptr());
  const auto y = to_host(*be, dst);
  EXPECT_NEAR(y[0], (1 - m[0]) / std::sqrt(v[0] + 1e-5) * 2 + 0.5, 1e-5);
  EXPECT_NEAR(y[1], (7 - m[1]) / std::sqrt(v[1] + 1e-5) * 1 - 1, 1e-5);
  EXPECT_EQ(to_host(*be, mean), m);
  EXPECT_EQ(to_host(*be, count)[0], 1.0f);
}

// The softmax's exponentials and the log of their sum (the CPU's own vectorised exp and log)
// against double precision over the whole range a shifted logit takes, down to where exp
// underflows: rows [0, x] with label 0, whose gradient at x is softmax(x) / batch = exp(x) / (1 +
// exp(x)) / batch and whose loss is log(1 + exp(x)).
TEST(CrossEntropyKernel, SoftmaxAndLossWithinAFewUlpOverTheWholeRange) {
  for (auto& be : backends_here()) {
    SCOPED_TRACE(be->info().id);
    constexpr int64_t kRows = 4000;
    std::vector<float> logits(2 * kRows);
    std::vector<int32_t> labels(kRows, 0);
    for (int64_t r = 0; r < kRows; ++r) {
      logits[2 * r] = 0.0f;
      logits[2 * r + 1] = -95.0f * static_cast<float>(r) / (kRows - 1);  // 0 ... -95
    }
    const OpResult out = run_loss(*be, LossKind::CrossEntropy, 2, labels, logits, 1.0f);
    // The loss: the mean of log(1 + exp(x)) (its log of the sum too is the CPU's own).
    double expected_loss = 0;
    for (int64_t r = 0; r < kRows; ++r) expected_loss += std::log1p(std::exp(logits[2 * r + 1]));
    expected_loss /= kRows;
    EXPECT_NEAR(out.output[0], expected_loss, 2e-6 * expected_loss);
    double worst = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      const double x = logits[2 * r + 1];
      const double expected = std::exp(x) / (1 + std::exp(x)) / kRows;
      const double got = out.input_grads[0][2 * r + 1];
      if (expected < 1.2e-38) {  // a gradient under FLT_MIN: 0 or a subnormal
        EXPECT_LE(std::abs(got - expected), 1.2e-38) << "x = " << x;
        continue;
      }
      worst = std::max(worst, std::abs(got - expected) / expected);
    }
    EXPECT_LT(worst, 4 * 1.2e-7);  // 4 ulp of float
    // A NaN logit makes the loss NaN (a diverged run is seen), in a row of any class count.
    for (const int64_t classes : {2, 3}) {
      std::vector<float> bad(static_cast<size_t>(4 * classes), 0.5f);
      bad[static_cast<size_t>(classes) + 1] = std::nanf("");
      const OpResult nan = run_loss(*be, LossKind::CrossEntropy, classes, {0, 1, 0, 1}, bad, 1.0f);
      EXPECT_TRUE(std::isnan(nan.output[0])) << classes << " classes";
    }
  }
}

}  // namespace
}  // namespace xo

// Measuring a device profile (profile.h): each node's kernels timed as Network runs them.
#include "measure/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "core/clock.h"
#include "core/interrupt.h"
#include "model/cost.h"
#include "train/stats.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kDoing[] = "measuring the device profile";

// The median of timed calls of `body` (microseconds), after two warm-up calls: at least 5 calls
// and about 30 ms of them, at most 60. `before` runs untimed before each call.
template <typename Body, typename Before>
double median_us(Backend& be, Body&& body, Before&& before) {
  auto once = [&] {
    before();
    be.synchronize();
    const auto t0 = Clock::now();
    body();
    be.synchronize();
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  throw_if_stop_requested(kDoing);
  once();
  const double first = once();
  const int reps = std::clamp(static_cast<int>(30'000 / std::max(first, 1.0)), 5, 60);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    if (i % 8 == 0) throw_if_stop_requested(kDoing);
    t.push_back(once());
  }
  return summarize(t).median;
}

template <typename Body>
double median_us(Backend& be, Body&& body) {
  return median_us(be, body, [] {});
}

std::string variant_of(const Node& n) {
  std::string v;
  if ((n.kind == NodeKind::Linear || n.kind == NodeKind::Conv2d) &&
      n.activation != Activation::None) {
    v += activation_name(n.activation);
  }
  if (n.kind == NodeKind::Conv2d || n.kind == NodeKind::Pool2d) {
    v += fmt::format("{}k{}s{}p{}", v.empty() ? "" : ",", n.spec.kernel, n.spec.stride,
                     n.spec.padding);
  }
  if (n.kind == NodeKind::LSTM) {
    v += fmt::format("layers{}{}", n.spec.layers, n.spec.sequence ? ",sequence" : "");
  }
  if (n.gradient_below) v += v.empty() ? "dx" : ",dx";
  return v;
}

std::vector<float> pattern(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (static_cast<float>(i % 13) - 6.0f) / 6.0f;
  return v;
}

// Everything one profile measurement shares: the backend, the samples so far and their keys.
struct Profiler {
  Backend& be;
  DeviceProfile& profile;
  std::set<std::string> seen;

  bool first_time(const KernelSample& s, const std::string& extra = "") {
    return seen
        .insert(fmt::format("{}|{}|{}|{}|{}|{}|{}", s.op, s.variant, s.batch, s.shards, s.in_size,
                            s.out_size, extra))
        .second;
  }

  // The slices Network gives `shards` shards of `batch`.
  static std::vector<int64_t> slices(int64_t batch, int shards) {
    std::vector<int64_t> b;
    for (int k = 0; k < shards; ++k) b.push_back(batch / shards + (k < batch % shards ? 1 : 0));
    return b;
  }

  // The fork/join of the shards' parallel region is paid once per step, not once per kernel: it
  // is taken off each sample and added to the step by the prediction.
  double pass_us(double measured, int shards) const {
    return shards > 1 ? std::max(0.0, measured - profile.shard_fork_us) : measured;
  }

  void node(const Model& model, size_t i, int64_t batch, int shards) {
    const Node& n = model.nodes()[i];
    if (is_view(n, true)) return;
    const ModelLayout layout{model.tensors(),        model.buffers(),   model.nodes(),
                             model.input_features(), model.outputs(),   model.parameter_count(),
                             model.flat_size(),      model.state_size()};
    const std::vector<int64_t> b = slices(batch, shards);
    KernelSample s = node_sample(layout, i, b[0], shards);
    if (!first_time(s, fmt::format("{}", fmt::join(n.in_shape, "x")))) return;
    struct Slot {
      std::unique_ptr<Layer> layer;
      DeviceBuffer src, dst, d_dst, d_src, grads;
      std::vector<float> d_dst_host;
    };
    std::vector<Slot> slots(static_cast<size_t>(shards));
    int64_t offset = 0;
    for (int k = 0; k < shards; ++k) {
      Slot& slot = slots[static_cast<size_t>(k)];
      const int64_t bk = b[static_cast<size_t>(k)];
      LayerContext context{bk, offset,           true,         n.gradient_below, shards > 1,
                           1,  &model.buffers(), model.state()};
      offset += bk;
      slot.layer = make_layer(n, model.tensors(), be, context);
      slot.src = be.allocate(sizeof(float) * bk * n.in_size);
      if (n.kind != NodeKind::Embedding) {
        const std::vector<float> x = pattern(bk * n.in_size, 1.0f);
        be.upload(slot.src.as<float>(), x.data(), slot.src.bytes());
      }  // else token ids 0, as allocated
      slot.dst = be.allocate(sizeof(float) * bk * n.out_size);
      slot.d_dst = be.allocate(sizeof(float) * bk * n.out_size);
      slot.d_dst_host = pattern(bk * n.out_size, 0.01f);
      if (n.gradient_below) slot.d_src = be.allocate(sizeof(float) * bk * n.in_size);
      if (k > 0) slot.grads = be.allocate(sizeof(float) * model.flat_size());
    }
    auto grads_of = [&](int k) {
      return k == 0 ? model.grads() : slots[static_cast<size_t>(k)].grads.as<float>();
    };
    const float* params = model.params();
    const uint64_t* step = model.step_counter();
    s.forward_us = pass_us(median_us(
                               be,
                               [&] {
                                 be.parallel_shards(shards, [&](int k) {
                                   Slot& slot = slots[static_cast<size_t>(k)];
                                   slot.layer->forward(params, slot.src.as<float>(),
                                                       slot.dst.as<float>(), step);
                                 });
                               },
                               // A new step each call, as in training (dropout's masks).
                               [&] { be.increment(model.step_counter()); }),
                           shards);
    s.backward_us = pass_us(
        median_us(
            be,
            [&] {
              be.parallel_shards(shards, [&](int k) {
                Slot& slot = slots[static_cast<size_t>(k)];
                slot.layer->backward(params, slot.src.as<float>(), slot.dst.as<float>(),
                                     slot.d_dst.as<float>(), grads_of(k),
                                     n.gradient_below ? slot.d_src.as<float>() : nullptr);
              });
            },
            [&] {
              // The backward pass may use its output gradient as scratch: a fresh one each call.
              for (Slot& slot : slots) {
                be.upload(slot.d_dst.as<float>(), slot.d_dst_host.data(), slot.d_dst.bytes());
              }
            }),
        shards);
    profile.samples.push_back(s);
  }

  void loss(const Model& model, int64_t batch, int shards) {
    const std::vector<int64_t> b = slices(batch, shards);
    KernelSample s;
    s.op = "loss";
    s.variant = loss_name(model.spec().loss);
    s.batch = b[0];
    s.shards = shards;
    s.in_size = static_cast<double>(model.outputs());
    s.bytes = 4.0 * 3 * s.batch * s.in_size;
    if (!first_time(s)) return;
    struct Slot {
      std::unique_ptr<LossKernel> kernel;
      DeviceBuffer logits, labels, d_logits, stats;
    };
    std::vector<Slot> slots(static_cast<size_t>(shards));
    for (int k = 0; k < shards; ++k) {
      Slot& slot = slots[static_cast<size_t>(k)];
      const int64_t bk = b[static_cast<size_t>(k)];
      slot.kernel = be.loss(model.loss_kind(), bk, model.outputs(), batch);
      slot.logits = be.allocate(sizeof(float) * bk * model.outputs());
      const std::vector<float> x = pattern(bk * model.outputs(), 1.0f);
      be.upload(slot.logits.as<float>(), x.data(), slot.logits.bytes());
      slot.labels = be.allocate(sizeof(float) * bk);  // class 0 (or target 0.0)
      slot.d_logits = be.allocate(sizeof(float) * bk * model.outputs());
      slot.stats = be.allocate(sizeof(LossStats));
    }
    s.forward_us = pass_us(median_us(be,
                                     [&] {
                                       be.parallel_shards(shards, [&](int k) {
                                         Slot& slot = slots[static_cast<size_t>(k)];
                                         slot.kernel->forward_backward(
                                             slot.logits.as<float>(), slot.labels.as<int32_t>(),
                                             slot.d_logits.as<float>(), slot.stats.as<LossStats>());
                                       });
                                     }),
                           shards);
    profile.samples.push_back(s);
  }

  void optimizer(const Model& model) {
    KernelSample s;
    s.op = "optimizer";
    s.variant = optimizer_type_name(model.spec().train.optimizer.type);
    s.batch = 1;
    s.in_size = static_cast<double>(model.flat_size());
    s.bytes = optimizer_bytes_per_param(model.spec().train.optimizer) * s.in_size;
    if (!first_time(s)) return;
    auto kernel = be.optimizer(model.spec().train.optimizer, model.flat_size());
    s.forward_us = median_us(be, [&] { kernel->step(model.params(), model.grads()); });
    profile.samples.push_back(s);
  }

  void merge(const Model& model, int shards) {
    if (shards < 2) return;
    KernelSample s;
    s.op = "accumulate";
    s.batch = 1;
    s.shards = shards;
    s.in_size = static_cast<double>(model.flat_size());
    s.bytes = 12.0 * s.in_size * (shards - 1);
    if (!first_time(s)) return;
    DeviceBuffer other = be.allocate(sizeof(float) * model.flat_size() * (shards - 1));
    s.forward_us = median_us(be, [&] {
      for (int k = 1; k < shards; ++k) {
        be.accumulate(model.grads(), other.as<float>() + (k - 1) * model.flat_size(),
                      model.flat_size());
      }
    });
    profile.samples.push_back(s);
  }

  // A shuffled epoch gathers each step's rows into a batch buffer first.
  void gather(const Model& model, int64_t batch) {
    KernelSample s;
    s.op = "batch";
    s.batch = batch;
    s.in_size = static_cast<double>(model.input_features());
    s.bytes = 8.0 * s.batch * s.in_size;
    if (!model.spec().train.shuffle || !first_time(s)) return;
    const int64_t f = model.input_features();
    DeviceBuffer x = be.allocate(sizeof(float) * batch * f),
                 y = be.allocate(sizeof(int32_t) * batch);
    DeviceBuffer order = be.allocate(sizeof(int32_t) * batch);
    std::vector<int32_t> host(static_cast<size_t>(batch));
    for (size_t r = 0; r < host.size(); ++r) host[r] = static_cast<int32_t>((r * 7919) % batch);
    be.upload(order.as<int32_t>(), host.data(), order.bytes());
    DeviceBuffer position = be.allocate(sizeof(int64_t));
    DeviceBuffer dst = be.allocate(sizeof(float) * batch * f),
                 dst_y = be.allocate(sizeof(int32_t) * batch);
    const int64_t zero = 0;
    s.forward_us = median_us(
        be,
        [&] {
          be.next_batch(x.as<float>(), y.as<int32_t>(), order.as<int32_t>(), position.as<int64_t>(),
                        batch, f, dst.as<float>(), dst_y.as<int32_t>());
        },
        [&] { be.upload(position.as<int64_t>(), &zero, sizeof(zero)); });
    profile.samples.push_back(s);
  }

  // Everything a training step of `spec` runs, as the engine would plan it here.
  void model(const ModelSpec& spec) {
    Model m(spec, be);
    m.init(1);
    const int64_t batch = spec.train.batch;
    std::vector<int> modes = {1};
    const int wanted = m.has_batch_norm() ? 1 : be.batch_shards(batch, m.train_flops(batch));
    const int threads = be.execution_policy().shard_threads;
    // Both ways where the backend can shard this batch: a prediction for another batch size or a
    // device with other rules may need either.
    if (threads > 1 && !m.has_batch_norm() && batch >= 2 * threads) modes.push_back(threads);
    (void)wanted;
    for (int shards : modes) {
      for (size_t i = 0; i < m.nodes().size(); ++i) node(m, i, batch, shards);
      loss(m, batch, shards);
      merge(m, shards);
    }
    optimizer(m);
    gather(m, batch);
  }
};

// A training step's cost besides its kernels: the tiny step of the peaks' probe (one Linear, four
// wide, batch 1), less its kernels' samples.
double step_fixed_us(Backend& be, DeviceProfile& profile) {
  ModelSpec spec;
  spec.name = "profile-step";
  spec.origin = "built-in";
  spec.input = {4};
  spec.layers.push_back({LayerType::Linear, 4, true, 0});
  spec.train.batch = 1;
  spec.train.shuffle = false;
  Profiler p{be, profile, {}};
  const size_t first = profile.samples.size();
  p.model(spec);
  double kernels = 0;
  for (size_t i = first; i < profile.samples.size(); ++i) {
    if (profile.samples[i].shards == 1) kernels += profile.samples[i].total_us();
  }
  profile.samples.resize(first);  // not kept: a batch of one is no shape of interest
  return std::max(0.0, tiny_step_seconds(be, 1) * 1e6 - kernels);
}

ModelSpec mlp(int64_t batch, int64_t width) {
  ModelSpec s;
  s.name = fmt::format("profile-mlp-{}x{}", batch, width);
  s.origin = "built-in";
  s.input = {width};
  for (int l = 0; l < 2; ++l) {
    s.layers.push_back({LayerType::Linear, width, true, 0});
    LayerSpec relu;
    relu.type = LayerType::ReLU;
    s.layers.push_back(relu);
  }
  s.layers.push_back({LayerType::Linear, 10, true, 0});
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

}  // namespace

KernelSample node_sample(const ModelLayout& layout, size_t i, int64_t batch, int shards) {
  const Node& n = layout.nodes.at(i);
  KernelSample s;
  s.op = layer_type_name(n.spec.type);
  s.variant = variant_of(n);
  s.batch = batch;
  s.shards = shards;
  s.in_size = static_cast<double>(n.in_size);
  s.out_size = static_cast<double>(n.out_size);
  const LayerCost c = node_cost(n, layout.tensors, batch);
  s.flops = c.flops;
  s.bytes = c.bytes;
  const double b = static_cast<double>(batch);
  if (n.kind == NodeKind::Linear || n.kind == NodeKind::Conv2d)
    s.matmul_flops = b * n.forward_flops;
  if (n.kind == NodeKind::LSTM) {
    const double h = static_cast<double>(n.spec.out);
    s.matmul_flops = 2 * b * 4 * h * h;
  }
  return s;
}

std::vector<ModelSpec> measure_grid_specs() {
  std::vector<ModelSpec> specs;
  for (int64_t batch : {32, 128, 512}) {
    for (int64_t width : {16, 64, 256, 1024}) specs.push_back(mlp(batch, width));
  }
  return specs;
}

DeviceProfile measure_profile(Backend& be, const DevicePeaks& peaks,
                              const std::vector<ModelSpec>& specs, const std::string& machine,
                              const std::function<void(size_t, size_t)>& progress) {
  const DeviceInfo& d = be.info();
  DeviceProfile profile;
  profile.device = d.id;
  profile.kind = d.kind;
  profile.name = d.name;
  profile.threads = d.threads;
  profile.machine = machine;
  profile.library = d.library;
  profile.peaks = peaks;
  profile.policy = be.execution_policy();
  const int threads = profile.policy.shard_threads;
  if (threads > 1) {
    profile.shard_fork_us = median_us(be, [&] { be.parallel_shards(threads, [](int) {}); });
  }
  profile.step_fixed_us = step_fixed_us(be, profile);
  // Two passes over every sample, each sample keeping its lower median: a burst of other work on
  // the machine during one pass (a shared host's neighbours) only ever slows a sample down.
  std::vector<KernelSample> first;
  for (int pass = 0; pass < 2; ++pass) {
    profile.samples.clear();
    Profiler p{be, profile, {}};
    for (size_t i = 0; i < specs.size(); ++i) {
      if (progress) progress(pass * specs.size() + i, 2 * specs.size());
      p.model(specs[i]);
    }
    if (pass == 0) first = profile.samples;
  }
  for (size_t i = 0; i < first.size() && i < profile.samples.size(); ++i) {
    KernelSample& s = profile.samples[i];
    if (first[i].total_us() < s.total_us()) s = first[i];
  }
  if (progress) progress(2 * specs.size(), 2 * specs.size());
  profile.date = utc_now();
  return profile;
}

}  // namespace xo

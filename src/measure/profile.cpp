// Measuring a device profile (profile.h): each node's kernels timed as Network runs them.
#include "measure/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/clock.h"
#include "core/interrupt.h"
#include "model/fused_network.h"
#include "model/work.h"
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

// On a backend that queues its work (a GPU) a call's cost is not a call waited for: a step launches
// every kernel without waiting (`--no-graph`), or launches them all as one recorded graph (the
// default). Both are timed here as the engine runs them, by the device's own clock: `stream_us` for
// calls queued back to back, `graph_us` for calls recorded in one graph and launched whole. Each is
// the slope between runs of n and 3n calls (medians of 9 runs each), so that the marks' own cost
// and a graph's launch cancel out and what is left is what one more call adds to a step. `before`
// runs untimed before each run of calls, not before each call: the kernels timed here take as long
// on the values their previous call left (a backward pass's output gradient, used as scratch) as on
// fresh ones.
struct QueuedTimes {
  double stream_us = 0, graph_us = 0;
};
constexpr int kMaxQueuedCalls = 3 * 64;  // the most calls of one run (the gather sizes its order)

template <typename Body, typename Before>
QueuedTimes queued_us(Backend& be, Body&& body, Before&& before) {
  throw_if_stop_requested(kDoing);
  const std::unique_ptr<QueueClock> clock = be.clock(2);
  auto interval_us = [&](auto&& queue) {
    before();
    be.synchronize();
    clock->mark(0);
    queue();
    clock->mark(1);
    return clock->ms_between(0, 1) * 1e3;
  };
  auto median_of = [&](auto&& queue) {
    interval_us(queue);  // warm-up
    std::vector<double> t;
    for (int i = 0; i < 9; ++i) t.push_back(interval_us(queue));
    return summarize(t).median;
  };
  auto calls = [&](int n) {
    return [&body, n] {
      for (int i = 0; i < n; ++i) body();
    };
  };
  interval_us(calls(2));  // first calls: lazy set-up
  const double one = std::max(0.5, interval_us(calls(4)) / 4);
  // About 150 us of calls in the shorter run, 4 to 64 calls.
  const int n = std::clamp(static_cast<int>(150 / one), 4, kMaxQueuedCalls / 3);
  QueuedTimes out;
  out.stream_us = std::max(0.0, (median_of(calls(3 * n)) - median_of(calls(n))) / (2 * n));
  throw_if_stop_requested(kDoing);
  const std::unique_ptr<RecordedWork> shorter = be.capture(calls(n));
  const std::unique_ptr<RecordedWork> longer = be.capture(calls(3 * n));
  if (!shorter || !longer) return out;  // cannot record: no graph time
  out.graph_us =
      std::max(0.0, (median_of([&] { longer->launch(); }) - median_of([&] { shorter->launch(); })) /
                        (2 * n));
  return out;
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

  // A GPU's kernels are timed queued (stream and graph, queued_us); a CPU's calls one by one.
  bool queued() const { return be.info().kind == DeviceKind::Gpu; }

  // `us` (and on a GPU `graph_us`) of `body` run in `shards` shards.
  template <typename Body, typename Before>
  void time(double& us, double& graph_us, int shards, Body&& body, Before&& before) {
    if (queued()) {
      const QueuedTimes q = queued_us(be, body, before);
      us = q.stream_us;
      graph_us = q.graph_us;
    } else {
      us = pass_us(median_us(be, body, before), shards);
    }
  }
  template <typename Body>
  void time(double& us, double& graph_us, int shards, Body&& body) {
    time(us, graph_us, shards, body, [] {});
  }

  bool first_time(const KernelSample& s, const std::string& extra = "") {
    return seen
        .insert(fmt::format("{}|{}|{}|{}|{}|{}|{}", s.op, s.variant, s.batch, s.shards, s.in_size,
                            s.out_size, extra))
        .second;
  }

  static ModelLayout layout_of(const Model& model) {
    return {model.tensors(), model.buffers(),         model.nodes(),     model.input_features(),
            model.outputs(), model.parameter_count(), model.flat_size(), model.state_size()};
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

  // Where the backend's optimizers keep a bf16 copy of the weights they update (the CPU at bf16),
  // a training step's products read it instead of converting the weights: the copy of
  // params[0, n) made current as a step makes it (an SGD step at rate 0 over zero gradients, which
  // leaves the parameters as they are), kept while the kernel returned lives. Null elsewhere.
  std::unique_ptr<OptimizerKernel> keep_weights(float* params, int64_t n) {
    if (be.info().kind != DeviceKind::Cpu) return nullptr;
    OptimizerSettings still;
    still.lr = 0;
    auto kernel = be.optimizer(still, n);
    if (kernel->weights_copy_bytes() == 0) return nullptr;
    const DeviceBuffer zero = be.allocate(sizeof(float) * static_cast<size_t>(n));
    kernel->step(params, zero.as<float>());
    return kernel;
  }

  // One shard's layer and the buffers it reads and writes.
  struct LayerSlot {
    std::unique_ptr<Layer> layer;
    DeviceBuffer params, src, dst, d_dst, d_src, grads;  // params, grads: where not the model's
    std::vector<float> d_dst_host;
    const float* weights = nullptr;  // the parameters it reads
    float* gradients = nullptr;      // where its gradients go
  };

  // s's forward and backward: every shard's layer in one parallel region, a new step before each
  // forward (dropout's masks), as in training, and a fresh output gradient before each backward
  // (which may use it as scratch).
  void time_layers(KernelSample& s, std::vector<LayerSlot>& slots, const Model& model,
                   bool gradient_below) {
    const int shards = static_cast<int>(slots.size());
    const uint64_t* step = model.step_counter();
    time(
        s.forward_us, s.graph_forward_us, shards,
        [&] {
          be.parallel_shards(shards, [&](int k) {
            LayerSlot& slot = slots[static_cast<size_t>(k)];
            slot.layer->forward(slot.weights, slot.src.as<float>(), slot.dst.as<float>(), step);
          });
        },
        [&] { be.increment(model.step_counter()); });
    time(
        s.backward_us, s.graph_backward_us, shards,
        [&] {
          be.parallel_shards(shards, [&](int k) {
            LayerSlot& slot = slots[static_cast<size_t>(k)];
            slot.layer->backward(slot.weights, slot.src.as<float>(), slot.dst.as<float>(),
                                 slot.d_dst.as<float>(), slot.gradients,
                                 gradient_below ? slot.d_src.as<float>() : nullptr);
          });
        },
        [&] {
          // Each on its own worker, as a fused group's or a shard's gradient is written on the
          // worker that reads it: written from one thread, the other worker's backward would
          // first fetch its gradient from that thread's core (a group's Linear whose backward
          // writes it as it goes timed far slower: docs/benchmarks.md, "The fused Linear's last
          // passes and convolutional groups").
          be.parallel_shards(shards, [&](int k) {
            LayerSlot& slot = slots[static_cast<size_t>(k)];
            be.upload(slot.d_dst.as<float>(), slot.d_dst_host.data(), slot.d_dst.bytes());
          });
        });
    profile.samples.push_back(s);
  }

  // A slot's output, output gradient and input gradient for `rows` rows of node `n`.
  void output_buffers(LayerSlot& slot, const Node& n, int64_t rows) {
    slot.dst = be.allocate(sizeof(float) * rows * n.out_size);
    slot.d_dst = be.allocate(sizeof(float) * rows * n.out_size);
    slot.d_dst_host = pattern(rows * n.out_size, 0.01f);
    if (n.gradient_below) slot.d_src = be.allocate(sizeof(float) * rows * n.in_size);
  }

  DeviceBuffer filled(int64_t count, float scale) {
    DeviceBuffer b = be.allocate(sizeof(float) * count);
    const std::vector<float> x = pattern(count, scale);
    be.upload(b.as<float>(), x.data(), b.bytes());
    return b;
  }

  void node(const Model& model, size_t i, int64_t batch, int shards) {
    const Node& n = model.nodes()[i];
    if (is_view(n, true)) return;
    const ModelLayout layout = layout_of(model);
    const std::vector<int64_t> b = slices(batch, shards);
    KernelSample s = node_sample(layout, i, b[0], shards);
    if (!first_time(s, fmt::format("{}", fmt::join(n.in_shape, "x")))) return;
    std::vector<LayerSlot> slots(static_cast<size_t>(shards));
    int64_t offset = 0;
    for (int k = 0; k < shards; ++k) {
      LayerSlot& slot = slots[static_cast<size_t>(k)];
      const int64_t bk = b[static_cast<size_t>(k)];
      LayerContext context{bk, offset,           true,         n.gradient_below, shards > 1,
                           1,  &model.buffers(), model.state()};
      offset += bk;
      slot.layer = make_layer(n, model.tensors(), be, context);
      if (n.kind != NodeKind::Embedding) {
        slot.src = filled(bk * n.in_size, 1.0f);
      } else {
        // Token ids spread over the vocabulary as a text's are: all of one id would time the
        // backward pass summing every position into one row, which no real batch does.
        slot.src = be.allocate(sizeof(float) * bk * n.in_size);
        std::vector<float> ids(static_cast<size_t>(bk * n.in_size));
        for (size_t p = 0; p < ids.size(); ++p) {
          ids[p] = static_cast<float>((p * 7919 + 13) % static_cast<size_t>(n.spec.vocab));
        }
        be.upload(slot.src.as<float>(), ids.data(), slot.src.bytes());
      }
      output_buffers(slot, n, bk);
      if (k > 0) slot.grads = be.allocate(sizeof(float) * model.flat_size());
      slot.weights = model.params();
      slot.gradients = k == 0 ? model.grads() : slot.grads.as<float>();
    }
    time_layers(s, slots, model, n.gradient_below);
  }

  // The Linear of `trials` fused trials (model/fused_network.h) on each of `shards` workers at
  // once, as a fused group's Linear runs: each worker's trials' parameters one trial stride apart.
  // A size whose call would take more than a CPU's 4e8 FLOPs (a GPU's 2e10: about 0.4 ms) is left
  // to be scaled from the smaller ones (past one trial: they are bound by FLOPs by then).
  void trials_linear(const Model& model, size_t i, int64_t batch, int trials, int shards) {
    const double most_flops = queued() ? 2e10 : 4e8;
    const Node& n = model.nodes()[i];
    KernelSample s = trials_linear_sample(layout_of(model), i, batch, trials, shards);
    if (trials > 1 && s.flops > most_flops) return;
    if (!first_time(s, fmt::format("{} trials", trials))) return;
    const int64_t stride = model_stride(model.flat_size());
    const int64_t rows = trials * batch;
    std::vector<LayerSlot> slots(static_cast<size_t>(shards));
    for (LayerSlot& slot : slots) {
      LayerContext context{
          batch,         0,      true,  n.gradient_below, shards > 1, 1, &model.buffers(),
          model.state(), trials, stride};
      slot.layer = make_layer(n, model.tensors(), be, context);
      // No kept bf16 copy here: each trial's optimizer keeps its own, so a fused group's Linear
      // converts the weights it spans itself, as timed.
      slot.params = filled(trials * stride, 0.1f);
      slot.grads = be.allocate(sizeof(float) * trials * stride);
      slot.src = filled(rows * n.in_size, 1.0f);
      output_buffers(slot, n, rows);
      slot.weights = slot.params.as<float>();
      slot.gradients = slot.grads.as<float>();
    }
    time_layers(s, slots, model, n.gradient_below);
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
    time(s.forward_us, s.graph_forward_us, shards, [&] {
      be.parallel_shards(shards, [&](int k) {
        Slot& slot = slots[static_cast<size_t>(k)];
        slot.kernel->forward_backward(slot.logits.as<float>(), slot.labels.as<int32_t>(),
                                      slot.d_logits.as<float>(), slot.stats.as<LossStats>());
      });
    });
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
    time(s.forward_us, s.graph_forward_us, 1, [&] { kernel->step(model.params(), model.grads()); });
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
    time(s.forward_us, s.graph_forward_us, 1, [&] {
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
    // Queued runs select up to kMaxQueuedCalls batches before the position is reset.
    const int64_t rows = batch * (queued() ? kMaxQueuedCalls : 1);
    DeviceBuffer order = be.allocate(sizeof(int32_t) * rows);
    std::vector<int32_t> host(static_cast<size_t>(rows));
    for (size_t r = 0; r < host.size(); ++r) host[r] = static_cast<int32_t>((r * 7919) % batch);
    be.upload(order.as<int32_t>(), host.data(), order.bytes());
    DeviceBuffer position = be.allocate(sizeof(int64_t));
    DeviceBuffer dst = be.allocate(sizeof(float) * batch * f),
                 dst_y = be.allocate(sizeof(int32_t) * batch);
    const int64_t zero = 0;
    time(
        s.forward_us, s.graph_forward_us, 1,
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
    const auto kept = keep_weights(m.params(), m.flat_size());
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
    // Fused trials (tune --fuse, advise --trials): each Linear as a fused group runs it, one
    // group alone and, on a CPU, one group per worker (a GPU runs one group, one kernel over its
    // trials).
    for (size_t i = 0; i < m.nodes().size(); ++i) {
      if (m.nodes()[i].kind != NodeKind::Linear) continue;
      trials_linear(m, i, batch, 1, 1);
      if (queued()) {
        for (const int k : kProfiledGpuTrials) trials_linear(m, i, batch, k, 1);
      } else {
        for (const int k : kProfiledTrials) trials_linear(m, i, batch, k, threads);
      }
    }
  }
};

// A training step's cost besides its kernels: the tiny step of the peaks' probe (one Linear, four
// wide, batch 1), less its kernels' samples.
// A GPU's training step as the trainer times it: marks before and after each step in the queue,
// the host running ahead (it waits only at the end of an epoch), the median of the steps between
// their marks; `graph`: the step recorded once and launched whole, as by default.
double queued_step_us(Backend& be, FunctionRef<void()> step, bool graph) {
  constexpr int kSteps = 200;
  std::unique_ptr<RecordedWork> recorded = graph ? be.capture(step) : nullptr;
  if (graph && !recorded) return 0;
  auto once = [&] { recorded ? recorded->launch() : step(); };
  for (int i = 0; i < 20; ++i) once();  // warm-up
  const std::unique_ptr<QueueClock> clock = be.clock(2 * kSteps);
  for (int i = 0; i < kSteps; ++i) {
    clock->mark(2 * i);
    once();
    clock->mark(2 * i + 1);
  }
  std::vector<double> t;
  for (int i = 0; i < kSteps; ++i) t.push_back(clock->ms_between(2 * i, 2 * i + 1) * 1e3);
  return summarize(t).median;
}

// A training step's cost besides its kernels: the tiny step of the peaks' probe (one Linear, four
// wide, batch 1), less its kernels' samples. On a GPU also the same in a recorded step
// (`graph_step_fixed_us`), and what one more node of a recorded step costs when its kernel does
// next to nothing (`graph_node_us`): the floor of every node, what a chain of small kernels pays.
void measure_step_fixed(Backend& be, DeviceProfile& profile) {
  const ModelSpec spec = tiny_step_spec(1);
  Profiler p{be, profile, {}};
  const size_t first = profile.samples.size();
  p.model(spec);
  double kernels = 0, graph_kernels = 0;
  for (size_t i = first; i < profile.samples.size(); ++i) {
    // The step's own kernels: not its Linear again as a fused group's.
    if (profile.samples[i].shards != 1 || profile.samples[i].trials > 0) continue;
    kernels += profile.samples[i].total_us();
    graph_kernels += profile.samples[i].graph_total_us();
  }
  profile.samples.resize(first);  // not kept: a batch of one is no shape of interest
  if (!p.queued()) {
    profile.step_fixed_us = std::max(0.0, tiny_step_seconds(be, 1) * 1e6 - kernels);
    return;
  }
  TinyStep tiny(be, 1);
  auto step = [&] { tiny.run(); };
  profile.step_fixed_us = std::max(0.0, queued_step_us(be, step, false) - kernels);
  profile.graph_step_fixed_us = std::max(0.0, queued_step_us(be, step, true) - graph_kernels);
  DeviceBuffer counter = be.allocate(sizeof(uint64_t));
  profile.graph_node_us = queued_us(
                              be, [&] { be.increment(counter.as<uint64_t>()); }, [] {})
                              .graph_us;
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

LayerSpec grid_layer(LayerType type, int64_t out = 0, int64_t kernel = 0) {
  LayerSpec l;
  l.type = type;
  l.out = out;
  l.kernel = kernel;
  if (type == LayerType::MaxPool2d) l.stride = kernel;
  return l;
}

// A CNN of two convolutions of `kernel`, `c1` then `c2` channels, a pool, a Linear to 10.
ModelSpec cnn(int64_t batch, std::vector<int64_t> input, int64_t kernel, int64_t c1, int64_t c2) {
  ModelSpec s;
  s.name = fmt::format("profile-cnn-{}x{}k{}c{}-{}", batch, input[1], kernel, c1, c2);
  s.origin = "built-in";
  s.input = std::move(input);
  s.layers = {grid_layer(LayerType::Conv2d, c1, kernel), grid_layer(LayerType::ReLU),
              grid_layer(LayerType::Conv2d, c2, kernel), grid_layer(LayerType::ReLU),
              grid_layer(LayerType::MaxPool2d, 0, 2),    grid_layer(LayerType::Flatten),
              grid_layer(LayerType::Linear, 10)};
  s.train.batch = batch;
  s.train.shuffle = false;
  return s;
}

// Token ids over `steps` positions, embedded in `dim`, an LSTM of `hidden`, a Linear to 1 (BCE).
ModelSpec lstm(int64_t batch, int64_t steps, int64_t dim, int64_t hidden) {
  ModelSpec s;
  s.name = fmt::format("profile-lstm-{}x{}e{}h{}", batch, steps, dim, hidden);
  s.origin = "built-in";
  s.input = {steps};
  LayerSpec embedding = grid_layer(LayerType::Embedding, dim);
  embedding.vocab = 4000;
  s.layers = {embedding, grid_layer(LayerType::LSTM, hidden), grid_layer(LayerType::Linear, 1)};
  s.loss = LossType::BinaryCrossEntropy;
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
  const LayerWork c = node_work(n, layout.tensors, batch);
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

KernelSample trials_linear_sample(const ModelLayout& layout, size_t i, int64_t batch, int trials,
                                  int shards) {
  KernelSample s = node_sample(layout, i, batch, shards);
  s.op = "trials_linear";
  s.trials = trials;
  s.flops *= trials;
  s.bytes *= trials;
  // Each worker's trials on its one thread: no matmul the backend spreads over threads.
  s.matmul_flops = 0;
  return s;
}

std::vector<ModelSpec> measure_grid_specs() {
  std::vector<ModelSpec> specs;
  for (int64_t batch : {32, 128, 512}) {
    for (int64_t width : {16, 64, 256, 1024}) specs.push_back(mlp(batch, width));
  }
  // Convolutions and LSTMs at shapes the built-in models do not have (other kernels, channels,
  // images, sequence lengths, widths and batches): what a model of the user's interpolates from.
  specs.push_back(cnn(32, {1, 28, 28}, 5, 8, 16));
  specs.push_back(cnn(128, {3, 32, 32}, 3, 32, 64));
  specs.push_back(lstm(64, 40, 32, 64));
  specs.push_back(lstm(128, 120, 96, 192));
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
  for (const auto& [key, value] : d.details) {
    // The backend's own figures (a GPU's): numbers it printed itself.
    if (key == "multiprocessors") profile.sm_count = std::atoi(value.c_str());
    if (key == "boost clock MHz") profile.clock_mhz = std::atof(value.c_str());
    if (key == "bf16 unit") profile.bf16_unit = value == "AMX" ? "amx" : "avx512_bf16";
  }
  const int threads = profile.policy.shard_threads;
  if (threads > 1) {
    profile.shard_fork_us = median_us(be, [&] { be.parallel_shards(threads, [](int) {}); });
  }
  measure_step_fixed(be, profile);
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

#include "model/fused_network.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "model/layer.h"
#include "model/work.h"

namespace xo {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

const char* fused_stepping_name(FusedStepping s) {
  switch (s) {
    case FusedStepping::Together:
      return "together";
    case FusedStepping::OneAfterAnother:
      return "one after another";
    case FusedStepping::SideBySide:
      return "side by side";
  }
  return "?";
}

// A training step's FLOPs below which a CPU's group of one worker steps together: disc-3's
// 3.2e4 (3% faster together at one thread), disc-4's 1.2e5 (the same either way).
constexpr double kTogetherAtOneWorkerFlops = 1e5;

namespace {

// What fused_stepping weighs of a model's step.
struct StepMix {
  double conv = 0, all = 0, largest = 0;  // FLOPs: convolutions', all nodes', the largest product
  bool own_loops = true;                  // every kernel crossover's own loops
  bool one_thread_kernels = true;         // every kernel can be made for one thread (in a shard)
};

StepMix step_mix(const std::vector<Node>& nodes, const std::vector<ParamTensor>& tensors,
                 int64_t batch) {
  StepMix m;
  for (const Node& n : nodes) {
    const double flops = node_work(n, tensors, batch).flops;
    m.all += flops;
    if (n.kind == NodeKind::Conv2d) m.conv += flops;
    m.largest = std::max(m.largest, static_cast<double>(batch) * n.forward_flops);
    switch (n.kind) {
      case NodeKind::Linear:
      case NodeKind::Activation:
      case NodeKind::Dropout:
      case NodeKind::Flatten:
      case NodeKind::Embedding:
        break;
      case NodeKind::LSTM:
      case NodeKind::SequencePool:
        m.own_loops = false;
        break;
      default:  // oneDNN's batch normalisation and pooling run on the threads they find;
                // convolutions were not measured side by side
        m.own_loops = false;
        m.one_thread_kernels = false;
    }
  }
  return m;
}

// One shard and every product on one thread alone (a Linear's products are its forward's size).
bool one_thread_alone(const StepMix& m, int64_t batch, const ExecutionPolicy& policy) {
  return policy.shards(batch, m.all) == 1 && m.largest < policy.single_thread_flops;
}

}  // namespace

FusedStepping fused_stepping(const std::vector<Node>& nodes,
                             const std::vector<ParamTensor>& tensors, int64_t batch,
                             DeviceKind kind, const ExecutionPolicy& policy, int models) {
  if (kind != DeviceKind::Cpu) return FusedStepping::Together;
  const StepMix m = step_mix(nodes, tensors, batch);
  if (m.all > 0 && 2 * m.conv > m.all) return FusedStepping::OneAfterAnother;
  if (policy.shard_threads >= 2) {
    // Crossover's own loops, one shard and every product on one thread alone: on a worker a
    // model's kernels run as they do alone (a group of one too).
    if (m.own_loops && one_thread_alone(m, batch, policy)) return FusedStepping::SideBySide;
    // Larger models, two or more: each on a worker, its kernels made for one thread (a trial left
    // alone goes on with every thread: train_fused). On 2 threads side by side was 3-17% faster
    // than together: mnist-mlp at f32 and bf16, disc-8, disc-10, disc-12, imdb-lstm
    // (docs/benchmarks.md, "A fused group at bf16 reads its trials' weight copies").
    if (models >= 2 && m.one_thread_kernels) return FusedStepping::SideBySide;
  }
  // One worker (a process of one thread: a Dask worker's, a search's trials at once): a model's
  // products run on the one core as they do alone, and batching them over the models only
  // multiplies what the core's caches hold. One after another, 8 mnist-mlp trials stepped at 1.02x
  // a trial alone against 0.94x together; disc-6 to disc-8 3-5% faster; disc-4 and disc-5 the
  // same. Below kTogetherAtOneWorkerFlops a step is as short as its kernel calls, which one kernel
  // over the models saves (disc-2: 10-13% faster together). docs/benchmarks.md, "One worker's
  // groups, and data read in place".
  if (m.own_loops && policy.shard_threads < 2 && m.all >= kTogetherAtOneWorkerFlops)
    return FusedStepping::OneAfterAnother;
  // A group of one: its model alone, in the shards it takes alone (its checkpoints resume in a
  // larger group's one shard and back, to f32 rounding: RunFingerprint::shards_may_differ).
  return models == 1 ? FusedStepping::OneAfterAnother : FusedStepping::Together;
}

bool steps_alone_on_one_thread(const std::vector<Node>& nodes,
                               const std::vector<ParamTensor>& tensors, int64_t batch,
                               const ExecutionPolicy& policy) {
  return one_thread_alone(step_mix(nodes, tensors, batch), batch, policy);
}

int64_t model_stride(int64_t flat_size) { return (flat_size + 15) / 16 * 16; }

std::string models_differ(const Model& a, const Model& b) {
  const auto& x = a.nodes();
  const auto& y = b.nodes();
  if (x.size() != y.size()) {
    return fmt::format("'{}' has {} layers (fused), '{}' {}", a.spec().name, x.size(),
                       b.spec().name, y.size());
  }
  if (a.spec().loss != b.spec().loss) {
    return fmt::format("'{}' and '{}' have different losses", a.spec().name, b.spec().name);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const Node& m = x[i];
    const Node& n = y[i];
    if (m.kind != n.kind || m.activation != n.activation || m.in_shape != n.in_shape ||
        m.out_shape != n.out_shape || m.spec.bias != n.spec.bias ||
        m.spec.kernel != n.spec.kernel || m.spec.stride != n.spec.stride ||
        m.spec.padding != n.spec.padding || m.spec.type != n.spec.type ||
        m.params.size() != n.params.size()) {
      return fmt::format("layer {} differs: {} {} in '{}', {} {} in '{}'", m.layer + 1,
                         layer_type_name(m.spec.type), shape_text(m.out_shape), a.spec().name,
                         layer_type_name(n.spec.type), shape_text(n.out_shape), b.spec().name);
    }
  }
  if (a.flat_size() != b.flat_size() || a.state_size() != b.state_size()) {
    return fmt::format("'{}' and '{}' hold different parameters", a.spec().name, b.spec().name);
  }
  return {};
}

DeviceBuffer pack_models(const std::vector<Model*>& models) {
  XO_ASSERT(!models.empty());
  Backend& be = models[0]->backend();
  const int64_t flat = models[0]->flat_size();
  const int64_t stride = model_stride(flat);
  const auto bytes = sizeof(float) * static_cast<size_t>(flat);
  const auto slot = sizeof(float) * static_cast<size_t>(stride);
  // Parameters of every model, then gradients of every model.
  DeviceBuffer all = be.allocate(2 * slot * models.size());
  std::vector<float> host(static_cast<size_t>(flat));
  for (size_t t = 0; t < models.size(); ++t) {
    Model& m = *models[t];
    XO_ASSERT(m.flat_size() == flat && &m.backend() == &be);
    DeviceBuffer params = all.view(t * slot, bytes);
    be.download(host.data(), m.params(), bytes);
    be.upload(params.as<float>(), host.data(), bytes);
    m.swap_params(params);
    m.swap_grads(all.view((models.size() + t) * slot, bytes));  // overwritten by every step
  }
  return all;
}

std::vector<FusedNetwork::Run> FusedNetwork::node_runs(const Group& g, size_t node,
                                                       int groups) const {
  const Node& n = models_[0]->nodes()[node];
  std::vector<Run> runs;
  if (is_view(n, true)) return runs;
  Backend& be = models_[0]->backend();
  // Models t and t + 1 share kernels where their buffers lie one stride apart.
  auto strided = [&](int t, int64_t stride) {
    const Model& a = *models_[static_cast<size_t>(t)];
    const Model& b = *models_[static_cast<size_t>(t) + 1];
    return b.params() - a.params() == stride && b.grads() - a.grads() == stride && stride > 0;
  };
  // The nodes that run a group's models as one kernel: its Linears, and its LSTMs where the
  // backend batches them.
  const bool fused =
      n.kind == NodeKind::Linear || (n.kind == NodeKind::LSTM && be.lstm_fuses_models());
  for (int t = 0; t < g.count;) {
    const Model& m = *models_[static_cast<size_t>(g.first + t)];
    Run run{t, 1, nullptr};
    int64_t stride = 0;
    if (fused && t + 1 < g.count) {
      stride = models_[static_cast<size_t>(g.first + t) + 1]->params() - m.params();
      while (run.first + run.count < g.count && strided(g.first + t + run.count - 1, stride))
        ++run.count;
    }
    // A Linear (LSTM) alone in its run still takes the models' kernel: a model's arithmetic is
    // then the same in any group.
    const int64_t fused_stride = !fused ? 0 : run.count > 1 ? stride : model_stride(m.flat_size());
    LayerContext context{batch_,       0,         true,      n.gradient_below, groups > 1, m.seed(),
                         &m.buffers(), m.state(), run.count, fused_stride};
    run.layer = make_layer(m.nodes()[node], m.tensors(), be, context);  // its own dropout rate
    t += run.count;
    runs.push_back(std::move(run));
  }
  return runs;
}

FusedNetwork::FusedNetwork(std::vector<const Model*> models, int64_t batch, int groups)
    : models_(std::move(models)), batch_(batch) {
  XO_ASSERT(!models_.empty() && batch > 0);
  const Model& first = *models_[0];
  for (const Model* m : models_) XO_ASSERT(models_differ(first, *m).empty());
  Backend& be = first.backend();
  const int count = static_cast<int>(models_.size());
  if (groups <= 0) groups = be.execution_policy().shard_threads;
  groups = std::clamp(groups, 1, count);
  const auto& nodes = first.nodes();
  auto buffer = [&](size_t bytes) {
    memory_.push_back(be.allocate(bytes));
    return memory_.back().as<float>();
  };
  for (int k = 0, next = 0; k < groups; ++k) {
    Group g;
    g.first = next;
    g.count = count / groups + (k < count % groups ? 1 : 0);
    next += g.count;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      g.nodes.push_back(node_runs(g, i, groups));
      if (g.nodes.back().empty()) {  // a view of its input: shares its buffers
        g.outputs.push_back(i > 0 ? g.outputs[i - 1] : nullptr);
        g.d_outputs.push_back(i > 0 ? g.d_outputs[i - 1] : nullptr);
        continue;
      }
      const size_t bytes = sizeof(float) * static_cast<size_t>(g.count * batch * n.out_size);
      g.outputs.push_back(buffer(bytes));
      g.d_outputs.push_back(buffer(bytes));
    }
    for (int t = 0; t < g.count; ++t) {
      g.losses.push_back(be.loss(first.loss_kind(), batch, first.outputs(), batch));
    }
    groups_.push_back(std::move(g));
  }
}

void FusedNetwork::group_step(Group& g, const float* src, const int32_t* labels,
                              LossStats* const* stats, FunctionRef<void(size_t model)> begin,
                              FunctionRef<void(size_t model)> done, FusedStepKernel* batched) {
  for (int t = 0; t < g.count; ++t) begin(static_cast<size_t>(g.first + t));
  const auto& nodes = models_[0]->nodes();
  const int64_t features = models_[0]->input_features();
  auto model = [&](int t) -> const Model& { return *models_[static_cast<size_t>(g.first + t)]; };
  // Node i's input and output for models from `t` on (a view's output is its input).
  auto input = [&](size_t i, int t) -> const float* {
    if (i > 0 && g.outputs[i - 1]) return g.outputs[i - 1] + t * batch_ * nodes[i - 1].out_size;
    return src + (g.first + t) * batch_ * features;
  };
  auto at = [&](float* p, size_t i, int t) { return p + t * batch_ * nodes[i].out_size; };
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (Run& r : g.nodes[i]) {
      const Model& m = model(r.first);
      r.layer->forward(m.params(), input(i, r.first), at(g.outputs[i], i, r.first),
                       m.step_counter());
    }
  }
  const size_t last = nodes.size() - 1;
  const int64_t classes = models_[0]->outputs();
  auto logits = [&](int t) {
    return g.outputs[last] ? g.outputs[last] + t * batch_ * classes
                           : src + (g.first + t) * batch_ * features;
  };
  if (batched) {  // every model's loss in one call
    batched->loss(logits(0), labels + g.first * batch_, g.d_outputs[last]);
  } else {
    for (int t = 0; t < g.count; ++t) {
      float* d_logits = g.d_outputs[last] + t * batch_ * classes;
      g.losses[static_cast<size_t>(t)]->forward_backward(logits(t), labels + (g.first + t) * batch_,
                                                         d_logits, stats[g.first + t]);
    }
  }
  for (size_t i = nodes.size(); i-- > 0;) {
    const bool below = i > 0 && nodes[i].gradient_below;
    for (Run& r : g.nodes[i]) {
      const Model& m = model(r.first);
      float* d_src = below ? at(g.d_outputs[i - 1], i - 1, r.first) : nullptr;
      r.layer->backward(m.params(), input(i, r.first), at(g.outputs[i], i, r.first),
                        at(g.d_outputs[i], i, r.first), m.grads(), d_src);
    }
  }
  for (int t = 0; t < g.count; ++t) done(static_cast<size_t>(g.first + t));
}

void FusedNetwork::train_step(const float* src, const int32_t* labels, LossStats* const* stats,
                              FunctionRef<void(size_t model)> begin,
                              FunctionRef<void(size_t model)> done, FusedStepKernel* batched) {
  Backend& be = models_[0]->backend();
  XO_ASSERT(batched == nullptr || groups() == 1);
  be.parallel_shards(groups(), [&](int k) {
    group_step(groups_[static_cast<size_t>(k)], src, labels, stats, begin, done, batched);
  });
  if (batched) return;  // its update() counts the steps
  for (const Model* m : models_) be.increment(m->step_counter());
}

}  // namespace xo

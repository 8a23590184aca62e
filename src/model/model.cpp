#include "model/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/hash.h"
#include "core/random.h"
#include "model/onnx_import.h"

namespace xo {
namespace {

constexpr int64_t kTensorAlignFloats = 16;  // 64 bytes: every view starts on a cache line

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Matmul FLOPs of a node's forward pass for one sample.
double node_forward_flops(const Node& n) {
  const LayerSpec& l = n.spec;
  switch (n.kind) {
    case NodeKind::Linear:
      return 2.0 * n.in_size * n.out_size;
    case NodeKind::Conv2d:
      return 2.0 * n.out_size * n.in_shape[0] * l.kernel * l.kernel;
    case NodeKind::LSTM: {
      double flops = 0;
      for (int64_t k = 0; k < l.layers; ++k) {
        const int64_t input = k == 0 ? n.in_shape[1] : l.out;
        flops += 2.0 * n.in_shape[0] * 4 * l.out * (input + l.out);
      }
      return flops;
    }
    default:
      return 0;
  }
}

// A normal deviate from two uniforms (Box-Muller), for nn.Embedding's N(0, 1).
double normal(Rng& rng) {
  const double u1 = 1.0 - rng.uniform();  // in (0, 1]
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

ModelLayout model_layout(const ModelSpec& spec) {
  const auto shapes = infer_shapes(spec);  // validates that the layers chain
  ModelLayout m;
  m.input_features = product(spec.input);
  auto add_tensor = [&](std::string name, std::vector<int64_t> shape) {
    ParamTensor t{std::move(name), std::move(shape), m.flat_size, 0};
    t.size = product(t.shape);
    m.parameter_count += t.size;
    m.flat_size += (t.size + kTensorAlignFloats - 1) / kTensorAlignFloats * kTensorAlignFloats;
    m.tensors.push_back(std::move(t));
    return static_cast<int>(m.tensors.size()) - 1;
  };
  const auto& layers = spec.layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    Node n;
    n.layer = static_cast<int>(i);
    const LayerKind& kind = layer_kind(layers[i].type);
    n.kind = kind.node;
    n.spec = layers[i];
    n.activation = kind.activation;
    n.in_shape = i == 0 ? spec.input : shapes[i - 1];
    n.out_shape = shapes[i];
    for (const ParamShape& t : layer_parameters(layers[i], n.in_shape)) {
      n.params.push_back(add_tensor(fmt::format("{}.{}", i, t.suffix), t.shape));
    }
    if (n.kind == NodeKind::BatchNorm) {  // PyTorch's buffers, in its state_dict order
      const int64_t channels = n.in_shape[0];
      for (auto [suffix, size] : {std::pair<const char*, int64_t>{"running_mean", channels},
                                  {"running_var", channels},
                                  {"num_batches_tracked", 1}}) {
        ParamTensor b{fmt::format("{}.{}", i, suffix),
                      size == 1 && std::string(suffix) == "num_batches_tracked"
                          ? std::vector<int64_t>{}
                          : std::vector<int64_t>{size},
                      m.state_size, size};
        b.integer = std::string(suffix) == "num_batches_tracked";
        m.state_size += (size + kTensorAlignFloats - 1) / kTensorAlignFloats * kTensorAlignFloats;
        n.buffers.push_back(static_cast<int>(m.buffers.size()));
        m.buffers.push_back(std::move(b));
      }
    }
    // An activation right after a Linear or Conv2d is fused into it (a oneDNN post-op / epilogue).
    const bool fusable = n.kind == NodeKind::Linear || n.kind == NodeKind::Conv2d;
    if (fusable && i + 1 < layers.size() && layer_kind(layers[i + 1].type).fuses) {
      n.activation = layer_kind(layers[i + 1].type).activation;
      n.out_shape = shapes[++i];
    }
    n.in_size = product(n.in_shape);
    n.out_size = product(n.out_shape);
    n.forward_flops = node_forward_flops(n);
    n.gradient_below =
        !m.nodes.empty() && (m.nodes.back().gradient_below || !m.nodes.back().params.empty());
    m.nodes.push_back(std::move(n));
  }
  m.outputs = m.nodes.back().out_size;
  return m;
}

Model::Model(ModelSpec spec, Backend& backend) : spec_(std::move(spec)), backend_(&backend) {
  ModelLayout layout = model_layout(spec_);
  tensors_ = std::move(layout.tensors);
  buffers_ = std::move(layout.buffers);
  nodes_ = std::move(layout.nodes);
  input_features_ = layout.input_features;
  outputs_ = layout.outputs;
  parameter_count_ = layout.parameter_count;
  flat_size_ = layout.flat_size;
  state_size_ = layout.state_size;
  // train/memory.cpp counts what is allocated here, before it is: keep the two alike.
  params_ = backend.allocate(sizeof(float) * flat_size_);
  grads_ = backend.allocate(sizeof(float) * flat_size_);
  if (state_size_ > 0) state_ = backend.allocate(sizeof(float) * state_size_);
  step_counter_ = backend.allocate(sizeof(uint64_t));
}

DeviceBuffer Model::swap_params(DeviceBuffer memory) {
  XO_ASSERT(memory.bytes() >= sizeof(float) * static_cast<size_t>(flat_size_));
  std::swap(memory, params_);
  return memory;
}

DeviceBuffer Model::swap_grads(DeviceBuffer memory) {
  XO_ASSERT(memory.bytes() >= sizeof(float) * static_cast<size_t>(flat_size_));
  std::swap(memory, grads_);
  return memory;
}

int64_t Model::token_vocab() const {
  return nodes_.front().kind == NodeKind::Embedding ? nodes_.front().spec.vocab : 0;
}

void Model::init(uint64_t seed) {
  seed_ = seed;
  backend_->fill_zero(step_counter(), sizeof(uint64_t));
  std::vector<float> host(flat_size_, 0.0f);
  Rng rng(seed);
  for (const Node& n : nodes_) {
    double bound = 0;
    switch (n.kind) {
      case NodeKind::Linear:
      case NodeKind::Conv2d:  // fan_in = in_features, or in_channels * k * k
        bound = 1.0 / std::sqrt(static_cast<double>(tensors_[n.params[0]].size / n.spec.out));
        break;
      case NodeKind::LSTM:
        bound = 1.0 / std::sqrt(static_cast<double>(n.spec.out));
        break;
      default:
        break;
    }
    if (n.kind == NodeKind::BatchNorm) {  // nn.BatchNorm: weight 1, bias 0
      const ParamTensor& w = tensors_[n.params[0]];
      std::fill(host.begin() + w.offset, host.begin() + w.offset + w.size, 1.0f);
      continue;
    }
    for (int idx : n.params) {
      const ParamTensor& t = tensors_[idx];
      for (int64_t k = 0; k < t.size; ++k) {
        host[t.offset + k] = static_cast<float>(
            n.kind == NodeKind::Embedding ? normal(rng) : rng.uniform(-bound, bound));
      }
    }
  }
  backend_->upload(params(), host.data(), sizeof(float) * host.size());
  backend_->fill_zero(grads(), sizeof(float) * flat_size_);
  if (state_size_ > 0) {  // running mean 0, running variance 1, no batch seen
    std::vector<float> state(static_cast<size_t>(state_size_), 0.0f);
    for (const ParamTensor& b : buffers_) {
      if (b.name.size() >= 11 && b.name.compare(b.name.size() - 11, 11, "running_var") == 0) {
        std::fill(state.begin() + b.offset, state.begin() + b.offset + b.size, 1.0f);
      }
    }
    backend_->upload(this->state(), state.data(), sizeof(float) * state.size());
  }
}

std::vector<NamedTensor> Model::export_params() const {
  std::vector<float> host(flat_size_);
  backend_->download(host.data(), params(), sizeof(float) * host.size());
  std::vector<NamedTensor> out;
  for (const ParamTensor& t : tensors_) {
    out.push_back({t.name, t.shape,
                   std::vector<float>(host.begin() + t.offset, host.begin() + t.offset + t.size)});
  }
  if (state_size_ > 0) {
    std::vector<float> state(static_cast<size_t>(state_size_));
    backend_->download(state.data(), this->state(), sizeof(float) * state.size());
    for (const ParamTensor& b : buffers_) {
      NamedTensor t{
          b.name, b.shape,
          std::vector<float>(state.begin() + b.offset, state.begin() + b.offset + b.size)};
      if (b.integer) t.dtype = "I64";
      out.push_back(std::move(t));
    }
  }
  return out;
}

void Model::import_params(const std::vector<NamedTensor>& tensors, const std::string& origin) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  // Every parameter and buffer must be there with its exact shape, and nothing else.
  auto take = [&](const ParamTensor& t, std::vector<float>& host) {
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      throw UserError(fmt::format("{}: tensor '{}' [{}] is missing (the model '{}' needs it)",
                                  origin, t.name, fmt::join(t.shape, ", "), spec_.name));
    }
    if (it->second->shape != t.shape) {
      throw UserError(fmt::format("{}: tensor '{}' has shape [{}], expected [{}] for model '{}'",
                                  origin, t.name, fmt::join(it->second->shape, ", "),
                                  fmt::join(t.shape, ", "), spec_.name));
    }
    std::copy(it->second->data.begin(), it->second->data.end(), host.begin() + t.offset);
    by_name.erase(it);
  };
  std::vector<float> host(flat_size_, 0.0f), state(static_cast<size_t>(state_size_), 0.0f);
  for (const ParamTensor& t : tensors_) take(t, host);
  for (const ParamTensor& b : buffers_) take(b, state);
  if (!by_name.empty()) {
    throw UserError(fmt::format("{}: tensor '{}' is not a parameter of model '{}'", origin,
                                by_name.begin()->first, spec_.name));
  }
  backend_->upload(params(), host.data(), sizeof(float) * host.size());
  if (state_size_ > 0) backend_->upload(this->state(), state.data(), sizeof(float) * state.size());
}

void initialize(Model& model, const std::string& init_file) {
  model.init(model.spec().train.seed);
  const ModelSpec& spec = model.spec();
  if (init_file.empty() && spec.init_weights) {
    model.import_params(*spec.init_weights, spec.init);
    return;
  }
  const std::string& file = init_file.empty() ? spec.init : init_file;
  if (!file.empty()) model.import_params(load_initial_weights(file), file);
}

std::string Model::parameter_hash() const {
  std::vector<float> host(static_cast<size_t>(flat_size_));
  backend_->download(host.data(), params(), sizeof(float) * host.size());
  Hasher h;
  h.values(host);
  host.assign(static_cast<size_t>(state_size_), 0.0f);
  if (state_size_ > 0) backend_->download(host.data(), state(), sizeof(float) * host.size());
  h.values(host);
  return h.hex();
}

double Model::forward_flops(int64_t batch) const {
  double flops = 0;
  for (const Node& n : nodes_) flops += static_cast<double>(batch) * n.forward_flops;
  return flops;
}

double Model::train_flops(int64_t batch) const {
  double flops = 0;
  for (const Node& n : nodes_) {
    const double f = static_cast<double>(batch) * n.forward_flops;
    flops += n.gradient_below ? 3 * f : 2 * f;  // forward, d_weights, and d_src where it flows
  }
  return flops;
}

Network::Network(const Model& model, const NetworkOptions& options)
    : model_(model), batch_(options.batch), training_(options.training) {
  Backend& be = model.backend();
  const int64_t batch = options.batch;
  const bool training = options.training;
  int shards = options.shards;
  if (shards <= 0) shards = training ? be.batch_shards(batch, model.train_flops(batch)) : 1;
  if (model.has_batch_norm()) shards = 1;  // the batch's statistics need the whole batch
  shards = static_cast<int>(std::min<int64_t>(shards, batch));
  // A sum is a mean with normalizer 1; a shard's mean divides by the whole batch.
  const int64_t loss_normalizer = options.loss == LossReduction::Sum ? 1
                                  : options.whole_batch > 0          ? options.whole_batch
                                                                     : batch;
  // train/memory.cpp counts what is allocated here, before it is: keep the two alike.
  auto buffer = [&](size_t bytes) {
    memory_.push_back(be.allocate(bytes));
    return memory_.back().as<void>();
  };
  const auto& nodes = model.nodes();
  int64_t offset = 0;
  for (int k = 0; k < shards; ++k) {
    Shard s;
    s.offset = offset;
    s.batch = batch / shards + (k < batch % shards ? 1 : 0);
    offset += s.batch;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      LayerContext context{s.batch,
                           options.sample_offset + s.offset,
                           training,
                           training && n.gradient_below,
                           shards > 1 || options.one_thread,
                           model.seed(),
                           &model.buffers(),
                           model.state()};
      s.layers.push_back(make_layer(n, model.tensors(), be, context));
      if (!s.layers.back()) {  // a view of its input: shares its buffers
        s.outputs.push_back(i > 0 ? s.outputs[i - 1] : nullptr);
        s.d_outputs.push_back(i > 0 ? s.d_outputs[i - 1] : nullptr);
        continue;
      }
      const size_t bytes = sizeof(float) * s.batch * n.out_size;
      s.outputs.push_back(static_cast<float*>(buffer(bytes)));
      s.d_outputs.push_back(training ? static_cast<float*>(buffer(bytes)) : nullptr);
    }
    s.loss = be.loss(model.loss_kind(), s.batch, model.outputs(), loss_normalizer);
    if (training) {
      s.grads =
          k == 0 ? model.grads() : static_cast<float*>(buffer(sizeof(float) * model.flat_size()));
    }
    if (k > 0) s.stats = static_cast<LossStats*>(buffer(sizeof(LossStats)));
    shards_.push_back(std::move(s));
  }
}

// A view node's output is its input, so outputs[i - 1] is node i's input (null: the batch itself).
template <typename Timed>
void Network::shard_step(Shard& s, const float* src, const int32_t* labels, LossStats* stats,
                         bool train, Timed&& timed, BackwardObserver* observer) {
  const float* params = model_.params();
  const uint64_t* step = model_.step_counter();
  auto input_of = [&](size_t i) { return i > 0 && s.outputs[i - 1] ? s.outputs[i - 1] : src; };
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (!s.layers[i]) continue;
    timed(Pass::Forward, i, [&] { s.layers[i]->forward(params, input_of(i), s.outputs[i], step); });
  }
  const float* logits = s.outputs.back() ? s.outputs.back() : src;
  float* d_logits = train ? s.d_outputs.back() : nullptr;
  timed(Pass::Loss, 0, [&] { s.loss->forward_backward(logits, labels, d_logits, stats); });
  if (!train) return;
  for (size_t i = s.layers.size(); i-- > 0;) {
    if (!s.layers[i]) continue;
    float* d_src = i > 0 && model_.nodes()[i].gradient_below ? s.d_outputs[i - 1] : nullptr;
    timed(Pass::Backward, i, [&] {
      s.layers[i]->backward(params, input_of(i), s.outputs[i], s.d_outputs[i], s.grads, d_src);
    });
    if (observer) observer->node_backward_done(i);
  }
}

void Network::run(const float* src, const int32_t* labels, LossStats* stats, bool train,
                  BackwardObserver* observer) {
  Backend& be = model_.backend();
  const int64_t features = model_.input_features();
  // Shards merge their gradients after all of them are done: only an unsharded step can tell
  // which gradients are final while backward goes on.
  if (shards_.size() > 1) observer = nullptr;
  be.parallel_shards(shards(), [&](int k) {
    Shard& s = shards_[k];
    if (s.stats) be.fill_zero(s.stats, sizeof(LossStats));
    shard_step(
        s, src + s.offset * features, labels + s.offset, s.stats ? s.stats : stats, train,
        [](Pass, size_t, auto&& work) { work(); }, observer);
  });
  if (train) be.increment(model_.step_counter());
  // Merge in shard order, so the sums do not depend on which worker finished first.
  for (size_t k = 1; k < shards_.size(); ++k) {
    if (train) be.accumulate(model_.grads(), shards_[k].grads, model_.flat_size());
    be.accumulate_stats(stats, shards_[k].stats);
  }
}

void Network::timed_step(const float* src, const int32_t* labels, LossStats* stats,
                         NodeTimes& out) {
  XO_ASSERT(training_ && shards_.size() == 1);
  Backend& be = model_.backend();
  out.forward_ms.assign(shards_[0].layers.size(), 0.0);
  out.backward_ms.assign(shards_[0].layers.size(), 0.0);
  using Clock = std::chrono::steady_clock;
  auto timed = [&](Pass pass, size_t node, auto&& work) {
    const auto t0 = Clock::now();
    work();
    be.synchronize();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (pass == Pass::Forward) out.forward_ms[node] = ms;
    if (pass == Pass::Loss) out.loss_ms = ms;
    if (pass == Pass::Backward) out.backward_ms[node] = ms;
  };
  be.synchronize();
  shard_step(shards_[0], src, labels, stats, true, timed);
  be.increment(model_.step_counter());
}

void Network::train_step(const float* src, const int32_t* labels, LossStats* stats,
                         BackwardObserver* observer) {
  XO_ASSERT(training_);
  run(src, labels, stats, true, observer);
}

void Network::evaluate(const float* src, const int32_t* labels, LossStats* stats) {
  run(src, labels, stats, false);
}

const float* Network::forward(const float* src) {
  XO_ASSERT(!training_ && shards_.size() == 1);
  Shard& s = shards_[0];
  const float* params = model_.params();
  const uint64_t* step = model_.step_counter();
  const float* input = src;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (!s.layers[i]) continue;
    s.layers[i]->forward(params, input, s.outputs[i], step);
    input = s.outputs[i];
  }
  return input;
}

}  // namespace xo

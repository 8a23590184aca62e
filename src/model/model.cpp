#include "model/model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "core/random.h"

namespace xo {
namespace {

constexpr int64_t kTensorAlignFloats = 16;  // 64 bytes: every view starts on a cache line

Activation activation_of(LayerType t) {
  switch (t) {
    case LayerType::ReLU:
      return Activation::ReLU;
    case LayerType::Tanh:
      return Activation::Tanh;
    case LayerType::Sigmoid:
      return Activation::Sigmoid;
    case LayerType::Linear:
      break;
  }
  return Activation::None;
}

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

Model::Model(ModelSpec spec, Backend& backend) : spec_(std::move(spec)), backend_(&backend) {
  const auto shapes = infer_shapes(spec_);  // validates that the layers chain
  input_features_ = product(spec_.input);
  int64_t width = input_features_;
  auto add_tensor = [&](std::string name, std::vector<int64_t> shape) {
    ParamTensor t{std::move(name), std::move(shape), flat_size_, 0};
    t.size = product(t.shape);
    parameter_count_ += t.size;
    flat_size_ += (t.size + kTensorAlignFloats - 1) / kTensorAlignFloats * kTensorAlignFloats;
    tensors_.push_back(std::move(t));
    return static_cast<int>(tensors_.size()) - 1;
  };
  const auto& layers = spec_.layers;
  for (size_t i = 0; i < layers.size(); ++i) {
    Block b;
    b.layer = static_cast<int>(i);
    b.in_features = width;
    if (layers[i].type == LayerType::Linear) {
      b.out_features = layers[i].out;
      b.weight = add_tensor(fmt::format("{}.weight", i), {layers[i].out, width});
      if (layers[i].bias) b.bias = add_tensor(fmt::format("{}.bias", i), {layers[i].out});
      // An activation right after a Linear is fused into it (one oneDNN post-op / epilogue).
      if (i + 1 < layers.size() && layers[i + 1].type != LayerType::Linear) {
        b.activation = activation_of(layers[i + 1].type);
        ++i;
      }
    } else {
      b.is_linear = false;
      b.activation = activation_of(layers[i].type);
      b.out_features = width;
    }
    width = b.out_features;
    blocks_.push_back(b);
  }
  classes_ = width;
  XO_ASSERT(product(shapes.back()) == classes_);
  params_ = backend.allocate(sizeof(float) * flat_size_);
  grads_ = backend.allocate(sizeof(float) * flat_size_);
}

void Model::init(uint64_t seed) {
  std::vector<float> host(flat_size_, 0.0f);
  Rng rng(seed);
  for (const Block& b : blocks_) {
    if (!b.is_linear) continue;
    const double bound = 1.0 / std::sqrt(static_cast<double>(b.in_features));
    for (int idx : {b.weight, b.bias}) {
      if (idx < 0) continue;
      const ParamTensor& t = tensors_[idx];
      for (int64_t k = 0; k < t.size; ++k) {
        host[t.offset + k] = static_cast<float>(rng.uniform(-bound, bound));
      }
    }
  }
  backend_->upload(params(), host.data(), sizeof(float) * host.size());
  backend_->fill_zero(grads(), sizeof(float) * flat_size_);
}

std::vector<NamedTensor> Model::export_params() const {
  std::vector<float> host(flat_size_);
  backend_->download(host.data(), params(), sizeof(float) * host.size());
  std::vector<NamedTensor> out;
  for (const ParamTensor& t : tensors_) {
    out.push_back({t.name, t.shape,
                   std::vector<float>(host.begin() + t.offset, host.begin() + t.offset + t.size)});
  }
  return out;
}

void Model::import_params(const std::vector<NamedTensor>& tensors, const std::string& origin) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  std::vector<float> host(flat_size_, 0.0f);
  for (const ParamTensor& t : tensors_) {
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
  }
  if (!by_name.empty()) {
    throw UserError(fmt::format("{}: tensor '{}' is not a parameter of model '{}'", origin,
                                by_name.begin()->first, spec_.name));
  }
  backend_->upload(params(), host.data(), sizeof(float) * host.size());
}

double Model::forward_flops(int64_t batch) const {
  double flops = 0;
  for (const Block& b : blocks_) {
    if (b.is_linear) flops += 2.0 * batch * b.in_features * b.out_features;
  }
  return flops;
}

double Model::train_flops(int64_t batch) const {
  double flops = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (!b.is_linear) continue;
    const double matmul = 2.0 * batch * b.in_features * b.out_features;
    flops += i == 0 ? 2 * matmul : 3 * matmul;  // forward, d_weights, and d_src past the first
  }
  return flops;
}

Network::Network(const Model& model, int64_t batch, bool training, int shards)
    : model_(model), batch_(batch), training_(training) {
  Backend& be = model.backend();
  if (shards <= 0) shards = training ? be.batch_shards(batch, model.train_flops(batch)) : 1;
  shards = static_cast<int>(std::min<int64_t>(shards, batch));
  auto buffer = [&](size_t bytes) {
    memory_.push_back(be.allocate(bytes));
    return memory_.back().as<void>();
  };
  const auto& blocks = model.blocks();
  int64_t offset = 0;
  for (int k = 0; k < shards; ++k) {
    Shard s;
    s.offset = offset;
    s.batch = batch / shards + (k < batch % shards ? 1 : 0);
    offset += s.batch;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const Block& b = blocks[i];
      Step step;
      if (b.is_linear) {
        LinearShape shape{s.batch,      b.in_features, b.out_features, b.bias >= 0,
                          b.activation, i > 0,         shards > 1};
        step.linear = be.linear(shape);
      } else {
        step.activation = be.activation(b.activation, s.batch * b.out_features);
      }
      s.steps.push_back(std::move(step));
      const size_t bytes = sizeof(float) * s.batch * b.out_features;
      s.outputs.push_back(static_cast<float*>(buffer(bytes)));
      s.d_outputs.push_back(training ? static_cast<float*>(buffer(bytes)) : nullptr);
    }
    s.loss = be.cross_entropy(s.batch, model.classes(), batch);
    if (training) {
      s.grads =
          k == 0 ? model.grads() : static_cast<float*>(buffer(sizeof(float) * model.flat_size()));
    }
    if (k > 0) s.stats = static_cast<LossStats*>(buffer(sizeof(LossStats)));
    shards_.push_back(std::move(s));
  }
}

void Network::forward(Shard& s, const float* src) {
  const auto& blocks = model_.blocks();
  const auto& tensors = model_.tensors();
  const float* params = model_.params();
  const float* x = src;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Block& b = blocks[i];
    if (b.is_linear) {
      s.steps[i].linear->forward(x, params + tensors[b.weight].offset,
                                 b.bias >= 0 ? params + tensors[b.bias].offset : nullptr,
                                 s.outputs[i]);
    } else {
      s.steps[i].activation->forward(x, s.outputs[i]);
    }
    x = s.outputs[i];
  }
}

void Network::backward(Shard& s, const float* src) {
  const auto& blocks = model_.blocks();
  const auto& tensors = model_.tensors();
  const float* params = model_.params();
  for (size_t i = blocks.size(); i-- > 0;) {
    const Block& b = blocks[i];
    const float* x = i > 0 ? s.outputs[i - 1] : src;
    float* d_x = i > 0 ? s.d_outputs[i - 1] : nullptr;
    if (b.is_linear) {
      s.steps[i].linear->backward(x, params + tensors[b.weight].offset, s.outputs[i],
                                  s.d_outputs[i], s.grads + tensors[b.weight].offset,
                                  b.bias >= 0 ? s.grads + tensors[b.bias].offset : nullptr, d_x);
    } else if (d_x) {
      s.steps[i].activation->backward(s.outputs[i], s.d_outputs[i], d_x);
    }
  }
}

void Network::run(const float* src, const int32_t* labels, LossStats* stats, bool train) {
  Backend& be = model_.backend();
  const int64_t features = model_.input_features();
  be.parallel_shards(shards(), [&](int k) {
    Shard& s = shards_[k];
    const float* x = src + s.offset * features;
    if (s.stats) be.fill_zero(s.stats, sizeof(LossStats));
    forward(s, x);
    s.loss->forward_backward(s.outputs.back(), labels + s.offset,
                             train ? s.d_outputs.back() : nullptr, s.stats ? s.stats : stats);
    if (train) backward(s, x);
  });
  // Merge in shard order, so the sums do not depend on which worker finished first.
  for (size_t k = 1; k < shards_.size(); ++k) {
    if (train) be.accumulate(model_.grads(), shards_[k].grads, model_.flat_size());
    be.accumulate_stats(stats, shards_[k].stats);
  }
}

void Network::train_step(const float* src, const int32_t* labels, LossStats* stats) {
  XO_ASSERT(training_);
  run(src, labels, stats, true);
}

void Network::evaluate(const float* src, const int32_t* labels, LossStats* stats) {
  run(src, labels, stats, false);
}

}  // namespace xo

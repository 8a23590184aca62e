// A training run's memory, counted from what Model, Network, TrainPlan and the Evaluator allocate
// (each says where it keeps the two alike), and the checks against the device's free memory.
#include "train/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "data/source.h"
#include "model/layer.h"
#include "train/plan.h"

namespace xo {
namespace {

constexpr int64_t kFloat = sizeof(float);

// Sizes that saturate at int64's maximum instead of wrapping: a model far too big for any device
// (a batch of 10^6 samples of a layer with 10^13 outputs) must read as "needs more than is free",
// never as a small or negative number of bytes.
int64_t times(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t plus(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

// A data set's bytes on `backend`: none where it reads borrowed samples in place (the CPU reading
// the Python module's arrays, Backend::borrow_host), else a copy of them.
int64_t device_bytes(const Dataset& d, const Backend& backend) {
  if (d.borrowed() && backend.info().kind == DeviceKind::Cpu) return 0;
  return static_cast<int64_t>(d.inputs().size_bytes() + d.labels().size_bytes());
}

// The Model's own buffers (its constructor): parameters and gradients (flat, padded), BatchNorm's
// running statistics, the step counter.
int64_t model_buffers(int64_t flat_size, int64_t state_size) {
  return 2 * kFloat * flat_size + kFloat * state_size + int64_t{sizeof(uint64_t)};
}

// The node outputs (and, in training, their gradients) a Network of `batch` samples holds.
int64_t activation_bytes(const std::vector<Node>& nodes, int64_t batch, bool training) {
  int64_t floats_per_sample = 0;
  for (const Node& n : nodes) {
    if (!is_view(n, training)) floats_per_sample = plus(floats_per_sample, n.out_size);
  }
  return times(times(kFloat, batch), times(floats_per_sample, training ? 2 : 1));
}

// What Network's constructor allocates for `options`: each node that is not a view holds its
// output for the shard's samples and, in training, the output's gradient; the shards' slices add
// up to the batch. Every shard after the first also keeps its own gradients (training) and loss
// sums, merged after the step.
int64_t network_bytes(const Model& model, const NetworkOptions& options) {
  int shards = options.shards;
  if (shards <= 0) {
    shards = options.training
                 ? model.backend().batch_shards(options.batch, model.train_flops(options.batch))
                 : 1;
  }
  if (model.has_batch_norm()) shards = 1;
  shards = static_cast<int>(std::min<int64_t>(shards, options.batch));
  int64_t bytes = activation_bytes(model.nodes(), options.batch, options.training);
  if (options.training) bytes = plus(bytes, times(shards - 1, kFloat * model.flat_size()));
  return plus(bytes, (shards - 1) * int64_t{sizeof(LossStats)});
}

// Whether a source makes its data (spec.data.samples of it) rather than reading a file of
// unknown length.
bool generated_source(const DataSpec& data) {
  return data.source == "disc" || data.source == "imdb-synthetic";
}

// "parameters and gradients 29.8 GiB, optimizer state 14.9 GiB, ...": the parts that need any.
std::string breakdown(const MemoryEstimate& m) {
  std::string out;
  auto add = [&](const char* what, int64_t bytes) {
    if (bytes <= 0) return;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", what, byte_size(static_cast<double>(bytes)));
  };
  add("parameters and gradients", m.parameters);
  add("optimizer state", m.optimizer);
  add("activations", m.activations);
  add("data", m.data);
  return out;
}

}  // namespace

int optimizer_state_per_parameter(const OptimizerSettings& optimizer) {
  switch (optimizer.type) {
    case OptimizerType::SGD:  // the momentum buffer exists when the step uses it (mu != 0 in f32)
      return static_cast<float>(optimizer.momentum) != 0.0f ? 1 : 0;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      return 2;
    case OptimizerType::RMSprop:
      return 1;
    case OptimizerType::Adadelta:
      return 2;
  }
  return 0;
}

bool keeps_bf16_weights(const DeviceInfo& device) {
  return device.kind == DeviceKind::Cpu && device.precision == "bf16";
}

namespace {
int64_t optimizer_bytes(const OptimizerSettings& optimizer, int64_t flat, bool bf16_weights) {
  return optimizer_state_per_parameter(optimizer) * kFloat * flat +
         (bf16_weights ? int64_t{sizeof(uint16_t)} * flat : 0);
}
}  // namespace

MemoryEstimate model_memory(const ModelLayout& layout, const OptimizerSettings& optimizer,
                            bool bf16_weights) {
  MemoryEstimate m;
  m.parameters = model_buffers(layout.flat_size, layout.state_size);
  m.optimizer = optimizer_bytes(optimizer, layout.flat_size, bf16_weights);
  return m;
}

MemoryEstimate training_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                               const ExecutionOptions& exec) {
  MemoryEstimate m;
  m.parameters = model_buffers(model.flat_size(), model.state_size());
  m.optimizer = optimizer_bytes(train.optimizer, model.flat_size(),
                                keeps_bf16_weights(model.backend().info()));
  // TrainPlan: the training set on the device, the epoch's loss sums, the Networks of the full
  // and the partial batch, and the buffers that gather a batch (shuffled or recorded steps).
  const int64_t samples = data.train.samples, features = data.train.features;
  const int64_t batch = std::min(train.batch, samples);
  m.data += device_bytes(data.train, model.backend());
  m.activations += 2 * sizeof(LossStats);  // the full batches' and the partial batch's
  if (batch > 0) {
    m.activations += network_bytes(model, {.batch = batch, .shards = exec.shards});
    if (const int64_t tail = samples % batch) {
      const auto shards = static_cast<int>(std::min<int64_t>(exec.shards, tail));
      m.activations += network_bytes(model, {.batch = tail, .shards = shards});
    }
    if (train.shuffle || exec.record_step) {
      m.data += int64_t{sizeof(int32_t)} * samples + kFloat * batch * features +
                int64_t{sizeof(int32_t)} * batch + int64_t{sizeof(int64_t)};
    }
    // time_nodes: one unsharded training Network, while the plan's are still held.
    if (exec.node_time_steps > 0) {
      m.activations += network_bytes(model, {.batch = batch, .shards = 1}) + sizeof(LossStats);
    }
  }
  // The Evaluator: the test set on the device, its loss sums, inference Networks for its batch
  // and the last, partial one.
  // The same for the validation set.
  for (const Dataset* evaluated : {&data.test, &data.validation}) {
    const int64_t samples_evaluated = evaluated->samples;
    if (samples_evaluated <= 0) continue;
    const int64_t eval_batch = evaluation_batch(model, samples_evaluated);
    m.data += device_bytes(*evaluated, model.backend());
    m.activations += sizeof(LossStats);
    NetworkOptions options{.batch = eval_batch, .training = false, .loss = LossReduction::Sum};
    m.activations += network_bytes(model, options);
    if (const int64_t tail = samples_evaluated % eval_batch) {
      options.batch = tail;
      m.activations += network_bytes(model, options);
    }
  }
  return m;
}

void check_model_memory(const ModelSpec& spec, const Backend& backend) {
  const ModelLayout layout = model_layout(spec);
  MemoryEstimate need =
      model_memory(layout, spec.train.optimizer, keeps_bf16_weights(backend.info()));
  // A lower bound of what training adds, known before the Model is built or any data loaded: the
  // outputs and gradients of one batch, and a generated training set. Building a model of 10^8
  // outputs per sample first took a minute and 6 GB before check_training_memory said no.
  // A file's length is not known yet, so its batch counts as one sample.
  const bool generated = generated_source(spec.data);
  const int64_t batch = generated ? std::min(spec.train.batch, spec.data.samples) : 1;
  need.activations = activation_bytes(layout.nodes, std::max<int64_t>(batch, 1), true);
  if (generated) {
    need.data = times(times(kFloat, spec.data.samples), layout.input_features);
  }
  const auto free = backend.free_memory_bytes();
  if (!free || need.total() <= *free) return;
  throw UserError(fmt::format(
      "model '{}' on {} needs at least {} ({}); {} are free (a smaller model or batch fits)",
      spec.name, backend.info().id, byte_size(static_cast<double>(need.total())), breakdown(need),
      byte_size(static_cast<double>(*free))));
}

void check_training_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                           const ExecutionOptions& exec) {
  const Backend& backend = model.backend();
  const MemoryEstimate need = training_memory(model, data, train, exec);
  const auto free = backend.free_memory_bytes();
  // The Model's buffers are allocated already, so what is free must hold the rest.
  if (!free || need.total() - need.parameters <= *free) return;
  throw UserError(fmt::format(
      "model '{}' on {} needs at least {} ({}); {} are free besides the {} its parameters and "
      "gradients hold",
      model.spec().name, backend.info().id, byte_size(static_cast<double>(need.total())),
      breakdown(need), byte_size(static_cast<double>(*free)),
      byte_size(static_cast<double>(need.parameters))));
}

MemoryEstimate fused_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                            int64_t trials, int64_t data_sets) {
  ExecutionOptions alone;
  alone.shards = 1;
  const MemoryEstimate one = training_memory(model, data, train, alone);
  auto times = [](int64_t bytes, int64_t n) {
    int64_t product = 0;
    return __builtin_mul_overflow(bytes, n, &product) ? std::numeric_limits<int64_t>::max()
                                                      : product;
  };
  return {times(one.parameters, trials), times(one.optimizer, trials),
          times(one.activations, trials), times(one.data, data_sets)};
}

namespace {

// What the estimate leaves out (the kernels' workspaces and blocked-layout copies, what they keep
// for backward) is a share of each trial: 16 fused mnist-cnn trials peaked well above their
// estimate, and 64 met the OOM killer (docs/benchmarks.md, "Many small trials as one model: fused
// trials"). A group may count on half of what is free.
constexpr int64_t kFusedHeadroom = 2;

}  // namespace

std::optional<int64_t> fused_trials_that_fit(const Model& model, const DataSplit& data,
                                             const TrainSpec& train) {
  const auto free = model.backend().free_memory_bytes();
  if (!free) return std::nullopt;
  const MemoryEstimate one = fused_memory(model, data, train, 1);
  const int64_t each = std::max<int64_t>(1, one.total() - one.data);
  return std::max<int64_t>(1, (*free / kFusedHeadroom - one.data) / each);
}

void check_fused_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                        int64_t trials, int64_t data_sets) {
  const Backend& backend = model.backend();
  const MemoryEstimate need = fused_memory(model, data, train, trials, data_sets);
  const auto free = backend.free_memory_bytes();
  // The trials' Models hold their parameters already, and the group packs them anew: what is free
  // must hold all of it while the packing goes on.
  if (!free || need.total() <= *free / kFusedHeadroom) return;
  throw UserError(fmt::format(
      "{} fused trials of '{}' on {} need at least {} ({}), and their kernels' own workspaces as "
      "much again; {} are free: at most {} such trials fit in one group here (tune --fuse N)",
      trials, model.spec().name, backend.info().id, byte_size(static_cast<double>(need.total())),
      breakdown(need), byte_size(static_cast<double>(*free)),
      fused_trials_that_fit(model, data, train).value_or(1)));
}

}  // namespace xo

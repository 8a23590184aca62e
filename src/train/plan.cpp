// Planning a training run: the checks on its inputs, the test evaluator, and TrainPlan, which
// allocates everything the step loop touches.
#include "train/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/interrupt.h"
#include "train/epoch_rules.h"

namespace xo {
namespace {

// The checks a data set must pass before it meets a model.
void check_data(const Model& model, const Dataset& data) {
  if (data.features != model.input_features()) {
    throw UserError(fmt::format("data '{}' has {} features per sample, model '{}' expects {}",
                                data.description, data.features, model.spec().name,
                                model.input_features()));
  }
  if ((data.classes == 0) != model.regression()) {
    throw UserError(fmt::format("data '{}' has {}, model '{}' {}", data.description,
                                data.classes == 0 ? "real-valued targets" : "class labels",
                                model.spec().name,
                                model.regression() ? "regresses (loss mse) a real target"
                                                   : "classifies (expected class labels)"));
  }
  if (data.classes > model.classes()) {
    throw UserError(fmt::format("data '{}' has {} classes, model '{}' predicts only {}",
                                data.description, data.classes, model.spec().name,
                                model.classes()));
  }
  // Token ids index the embedding table: one out of range would read outside it.
  if (const int64_t vocab = model.token_vocab(); vocab > 0) {
    const std::span<const float> x = data.inputs();
    for (size_t i = 0; i < x.size(); ++i) {
      const float id = x[i];
      if (!(id >= 0 && id < static_cast<float>(vocab)) ||
          id != static_cast<float>(static_cast<int64_t>(id))) {
        throw UserError(fmt::format(
            "data '{}': sample {}, position {} holds {}, not a token id in [0, {}) (the vocab of "
            "model '{}')",
            data.description, i / data.features, i % data.features, id, vocab, model.spec().name));
      }
    }
  }
}

// A batch's rows for this rank: all of them without ranks.
RankSlice slice_of(int64_t rows, const DataParallel* data_parallel) {
  if (!data_parallel) return {0, rows};
  return rank_slice(rows, data_parallel->rank(), data_parallel->ranks());
}

// This rank's contiguous slice of a data set.
Dataset rank_part(const Dataset& data, const DataParallel& data_parallel) {
  const RankSlice s = rank_slice(data.samples, data_parallel.rank(), data_parallel.ranks());
  return sample_rows(data, s.offset, s.offset + s.rows);
}

}  // namespace

// Big batches run faster, up to a point; the activations of one batch are bounded so that a wide
// CNN does not hold a gigabyte for its test pass (measured with `crossover train mnist-cnn
// --epochs 1`: the bounded batch peaked far lower, with the same test loss and no slower;
// docs/benchmarks.md, "Figures once quoted in code comments").
constexpr int64_t kMaxEvaluationBatch = 1000;
constexpr double kEvaluationActivationBytes = 64.0 * 1024 * 1024;

int64_t evaluation_batch(const Model& model, int64_t samples) {
  double per_sample = 0;
  for (const Node& n : model.nodes()) per_sample += sizeof(float) * static_cast<double>(n.out_size);
  const auto fit = static_cast<int64_t>(kEvaluationActivationBytes / std::max(per_sample, 1.0));
  return std::clamp<int64_t>(std::min(fit, kMaxEvaluationBatch), 1, std::max<int64_t>(samples, 1));
}

void check_training(const Model& model, const DataSplit& split, const TrainSpec& train) {
  check_epoch_rules(train, split.test.samples, split.validation.samples);
  check_data(model, split.train);
  if (split.test.samples > 0) check_data(model, split.test);
  if (split.validation.samples > 0) check_data(model, split.validation);
  if (train.batch <= 0 || train.epochs <= 0) {
    throw UserError(
        fmt::format("batch ({}) and epochs ({}) must be positive", train.batch, train.epochs));
  }
  // Step numbers are counted over the run: epochs x steps must be a count, not an overflow.
  const int64_t batch = std::min(train.batch, split.train.samples);
  const int64_t steps_per_epoch = (split.train.samples + batch - 1) / batch;
  int64_t steps = 0;
  if (__builtin_mul_overflow(train.epochs, steps_per_epoch, &steps)) {
    throw UserError(fmt::format(
        "train.epochs {} x {} steps per epoch is more steps than a 64-bit count holds (expected "
        "epochs <= {})",
        train.epochs, steps_per_epoch, std::numeric_limits<int64_t>::max() / steps_per_epoch));
  }
}

Evaluator::Evaluator(const Model& model, const Dataset& data, const DataParallel* data_parallel,
                     const Evaluator* data_of)
    : model_(model),
      data_(data),
      data_parallel_(data_parallel),
      batch_(evaluation_batch(model, data.samples)),
      x_(data_of ? data_of->x_ : to_device(model.backend(), data.inputs(), data.owner)),
      y_(data_of ? data_of->y_ : to_device(model.backend(), data.labels(), data.owner)),
      stats_(model.backend().allocate(sizeof(LossStats))) {
  // The loss is summed over the samples, and divided by their count in run().
  NetworkOptions options{.batch = batch_, .training = false, .loss = LossReduction::Sum};
  if (data.samples == 0) return;  // a rank without a slice of a small set
  full_.emplace(model, options);
  if (const int64_t tail = data.samples % batch_) {
    options.batch = tail;
    partial_.emplace(model, options);
  }
}

Evaluation Evaluator::run() {
  Backend& be = model_.backend();
  auto* stats = stats_.as<LossStats>();
  be.fill_zero(stats, sizeof(LossStats));
  const int64_t f = data_.features;
  for (int64_t start = 0; start < data_.samples; start += batch_) {
    // A large test split takes seconds: a stop request ends it between batches (on one process:
    // the ranks of a job add their sums below, so each evaluates its whole slice).
    if (!data_parallel_ && stop_requested()) {
      be.synchronize();
      constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
      return {kNone, kNone, false};
    }
    Network& net = start + batch_ <= data_.samples ? *full_ : *partial_;
    net.evaluate(x_.as<float>() + start * f, y_.as<int32_t>() + start, stats);
  }
  LossStats host{};
  be.synchronize();
  be.download(&host, stats, sizeof(host));
  if (data_parallel_) data_parallel_->sum(&host.loss_sum, 3);
  const double accuracy = model_.regression() ? std::numeric_limits<double>::quiet_NaN()
                                              : 100.0 * host.correct / host.samples;
  return {host.loss_sum / host.samples, accuracy};
}

void TrainPlan::plan_networks(int shards, bool on_one_thread) {
  XO_ASSERT(!recorded);  // a recorded step holds pointers into the Networks
  one_thread = on_one_thread;
  full.emplace(model, NetworkOptions{.batch = full_slice.rows,
                                     .shards = shards,
                                     .one_thread = one_thread,
                                     .sample_offset = full_slice.offset,
                                     .whole_batch = batch});
  partial.reset();
  if (const int64_t tail = samples % batch; tail_slice.rows > 0) {
    partial.emplace(model,
                    NetworkOptions{.batch = tail_slice.rows,
                                   .shards = static_cast<int>(std::min<int64_t>(shards, tail)),
                                   .one_thread = one_thread,
                                   .sample_offset = tail_slice.offset,
                                   .whole_batch = tail});
  }
}

TrainPlan::TrainPlan(Model& trained_model, const DataSplit& data, const TrainSpec& train,
                     const ExecutionOptions& exec, const PlanSharing& sharing)
    : model(trained_model),
      backend(trained_model.backend()),
      split(data),
      samples(data.train.samples),
      features(data.train.features),
      batch(std::min(train.batch, samples)),
      full_steps(samples / batch),
      steps_per_epoch(full_steps + (samples % batch ? 1 : 0)),
      data_parallel(exec.data_parallel),
      full_slice(slice_of(batch, exec.data_parallel)),
      tail_slice(slice_of(samples % batch, exec.data_parallel)),
      x(sharing.data_of ? sharing.data_of->x
                        : to_device(backend, data.train.inputs(), data.train.owner)),
      y(sharing.data_of ? sharing.data_of->y
                        : to_device(backend, data.train.labels(), data.train.owner)) {
  if (sharing.networks) plan_networks(exec.shards, exec.one_thread);
  optimizer = backend.optimizer(train.optimizer, model.flat_size());
  if (data_parallel) {
    test_part = rank_part(split.test, *data_parallel);
    validation_part = rank_part(split.validation, *data_parallel);
  }
  const TrainPlan* other = sharing.data_of;
  if (split.test.samples > 0) {
    evaluator.emplace(model, data_parallel ? test_part : split.test, data_parallel,
                      other && other->evaluator ? &*other->evaluator : nullptr);
  }
  if (split.validation.samples > 0) {
    validator.emplace(model, data_parallel ? validation_part : split.validation, data_parallel,
                      other && other->validator ? &*other->validator : nullptr);
  }
  stats_buffer = backend.allocate(2 * sizeof(LossStats));
  stats = stats_buffer.as<LossStats>();
  if (train.shuffle || exec.record_step || !sharing.networks) {
    order = backend.allocate(sizeof(int32_t) * samples);
    batch_x = backend.allocate(sizeof(float) * batch * features);
    batch_y = backend.allocate(sizeof(int32_t) * batch);
    position = backend.allocate(sizeof(int64_t));
  }
  gather = train.shuffle || !sharing.networks;
  // A fused trial's steps are timed by its group's clock (train/trials.cpp).
  if (sharing.networks)
    clock = backend.clock(static_cast<int>(StepMarks::kPerStep * steps_per_epoch));
}

Batch TrainPlan::select_batch(const StepSlice& w, BatchAt at) {
  const int64_t first = w.slice.offset;
  if (!at.gather) {
    return {x.as<float>() + (at.first + first) * features, y.as<int32_t>() + at.first + first};
  }
  // Every rank gathers the whole batch (the same order on each) and trains on its slice.
  backend.next_batch(x.as<float>(), y.as<int32_t>(), order.as<int32_t>(), position.as<int64_t>(),
                     w.rows, features, batch_x.as<float>(), batch_y.as<int32_t>());
  return {batch_x.as<float>() + first * features, batch_y.as<int32_t>() + first};
}

void TrainPlan::read_stats(LossStats host[2]) {
  backend.download(host, stats, 2 * sizeof(LossStats));
  static_assert(sizeof(LossStats) == 3 * sizeof(double));
  if (data_parallel) data_parallel->sum(&host[0].loss_sum, 6);
}

bool TrainPlan::stop_requested_everywhere() const {
  return data_parallel ? data_parallel->any(stop_requested()) : stop_requested();
}

}  // namespace xo

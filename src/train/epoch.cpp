// The epoch bookkeeping of train_model and the assembly of its result (see epoch.h).
#include "train/epoch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "core/interrupt.h"
#include "train/data_parallel.h"
#include "train/stats.h"

namespace xo {
namespace {

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

}  // namespace

TrainState start_state(TrainPlan& p, const TrainSpec& train) {
  TrainState state(train.seed);
  if (p.order) {
    state.order.resize(static_cast<size_t>(p.samples));
    std::iota(state.order.begin(), state.order.end(), 0);
    p.backend.upload(p.order.as<int32_t>(), state.order.data(), p.order.bytes());
  }
  return state;
}

void begin_epoch(TrainPlan& p, TrainState& state, bool shuffle) {
  if (shuffle) {
    std::iota(state.order.begin(), state.order.end(), 0);
    for (int64_t i = p.samples - 1; i > 0; --i) {
      std::swap(state.order[i], state.order[state.shuffle_rng.below(static_cast<uint64_t>(i + 1))]);
    }
    p.backend.upload(p.order.as<int32_t>(), state.order.data(), p.order.bytes());
  }
  if (p.gather) p.backend.fill_zero(p.position.as<int64_t>(), sizeof(int64_t));
  p.backend.fill_zero(p.stats, 2 * sizeof(LossStats));
  state.in_epoch = true;
  state.checked_loss_sum = 0;
  state.checked_step = 0;
}

void read_step_times(TrainPlan& p, TrainState& state) { read_step_times(p, state, *p.clock); }

void read_step_times(TrainPlan& p, TrainState& state, QueueClock& clock) {
  using M = StepMarks;
  StepTimes& t = state.times;
  for (int64_t s = state.timed; s < state.step; ++s) {
    const StepMarks marks(&clock, s);
    const double ms = clock.ms_between(marks.at(M::Start), marks.at(M::End));
    state.epoch_ms += ms;
    if (s >= p.full_steps) continue;  // the partial batch would skew the medians
    t.step.add(ms);
    if (!p.step_recorded()) {
      t.data.add(clock.ms_between(marks.at(M::Start), marks.at(M::BatchSelected)));
      t.forward_backward.add(
          clock.ms_between(marks.at(M::BatchSelected), marks.at(M::GradientsReady)));
      t.communicate.add(clock.ms_between(marks.at(M::GradientsReady), marks.at(M::Reduced)));
      t.optimizer.add(clock.ms_between(marks.at(M::Reduced), marks.at(M::End)));
    }
  }
  state.timed = state.step;
}

void add_step_times(TrainPlan& p, TrainState& state, int64_t first, const std::vector<double>& ms) {
  for (int64_t s = state.timed; s < state.step; ++s) {
    const double step_ms = ms.at(static_cast<size_t>(s - first));
    state.epoch_ms += step_ms;
    if (s < p.full_steps) state.times.step.add(step_ms);  // as read_step_times
  }
  state.timed = state.step;
}

EpochRecord finish_epoch(TrainPlan& p, TrainState& state) {
  LossStats host[2]{};
  p.read_stats(host);
  const double correct = host[0].correct + host[1].correct;
  const double samples = host[0].samples + host[1].samples;
  // A regression measures no error (nothing to count as right or wrong).
  EpochRecord record{state.epoch + 1,
                     epoch_mean_loss(host[0], host[1], p.batch),
                     p.model.regression() ? kNoValue : 100.0 * (1.0 - correct / samples),
                     state.epoch_ms / 1e3,
                     kNoValue,
                     kNoValue};
  record.lr = state.schedule.lr;
  // Across ranks, rank 0's BatchNorm running statistics are the model's.
  if (p.data_parallel && (p.evaluator || p.validator)) p.data_parallel->share_state(p.model);
  if (p.evaluator) {
    const Evaluation e = p.evaluator->run();
    record.test_loss = e.loss;
    record.test_accuracy = e.accuracy;
  }
  if (p.validator && !p.stop_requested_everywhere()) {
    const Evaluation e = p.validator->run();
    record.val_loss = e.loss;
    record.val_accuracy = e.accuracy;
  }
  if (!std::isfinite(record.loss) && state.diverged_epoch == 0) {
    state.diverged_epoch = record.epoch;
  }
  keep_epoch_record(state.epochs, record, state.early_stopping.best_epoch);
  state.train_seconds += record.seconds;
  ++state.epoch;
  state.in_epoch = false;
  state.step = 0;
  state.timed = 0;
  state.epoch_ms = 0;
  return record;
}

TrainResult make_result(const TrainPlan& p, const TrainState& state, double setup_seconds,
                        bool interrupted) {
  TrainResult r;
  r.model = p.model.spec().name;
  r.origin = p.model.spec().origin;
  r.data = p.split.train.description;
  r.params = p.model.parameter_count();
  r.device = p.backend.info();
  r.batch = p.batch;
  r.samples = p.samples;
  r.steps_per_epoch = p.steps_per_epoch;
  r.test_samples = p.split.test.samples;
  r.validation_samples = p.split.validation.samples;
  r.shards = p.shards();
  r.recorded_step = p.step_recorded();
  r.flops_per_step = p.model.train_flops(p.batch);
  r.setup_seconds = setup_seconds;
  r.epochs = state.epochs;
  r.train_seconds = state.train_seconds;
  if (!r.epochs.empty()) {
    r.final_loss = r.epochs.back().loss;
    r.final_train_error = r.epochs.back().train_error;
    r.final_test_loss = r.epochs.back().test_loss;
    r.final_test_accuracy = r.epochs.back().test_accuracy;
    r.final_val_loss = r.epochs.back().val_loss;
    r.final_val_accuracy = r.epochs.back().val_accuracy;
  }
  const StepTimes& t = state.times;
  r.step_ms = t.step.summary();
  r.data_ms = p.step_recorded() ? kNoValue : t.data.summary().median;
  r.forward_backward_ms = p.step_recorded() ? kNoValue : t.forward_backward.summary().median;
  r.optimizer_ms = p.step_recorded() ? kNoValue : t.optimizer.summary().median;
  if (p.data_parallel) {
    r.ranks = p.data_parallel->ranks();
    r.communicate_ms = t.communicate.summary().median;
    r.reduced_bytes = static_cast<int64_t>(sizeof(float)) * p.data_parallel->floats_per_step();
    r.reduce_mode = reduce_mode_name(p.data_parallel->mode());
    r.hosts = p.data_parallel->world().hosts();
    r.ranks_per_host = p.data_parallel->world().ranks_per_host();
    for (const GradientBucket& b : p.data_parallel->buckets()) {
      r.reduce_buckets.push_back(static_cast<int64_t>(sizeof(float)) * b.size);
    }
  }
  r.steps_taken = state.steps_taken;
  if (r.step_ms.median > 0) {
    r.gflops = r.flops_per_step / (r.step_ms.median * 1e-3) / 1e9;
    r.samples_per_second = static_cast<double>(p.batch) / (r.step_ms.median * 1e-3);
  }
  r.interrupted = interrupted;
  r.diverged_epoch = state.diverged_epoch;
  r.resumed_differently = state.resumed_differently;
  if (!p.model.regression()) r.majority_class_error = majority_class_error(p.split.train.labels());
  return r;
}

void keep_epoch_record(std::vector<EpochRecord>& epochs, const EpochRecord& record, int64_t best) {
  const int64_t stride = epoch_record_stride(record.epoch);
  auto off_stride = [&](const EpochRecord& e) {
    return e.epoch != 1 && e.epoch % stride != 0 && e.epoch != best;
  };
  // Where the stride doubled, every other record goes; where the records are full, those kept as
  // an earlier best go too. Else only the newest so far, where it was kept as the newest.
  if (stride != epoch_record_stride(record.epoch - 1) || epochs.size() >= kMaxEpochRecords) {
    std::erase_if(epochs, off_stride);
  } else if (!epochs.empty() && off_stride(epochs.back())) {
    epochs.pop_back();
  }
  epochs.push_back(record);
}

double epoch_mean_loss(const LossStats& full, const LossStats& partial, int64_t batch) {
  // Each sum adds batch means: times the batch size, the sums of the samples' losses. A partial
  // batch is one step, so its sample count is its size.
  const double samples = full.samples + partial.samples;
  return (full.loss_sum * static_cast<double>(batch) + partial.loss_sum * partial.samples) /
         samples;
}

double majority_class_error(std::span<const int32_t> labels) {
  if (labels.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<int64_t> counts;
  for (const int32_t y : labels) {
    if (y < 0) continue;
    if (static_cast<size_t>(y) >= counts.size()) counts.resize(static_cast<size_t>(y) + 1, 0);
    ++counts[static_cast<size_t>(y)];
  }
  const int64_t most = counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
  return 100.0 * (1.0 - static_cast<double>(most) / static_cast<double>(labels.size()));
}

std::string stuck_warning(const TrainResult& r) {
  constexpr double kPoints = 0.5;  // percentage points of slack
  if (r.epochs.empty() || r.step_limited || !std::isfinite(r.majority_class_error) ||
      !std::isfinite(r.final_train_error) ||
      r.final_train_error < r.majority_class_error - kPoints) {
    return "";
  }
  return fmt::format(
      "{}: train error {:.2f}% is no better than always predicting the most frequent class "
      "({:.2f}% of the samples are not in it): the model learned nothing beyond the class balance "
      "(a learning rate too high or too low, or a network too deep to train as it is)",
      r.model, r.final_train_error, r.majority_class_error);
}

// Reads the epoch's loss sums: false once they are not finite. Else notes the mean batch loss
// since the last check as the last finite loss. On a GPU the read waits for the queued steps, so
// the loop checks every few hundred steps there and every step on the CPU, where it is a copy.
bool loss_finite(TrainPlan& p, TrainState& state) {
  LossStats host[2]{};
  p.read_stats(host);
  const double loss_sum = host[0].loss_sum + host[1].loss_sum;  // of batch means
  if (!std::isfinite(loss_sum)) return false;
  if (const int64_t steps = state.step - state.checked_step; steps > 0) {
    state.last_finite_loss = (loss_sum - state.checked_loss_sum) / static_cast<double>(steps);
    state.last_finite_epoch = state.epoch + 1;
    state.last_finite_step = state.step;
  }
  state.checked_loss_sum = loss_sum;
  state.checked_step = state.step;
  return true;
}

int64_t loss_check_interval(const Backend& be) {
  return be.info().kind == DeviceKind::Cpu ? 1 : 256;
}

void note_loss_checks(const TrainState& state, bool diverged, TrainResult& r) {
  if (diverged) {
    r.stopped_diverged = true;
    r.diverged_epoch = state.epoch + 1;
    r.diverged_from = state.checked_step + 1;
    r.diverged_step = state.step;
  }
  r.last_finite_loss = state.last_finite_loss;
  r.last_finite_epoch = state.last_finite_epoch;
  r.last_finite_step = state.last_finite_step;
}

}  // namespace xo

// The learning-rate schedule and early stopping between epochs (see epoch_rules.h).
#include "train/epoch_rules.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/toml.h"

namespace xo {
namespace {

// The monitor a table names, or its default: val_loss where there is a validation split
// (Keras's default), else test_loss where there is a test split (what ReduceLROnPlateau is
// usually given), else the training loss.
Metric resolve_monitor(const std::optional<Metric>& monitor, int64_t test_samples,
                       int64_t validation_samples) {
  if (monitor) return *monitor;
  return validation_samples > 0 ? Metric::ValLoss
         : test_samples > 0     ? Metric::TestLoss
                                : Metric::Loss;
}

void check_monitor(const std::optional<Metric>& monitor, const SpecPlace& place,
                   std::string_view key, int64_t test_samples, int64_t validation_samples) {
  if (monitor && needs_test_split(*monitor) && test_samples == 0) {
    fail_at(place.origin, place.line, key,
            fmt::format("'{}' is measured on the test split, and this run's data has none "
                        "(expected \"loss\", the training loss, or data with a test split)",
                        metric_name(*monitor)));
  }
  if (monitor && needs_validation_split(*monitor) && validation_samples == 0) {
    fail_at(place.origin, place.line, key,
            fmt::format("'{}' is measured on the validation split, and this run has none "
                        "(expected \"loss\", or data.validation_split)",
                        metric_name(*monitor)));
  }
}

}  // namespace

void check_epoch_rules(const TrainSpec& train, int64_t test_samples, int64_t validation_samples) {
  if (train.schedule) {
    check_monitor(train.schedule->monitor, train.schedule->monitor_place, "train.schedule.monitor",
                  test_samples, validation_samples);
  }
  if (train.early_stopping) {
    check_monitor(train.early_stopping->monitor, train.early_stopping->monitor_place,
                  "train.early_stopping.monitor", test_samples, validation_samples);
  }
}

double metric_value(const EpochRecord& record, Metric monitor) {
  switch (monitor) {
    case Metric::Loss:
      return record.loss;
    case Metric::ValLoss:
      return record.val_loss;
    case Metric::ValAccuracy:
      return record.val_accuracy;
    case Metric::TestLoss:
      return record.test_loss;
    case Metric::TestAccuracy:
      return record.test_accuracy;
  }
  XO_ASSERT(false && "metric missing from metric_value");
}

EpochRules::EpochRules(const TrainSpec& train, int64_t test_samples, int64_t validation_samples)
    : initial_lr_(train.optimizer.lr), epochs_(train.epochs) {
  if (const auto& s = train.schedule) {
    schedule_.emplace(*s, train.optimizer.lr, train.epochs,
                      resolve_monitor(s->monitor, test_samples, validation_samples));
  }
  if (const auto& e = train.early_stopping) {
    stopping_.emplace(*e, resolve_monitor(e->monitor, test_samples, validation_samples));
  }
}

void EpochRules::start(const TrainPlan& p, TrainState& state) const {
  state.schedule.lr = initial_lr_;
  if (schedule_) state.schedule = schedule_->start();
  if (stopping_) {
    state.early_stopping = stopping_->start();
    if (stopping_->settings().restore_best) {
      state.best_params.assign(static_cast<size_t>(p.model.flat_size()), 0.0f);
      state.best_buffers.assign(static_cast<size_t>(p.model.state_size()), 0.0f);
    }
  }
}

void EpochRules::apply_rate(TrainPlan& p, const TrainState& state) const {
  if (schedule_) p.optimizer->set_learning_rate(state.schedule.lr);
}

bool EpochRules::after_epoch(TrainPlan& p, TrainState& state, const EpochRecord& record) const {
  if (schedule_) {
    const double before = state.schedule.lr;
    schedule_->step(state.schedule, metric_value(record, schedule_->monitor()));
    if (state.schedule.lr != before) p.optimizer->set_learning_rate(state.schedule.lr);
  }
  if (!stopping_) return false;
  const bool best = stopping_->update(state.early_stopping, record.epoch,
                                      metric_value(record, stopping_->monitor()));
  if (best && !state.best_params.empty()) {
    // Copies to host buffers sized before the first step; download waits for the device.
    Backend& be = p.backend;
    be.download(state.best_params.data(), p.model.params(),
                sizeof(float) * state.best_params.size());
    if (!state.best_buffers.empty()) {
      be.download(state.best_buffers.data(), p.model.state(),
                  sizeof(float) * state.best_buffers.size());
    }
  }
  return state.early_stopping.stop;
}

void EpochRules::finish(TrainPlan& p, const TrainState& state, bool completed,
                        TrainResult& r) const {
  if (!stopping_) return;
  const EarlyStoppingState& e = state.early_stopping;
  r.early_stopping_monitor = metric_name(stopping_->monitor());
  r.early_stopping_patience = stopping_->settings().patience;
  r.early_stopping_min_delta = stopping_->settings().min_delta;
  // The rule may fire at the last epoch too: that run was not stopped early.
  r.stopped_early = e.stop && state.epoch < epochs_;
  r.best_epoch = e.best_epoch;
  if (e.best_epoch > 0) r.best_value = e.best;
  // Keras restores at the end of training, stopped early or not; a run cut short (Ctrl-C, a step
  // limit, a loss gone bad) keeps its last parameters, which its checkpoint continues from.
  if (completed && e.best_epoch > 0 && !state.best_params.empty()) {
    Backend& be = p.backend;
    be.upload(p.model.params(), state.best_params.data(), sizeof(float) * state.best_params.size());
    if (!state.best_buffers.empty()) {
      be.upload(p.model.state(), state.best_buffers.data(),
                sizeof(float) * state.best_buffers.size());
    }
    be.synchronize();
    r.restored_best = true;
  }
}

}  // namespace xo

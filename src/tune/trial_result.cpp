#include "tune/trial_result.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "train/epoch_rules.h"

namespace xo {
namespace {

// The metric --objective names, refused where the data or the model cannot give it.
Metric checked_metric(Metric m, const std::string& objective, const ModelSpec& base,
                      const DataSplit& data, bool regression) {
  if (needs_validation_split(m) && data.validation.samples == 0) {
    throw UserError(
        fmt::format("--objective {}: {} has no validation split (set data.validation_split)",
                    objective, base.name));
  }
  if (needs_test_split(m) && data.test.samples == 0) {
    throw UserError(
        fmt::format("--objective {}: {}'s data has no test split", objective, base.name));
  }
  if (regression && (m == Metric::ValAccuracy || m == Metric::TestAccuracy)) {
    throw UserError(
        fmt::format("--objective {}: {} is a regression (mse): it has no "
                    "accuracy",
                    objective, base.name));
  }
  return m;
}

}  // namespace

Metric objective_metric(const std::string& objective, const ModelSpec& base, const DataSplit& data,
                        bool regression) {
  if (!objective.empty()) {
    for (Metric m : kMetrics) {
      if (objective == metric_name(m)) return checked_metric(m, objective, base, data, regression);
    }
    std::vector<std::string> names;
    for (Metric m : kMetrics) names.push_back(metric_name(m));
    throw UserError(fmt::format("--objective '{}': unknown (expected one of {})", objective,
                                fmt::join(names, ", ")));
  }
  if (data.validation.samples > 0) return regression ? Metric::ValLoss : Metric::ValAccuracy;
  if (data.test.samples > 0) return regression ? Metric::TestLoss : Metric::TestAccuracy;
  return Metric::Loss;
}

void record_result(TrialRecord& t, const TrainResult& r, Metric metric) {
  t.params = r.params;
  t.epochs = epochs_completed(r);
  t.steps = r.steps_taken;
  t.resumed_differently = r.resumed_differently;
  // A fused trial's share of its group's step and epochs (each step trained every trial of it;
  // epochs of an earlier rung's group are taken as shared alike).
  const double share = 1.0 / std::max(1, r.fused_trials);
  t.step_ms = r.step_ms.median * share;
  t.curve.clear();
  for (const EpochRecord& e : r.epochs) {
    t.curve.push_back({e.epoch, e.loss, e.val_loss, e.val_accuracy, e.test_loss, e.test_accuracy,
                       e.seconds * share});
  }
  t.train_seconds = r.train_seconds * share;
  // The objective at the epoch whose weights the trial kept: the best where they were restored
  // (its record is never thinned out), else the last.
  auto at = r.epochs.end() - (r.epochs.empty() ? 0 : 1);
  if (r.restored_best && r.best_epoch > 0) {
    at = std::find_if(r.epochs.begin(), r.epochs.end(),
                      [&](const EpochRecord& e) { return e.epoch == r.best_epoch; });
  }
  t.objective = at == r.epochs.end() ? std::nan("") : metric_value(*at, metric);
}

void end_rung(TrialRecord& t, int rung, double value) {
  // Values past `rung` go; rungs below it without a value read NaN.
  t.rung_objective.resize(static_cast<size_t>(rung), std::nan(""));
  t.rung_objective.push_back(value);
}

TrialStatus trained_status(const TrainResult& r) {
  return r.stopped_early ? TrialStatus::EarlyStopped
         : r.paused      ? TrialStatus::Paused
                         : TrialStatus::Finished;
}

}  // namespace xo

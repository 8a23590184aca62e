// What happens between two epochs besides the bookkeeping: the learning-rate schedule steps (and
// the optimizer takes the new rate) and early stopping judges the epoch, keeping the best epoch's
// parameters where asked. Both follow the epoch's figures only, on the host.
#pragma once

#include <optional>

#include "model/model.h"
#include "optim/schedule.h"
#include "train/plan.h"
#include "train/state.h"
#include "train/trainer.h"

namespace xo {

// Throws UserError before any work unless the monitors of the schedule and early stopping can be
// measured on this run's data: a test metric only with a test split, a validation one only with a
// validation split. Messages name the file and line of the key. Both run on every device (the
// GPU's recorded step reads its rate from device memory, set between epochs).
void check_epoch_rules(const TrainSpec& train, int64_t test_samples,
                       int64_t validation_samples = 0);

// The figure `monitor` names in an epoch's record.
double metric_value(const EpochRecord& record, Metric monitor);

class EpochRules {
 public:
  // Resolves the monitors (val_loss where there is a validation split, as Keras; else test_loss
  // where there is a test split; else the training loss) and t_max (train.epochs where unset).
  EpochRules(const TrainSpec& train, int64_t test_samples, int64_t validation_samples = 0);

  // The state before the first epoch; restore_best's buffers are sized here, before any step.
  void start(const TrainPlan& p, TrainState& state) const;
  // Gives the optimizer the rate of the epoch under way (after a resume); nothing without a
  // schedule, so that a backend without set_learning_rate never sees one.
  void apply_rate(TrainPlan& p, const TrainState& state) const;
  // After epoch `record`: steps the schedule (the optimizer takes the next epoch's rate) and early
  // stopping. Returns true when early stopping says to stop.
  bool after_epoch(TrainPlan& p, TrainState& state, const EpochRecord& record) const;
  // At the end of a run that was not cut short (all epochs, or stopped early): puts back the best
  // epoch's parameters where asked, and notes early stopping's outcome in `r`.
  void finish(TrainPlan& p, const TrainState& state, bool completed, TrainResult& r) const;

 private:
  double initial_lr_;
  int64_t epochs_;
  std::optional<LrSchedule> schedule_;
  std::optional<EarlyStopping> stopping_;
};

}  // namespace xo

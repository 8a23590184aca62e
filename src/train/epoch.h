// The bookkeeping around the step loop: the state before the first epoch, the order shuffled and
// the sums zeroed before each epoch, the timestamps and loss statistics read back after it (the
// test split evaluated, the EpochRecord kept), and the TrainResult assembled at the end.
#pragma once

#include <cstdint>
#include <vector>

#include "train/plan.h"
#include "train/state.h"
#include "train/trainer.h"

namespace xo {

// The state before the first epoch; where batches may be gathered on the device, the samples'
// own order is put there (a shuffled run replaces it every epoch).
TrainState start_state(TrainPlan& p, const TrainSpec& train);
// Shuffles the order when asked (Fisher-Yates with the seeded generator: the same order on every
// machine), and zeroes the batch position and the loss sums.
void begin_epoch(TrainPlan& p, TrainState& state, bool shuffle);
// Reads the timestamps of the epoch's steps not read yet (from state.timed to state.step) into
// state.times, adding their sum to state.epoch_ms. Waits for those steps. From the plan's clock,
// or from `clock` (a fused group's, which stamps every trial's steps once).
void read_step_times(TrainPlan& p, TrainState& state);
void read_step_times(TrainPlan& p, TrainState& state, QueueClock& clock);
// Adds step times measured otherwise (ms[s - first] for step s) for the steps not read yet, as
// read_step_times adds its clock's: a fused group's that steps its trials apart.
void add_step_times(TrainPlan& p, TrainState& state, int64_t first, const std::vector<double>& ms);
// Closes a completed epoch: reads its loss statistics (the host's one wait per epoch), evaluates
// the test split, notes divergence, and keeps the record, which it returns.
EpochRecord finish_epoch(TrainPlan& p, TrainState& state);
// Appends `record` to `epochs`, keeping the records of the epochs that are multiples of
// epoch_record_stride(record.epoch), the first, the newest and that of epoch `best` (early
// stopping's best, 0: none): at most kMaxEpochRecords, evenly spaced.
void keep_epoch_record(std::vector<EpochRecord>& epochs, const EpochRecord& record, int64_t best);
// The mean loss per sample of an epoch (as Keras and PyTorch report it) from its loss sums: those
// of its full batches of `batch` samples, and those of its partial batch (zeros when it has none).
double epoch_mean_loss(const LossStats& full, const LossStats& partial, int64_t batch);
// Reads the epoch's loss sums: false once they are not finite. Else notes the mean batch loss
// since the last check as the last finite loss. On a GPU the read waits for the queued steps.
bool loss_finite(TrainPlan& p, TrainState& state);
// How many steps apart the loss is checked (besides each epoch's end and each checkpoint): every
// step on the CPU, where the check is a read; every 256 on a GPU, where it waits for the device.
int64_t loss_check_interval(const Backend& be);
// The loss checks' outcome in a result: where the loss stopped being finite (`diverged`: the run
// stopped on it) and the last finite loss seen.
void note_loss_checks(const TrainState& state, bool diverged, TrainResult& r);
// The run's result, from the plan and the state at the end (step medians without the warm-up).
TrainResult make_result(const TrainPlan& p, const TrainState& state, double setup_seconds,
                        bool interrupted);

}  // namespace xo

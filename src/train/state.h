// The training state between two steps: with the model's parameters and buffers, the optimizer's
// state and the device's counters, what saving and restoring a run in progress needs.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/random.h"
#include "optim/schedule.h"
#include "train/timing_series.h"
#include "train/trainer.h"

namespace xo {

// Timings of the full-batch steps so far, in milliseconds: the whole step, and its phases when the
// step is not recorded (a recorded step runs as one unit). In bounded space, the warm-up held apart
// (train/timing_series.h).
struct StepTimes {
  TimingSeries step, data, forward_backward, communicate, optimizer;
};

// A run's epoch records in bounded space (TrainState::epochs, its checkpoints, its result): at
// most this many, every epoch's up to kMaxEpochRecords - 3 epochs; past that, those of every 2nd,
// 4th, … epoch, evenly spaced, with the first, the newest and early stopping's best
// (keep_epoch_record, train/epoch.h), so that a long run's checkpoints stop growing.
inline constexpr size_t kMaxEpochRecords = 8192;
// The spacing of a run's epoch records after epoch `epoch`: 1 (every epoch) up to
// kMaxEpochRecords - 3 epochs, then the smallest power of two that keeps them under the bound
// (the first, the newest and the best kept besides).
inline int64_t epoch_record_stride(int64_t epoch) {
  constexpr auto kSpan = static_cast<int64_t>(kMaxEpochRecords) - 2;
  int64_t stride = 1;
  while (epoch / stride >= kSpan) stride *= 2;
  return stride;
}

struct TrainState {
  // The shuffle draws from its own stream, apart from the initialisation's.
  static constexpr uint64_t kShuffleStream = 0x5eed5eed5eedULL;
  explicit TrainState(uint64_t seed) : shuffle_rng(seed ^ kShuffleStream) {}

  int64_t epoch = 0;  // epochs completed
  // Steps completed in the epoch under way; where batches are gathered, the device's batch
  // position is step * batch.
  int64_t step = 0;
  int64_t steps_taken = 0;  // training steps run, all epochs
  // Steps of the epoch under way whose times are in `times` already (read at a checkpoint), and
  // their milliseconds: a resumed epoch's time is the sum of its parts in both processes.
  int64_t timed = 0;
  double epoch_ms = 0;
  Rng shuffle_rng;
  // The epoch's order of the samples, where batches are gathered on the device (else empty).
  std::vector<int32_t> order;
  std::vector<EpochRecord> epochs;  // the completed epochs' (thinned past kMaxEpochRecords)
  double train_seconds = 0;         // the completed epochs' seconds, summed in order
  int64_t diverged_epoch = 0;       // first epoch whose loss was not finite (0: none)
  bool in_epoch = false;  // begin_epoch ran (the order is drawn) and finish_epoch has not yet
  // The loss checks within the epoch (see trainer.cpp): the loss sum and step at the last check,
  // and the last finite loss seen (the mean batch loss since the check before) with its place.
  double checked_loss_sum = 0;
  int64_t checked_step = 0;
  double last_finite_loss = std::numeric_limits<double>::quiet_NaN();
  int64_t last_finite_epoch = 0, last_finite_step = 0;  // 1-based; 0: none yet
  StepTimes times;
  // Why the run from here is not bit-identical to one never stopped (a checkpoint resumed in
  // another number of batch shards or ranks: the gradients summed in another order); empty: it is.
  // Carried by every later checkpoint.
  std::string resumed_differently;
  // The rules between epochs (train/epoch_rules.h). schedule.lr is the rate of the epoch under way,
  // with a schedule or without one.
  ScheduleState schedule;
  EarlyStoppingState early_stopping;
  // early_stopping.restore_best: the parameters and buffers (the model's flat buffers) of the best
  // epoch so far, sized before the first step.
  std::vector<float> best_params, best_buffers;
};

}  // namespace xo

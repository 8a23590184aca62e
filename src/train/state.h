// The training state between two steps: with the model's parameters and buffers, the optimizer's
// state and the device's counters, what saving and restoring a run in progress needs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "train/trainer.h"

namespace xo {

// Timings of the full-batch steps so far, in milliseconds: the whole step, and its phases when the
// step is not recorded (a recorded step runs as one unit). The warm-up step is still included.
struct StepTimes {
  std::vector<double> step, data, forward_backward, optimizer;
};

struct TrainState {
  // The shuffle draws from its own stream, apart from the initialisation's.
  static constexpr uint64_t kShuffleStream = 0x5eed5eed5eedULL;
  explicit TrainState(uint64_t seed) : shuffle_rng(seed ^ kShuffleStream) {}

  int64_t epoch = 0;  // epochs completed
  // Steps completed in the epoch under way; where batches are gathered, the device's batch
  // position is step * batch.
  int64_t step = 0;
  int64_t steps_taken = 0;  // training steps run, all epochs
  Rng shuffle_rng;
  // The epoch's order of the samples, where batches are gathered on the device (else empty).
  std::vector<int32_t> order;
  std::vector<EpochRecord> epochs;  // the completed epochs
  int64_t diverged_epoch = 0;       // first epoch whose loss was not finite (0: none)
  StepTimes times;
};

}  // namespace xo

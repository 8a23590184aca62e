// Fused trials (model/fused_network.h): the trials of a search that share an architecture, data and
// batch size trained in lockstep as one model, each with its own initial weights, optimizer and
// settings, learning-rate schedule, early stopping, shuffling and dropout, and each ending with the
// result it gets alone (to f32 rounding: docs/benchmarks.md has the measured bound). A trial whose
// loss stops being finite, that stops early or ends its epochs leaves the group alone; the others
// go on.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/source.h"
#include "model/fused_network.h"
#include "model/model.h"
#include "train/trainer.h"

namespace xo {

struct FusedTrial {
  Model* model = nullptr;  // initialised as its spec says
  TrainSpec train;         // its training settings (batch, epochs, optimizer, schedule, ...)
  EpochCallback on_epoch;  // after each of its epochs (may be empty)
  // Its checkpoints (none unless checkpoint.dir is set), and resuming from them. The group saves
  // every trial's at the same step (when the first trial's interval says), so that a resumed group
  // starts in lockstep; trials resumed at different steps cannot train as one group.
  CheckpointOptions checkpoint;
  // Its data where it is not the group's (a generated data set drawn from its own seed): the same
  // numbers of samples and features. Null: the group's.
  const DataSplit* data = nullptr;
};

struct FusedOptions {
  int groups = 0;           // trials run concurrently in this many groups (0: one per worker)
  bool stop_on_nan = true;  // a trial whose loss is not finite stops (the others go on)
  // Stop each trial after this many epochs of its train.epochs (0: none): a rung of successive
  // halving.
  int64_t pause_after_epochs = 0;
  // Stop after this many steps in all (0: no limit), as ExecutionOptions::max_steps: to time the
  // group. A partial epoch is not reported as an epoch.
  int64_t max_steps = 0;
  // How the trials step (model/fused_network.h); unset: as fused_stepping says for the model and
  // device.
  std::optional<FusedStepping> stepping;
  // The data's fingerprints (the trials' checkpoints take them), shared with a caller that takes
  // them too (measure_fused's records); null: the group's own.
  DataFingerprints* fingerprints = nullptr;
};

// Why `trials` cannot train as one group (empty: they can): another architecture, batch size or
// loss, or a device without fused kernels. Names the first trial that differs by its index.
std::string fusion_refusal(const std::vector<FusedTrial>& trials, const DataSplit& split);

// Trains the trials on `split` (or each on its own FusedTrial::data) as one fused group; results in
// their order, each as train_model gives it, with `shards` 1 and the group's step times (a step
// trains every trial). Trials that step apart (model/fused_network.h, fused_stepping) each train in
// the batch shards they take alone, and a group's step time is the busiest worker's share of its
// trials' (its forward and backward phase not timed apart). Trials resumed at different steps
// (one's newest checkpoint damaged) step as they would have: the ones behind catch up, the others
// waiting, then all go on as one. Throws UserError where fusion_refusal says why not.
std::vector<TrainResult> train_fused(std::vector<FusedTrial>& trials, const DataSplit& split,
                                     const FusedOptions& options = {});

}  // namespace xo

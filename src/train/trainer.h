// The epoch loop: batches in order (or shuffled with the seed), forward, loss, backward, optimizer,
// with every step timed around the real work and the loss read back once per epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/dataset.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/stats.h"

namespace xo {

class DataParallel;

struct EpochRecord {
  int64_t epoch = 0;       // 1-based
  double loss = 0;         // mean over the epoch's samples of the training loss
  double train_error = 0;  // percent of the epoch's samples misclassified while training
  double seconds = 0;      // wall time of the epoch's steps
  // On the test set after the epoch (no dropout, no gradient); NaN when there is no test set.
  double test_loss = 0;      // mean over the test samples
  double test_accuracy = 0;  // percent
  // The same on the validation set (held out of the training data); NaN without one.
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double val_accuracy = std::numeric_limits<double>::quiet_NaN();  // percent
  double lr = 0;  // the learning rate the epoch trained with
};

struct TrainResult {
  std::string model;
  std::string origin;
  std::string data;  // the data set's description
  int64_t params = 0;
  DeviceInfo device;
  int64_t batch = 0;
  int64_t samples = 0;
  int64_t steps_per_epoch = 0;
  int shards = 1;  // batch shards per full-batch step
  // Trials trained at once in its fused group (train/trials.h; 1: alone): then its step times and
  // epoch seconds are the group's, each step training every trial of the group, and its
  // optimizer's time is inside forward_backward_ms (optimizer_ms NaN).
  int fused_trials = 1;
  // The completed epochs' records in order; past kMaxEpochRecords (train/state.h) evenly fewer
  // (epochs_completed, below, is their number).
  std::vector<EpochRecord> epochs;
  double final_loss = 0;
  double final_train_error = 0;
  // The training error of always predicting the most frequent class (percent of the training
  // samples not in it): a final_train_error no better than this is a model that learned nothing.
  double majority_class_error = std::numeric_limits<double>::quiet_NaN();
  int64_t test_samples = 0;        // 0: no test set
  int64_t validation_samples = 0;  // 0: no validation set
  double final_val_loss = std::numeric_limits<double>::quiet_NaN();
  double final_val_accuracy = std::numeric_limits<double>::quiet_NaN();   // percent
  double final_test_loss = std::numeric_limits<double>::quiet_NaN();      // no test set: NaN
  double final_test_accuracy = std::numeric_limits<double>::quiet_NaN();  // percent
  TimingStats step_ms;        // per training step, the first (warm-up) step excluded
  double flops_per_step = 0;  // matmul FLOPs of a full-batch step
  double gflops = 0;          // flops_per_step / median step time
  double samples_per_second = 0;
  double train_seconds = 0;  // all epochs, every step included
  double setup_seconds = 0;  // building the plan and copying the data to the device
  // Medians per step of the loop's phases: batch selection (data), forward + loss + backward, and
  // the optimizer; the warm-up step excluded.
  double data_ms = 0, forward_backward_ms = 0, optimizer_ms = 0;
  // Data-parallel training: the ranks of the job (1: one process), the median time per step the
  // gradient sum took beyond backward (what overlapping with backward did not hide), and the
  // gradient bytes each rank sums per step.
  int ranks = 1;
  double communicate_ms = 0;
  int64_t reduced_bytes = 0;
  // How the ranks summed (train/data_parallel.h): "shared", "after-backward", "overlap",
  // "host-staged" or "nccl"; empty for a run outside an MPI job (then no data_parallel record).
  std::string reduce_mode;
  // The machines the ranks were on and the most ranks on one; the gradient buckets summed each
  // step (bytes, in the order they are summed).
  int hosts = 1, ranks_per_host = 1;
  std::vector<int64_t> reduce_buckets;
  // The scale-out model's all-reduce per step (advisor/scale_out.h, a ring over the link measured
  // between this job's ranks once training ended: its latency, and its rate at the largest
  // bucket), plus host-staged the copies to the host and back (staging_ms), to check against
  // communicate_ms; NaN where the communicate phase is not the all-reduce alone or staged through
  // the host (shared, overlap, nccl) or the link was not measured.
  double predicted_communicate_ms = std::numeric_limits<double>::quiet_NaN();
  double link_latency_us = std::numeric_limits<double>::quiet_NaN();
  double link_gbs = std::numeric_limits<double>::quiet_NaN();
  // Host-staged: the gradients' copy to page-locked host memory and back, measured after
  // training on the rank's device (part of predicted_communicate_ms); NaN otherwise.
  double staging_ms = std::numeric_limits<double>::quiet_NaN();
  int64_t steps_taken = 0;  // training steps run (all epochs)
  // The full-batch step ran as one recorded unit (a CUDA Graph): then the phases are not timed
  // apart (data_ms, forward_backward_ms and optimizer_ms are NaN).
  bool recorded_step = false;
  // With ExecutionOptions::node_time_steps: each node's forward and backward time (medians over the
  // timed steps, run unsharded and synchronised per node; 0 for views) and the loss's.
  int64_t node_timed_steps = 0;
  std::vector<double> node_forward_ms, node_backward_ms;
  double loss_ms = 0;
  bool interrupted = false;  // stopped early by Ctrl-C: epochs holds what completed
  // Ended by a step limit (ExecutionOptions::max_steps, FusedOptions::max_steps) before its
  // epochs: a measurement of the step, not a training to judge (not in results.json).
  bool step_limited = false;
  // [train.early_stopping]: the figure watched (empty: no early stopping) with the rule's
  // patience and min_delta; whether the rule stopped training before train.epochs, the best epoch
  // (1-based; 0: none improved) and its figure, and whether its parameters were put back at the
  // end (final_loss and the other final figures stay the last epoch's).
  std::string early_stopping_monitor;
  int64_t early_stopping_patience = 0;
  double early_stopping_min_delta = 0;
  bool stopped_early = false;
  int64_t best_epoch = 0;
  double best_value = std::numeric_limits<double>::quiet_NaN();
  bool restored_best = false;
  int64_t diverged_epoch = 0;  // first epoch whose loss was not finite (0: none)
  // Training stopped because the loss became NaN or infinite (ExecutionOptions::stop_on_nan):
  // between steps diverged_from and diverged_step (1-based, of epoch diverged_epoch; equal where
  // every step is checked, as on the CPU), after the last finite loss (the mean batch loss since
  // the check before it) at step last_finite_step of epoch last_finite_epoch (0: none).
  bool stopped_diverged = false;
  int64_t diverged_from = 0, diverged_step = 0;
  double last_finite_loss = std::numeric_limits<double>::quiet_NaN();
  int64_t last_finite_epoch = 0, last_finite_step = 0;
  // Checkpoints: the steps taken the run resumed at (0: it started afresh), how many were
  // written, and the time the step loop spent copying them to the host.
  int64_t resumed_at_step = 0;
  // Why the run is not bit-identical to one never stopped: it resumed a checkpoint in another
  // number of batch shards or ranks (TrainState::resumed_differently); empty: it is, or it never
  // resumed.
  std::string resumed_differently;
  // Paused at ExecutionOptions::pause_after_epochs, before train.epochs: a checkpoint of this
  // point lets the same run go on (successive halving gives a trial more epochs this way).
  bool paused = false;
  int64_t checkpoints_written = 0;
  double checkpoint_wait_ms = 0;
};

// The epochs a run completed: its last record's number. A long run's records thin out (every
// epoch up to kMaxEpochRecords, train/state.h; then evenly fewer), so their count is not it.
inline int64_t epochs_completed(const TrainResult& r) {
  return r.epochs.empty() ? 0 : r.epochs.back().epoch;
}

using EpochCallback = std::function<void(const EpochRecord&, int64_t total_epochs)>;

// How to execute, as opposed to what to train (the spec).
struct ExecutionOptions {
  int shards = 0;  // batch shards per step; 0 = as the backend prefers (Backend::batch_shards)
  // Every training kernel on one thread (NetworkOptions::one_thread): a fused trial stepping side
  // by side with others, each on a worker of its own.
  bool one_thread = false;
  // After training, this many extra steps (plus 2 warm-ups) time every node apart; the optimizer
  // is not applied in them, so the trained parameters are those of the epochs alone. 0: none.
  int node_time_steps = 0;
  // Stop after this many training steps in all (0: no limit): a sweep that measures step times
  // need not train to the end. The result says how many epochs completed.
  int64_t max_steps = 0;
  // Record the full-batch training step once (batch selection, forward, loss, backward, optimizer)
  // and launch it whole, where the backend can (a CUDA Graph); false runs every call as it is made.
  bool record_step = true;
  // Checkpoints of the run in progress (none unless checkpoint.dir is set), and resuming from them.
  CheckpointOptions checkpoint;
  // Stop after this many epochs of train.epochs (0: no pause), saving a checkpoint there where
  // checkpoints are on. Nothing else changes: the schedule, the shuffle and the arithmetic are
  // those of train.epochs, so a resumed run ends bit-identical to one never paused.
  int64_t pause_after_epochs = 0;
  // Stop when the loss becomes NaN or infinite, keeping the last checkpoint (else train on).
  bool stop_on_nan = true;
  // Data-parallel training across the ranks of an MPI job (train/data_parallel.h): this rank
  // trains its slice of every batch, the gradients are summed across the ranks, and every rank
  // takes the same step. Only rank 0 writes checkpoints. Null: this process alone.
  DataParallel* data_parallel = nullptr;
};

// Trains `model` (already initialised) on `data.train` as `train` says, evaluating `data.test`
// (when it has samples) after every epoch. Stops early, with result.interrupted set, when
// stop_requested() turns true (saving a checkpoint where checkpoints are on), and with
// result.stopped_diverged when the loss stops being finite, and with result.stopped_early when
// train.early_stopping says so; the rate follows train.schedule (on every device). With
// exec.checkpoint.resume, starts from the newest checkpoint of the run in exec.checkpoint.dir and
// ends bit-identical to a run never stopped.
TrainResult train_model(Model& model, const DataSplit& data, const TrainSpec& train,
                        const EpochCallback& on_epoch = {}, const ExecutionOptions& exec = {});
// Without a test set.
TrainResult train_model(Model& model, const Dataset& data, const TrainSpec& train,
                        const EpochCallback& on_epoch = {}, const ExecutionOptions& exec = {});

// The percent of `labels` outside the most frequent class (NaN without labels).
double majority_class_error(std::span<const int32_t> labels);
// A warning when a result's training error is no better than majority_class_error (within half a
// percentage point): the model predicts one class, or learned nothing else; empty otherwise, and
// for a run a step limit cut short (a measurement: it had no time to learn).
std::string stuck_warning(const TrainResult& r);

}  // namespace xo

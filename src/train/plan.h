// Planning a training run: everything the step loop touches (the data on the device, the
// Networks, the optimizer, the batch-selection buffers, the step clock, the test evaluator),
// allocated and uploaded before the first step, so that a step allocates nothing and can be
// recorded as one unit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "data/dataset.h"
#include "model/model.h"
#include "train/data_parallel.h"
#include "train/trainer.h"

namespace xo {

// Throws UserError, naming what is wrong, unless the data sets fit the model and the batch size
// and epoch count are positive.
void check_training(const Model& model, const DataSplit& split, const TrainSpec& train);

// The batch of the Evaluator's inference Network for `samples` test samples.
int64_t evaluation_batch(const Model& model, int64_t samples);

// Mean loss and accuracy of the model on a data set, in batches (no dropout, no gradient): the
// inference Networks and the data on the device are planned when it is built.
struct Evaluation {
  double loss = 0, accuracy = 0;  // accuracy in percent
  bool complete = true;           // false: a stop request cut it short (loss and accuracy are NaN)
};
// In data-parallel training each rank evaluates its slice of the data set (`data`) and the sums
// are added across the ranks (`data_parallel`), so every rank gets the whole set's figures.
class Evaluator {
 public:
  // `data_of`: another model's evaluator of the same data set, whose copy on the device this one
  // reads too (the trials of a fused group).
  Evaluator(const Model& model, const Dataset& data, const DataParallel* data_parallel = nullptr,
            const Evaluator* data_of = nullptr);
  Evaluation run();

 private:
  const Model& model_;
  const Dataset& data_;
  const DataParallel* data_parallel_;
  int64_t batch_ = 0;
  DeviceBuffer x_, y_, stats_;
  std::optional<Network> full_, partial_;
};

// Where a step's batch is: rows [first, first + batch) of the data set, in place, or (gather) the
// next rows of the epoch's order, gathered on the device by Backend::next_batch.
struct BatchAt {
  bool gather = false;
  int64_t first = 0;
};
// A batch in device memory: src [batch, features], labels [batch].
struct Batch {
  const float* src = nullptr;
  const int32_t* labels = nullptr;
};

// The five timestamps of step `s` of an epoch in the plan's QueueClock. They are taken in the
// device's queue and read at the end of the epoch, so the host waits only there.
class StepMarks {
 public:
  // Reduced: the gradients summed across ranks (data-parallel training; else at GradientsReady).
  enum Mark { Start, BatchSelected, GradientsReady, Reduced, End };
  static constexpr int kPerStep = End + 1;
  StepMarks() = default;  // no clock: inside a recorded step, which is timed as a whole
  StepMarks(QueueClock* clock, int64_t s) : clock_(clock), first_(static_cast<int>(kPerStep * s)) {}
  void stamp(Mark m) const {
    if (clock_) clock_->mark(at(m));
  }
  int at(Mark m) const { return first_ + m; }

 private:
  QueueClock* clock_ = nullptr;
  int first_ = 0;
};

// A plan for one trial of a fused group (train/trials.h): the data sets on the device shared with
// the group's first plan, and no Networks of its own (the group's FusedNetwork trains it; batches
// are always gathered, by each trial from its own order).
struct PlanSharing {
  const TrainPlan* data_of = nullptr;
  bool networks = true;
};

// Everything one training run touches, planned once. A plain struct, as llm.c's model and data
// loader: the step and the epoch bookkeeping read and use its members directly.
struct TrainPlan {
  TrainPlan(Model& model, const DataSplit& split, const TrainSpec& train,
            const ExecutionOptions& exec, const PlanSharing& sharing = {});
  // A recorded step holds pointers into the plan.
  TrainPlan(const TrainPlan&) = delete;
  TrainPlan& operator=(const TrainPlan&) = delete;

  // What step `s` of an epoch trains: its batch's rows (all ranks'), this rank's slice of them
  // and the Network for the slice (null: this rank has no rows of the epoch's partial batch).
  struct StepSlice {
    Network* net = nullptr;
    int64_t rows = 0;
    RankSlice slice;
  };
  StepSlice slice(int64_t s) {
    if (s < full_steps) return {full ? &*full : nullptr, batch, full_slice};
    return {partial ? &*partial : nullptr, samples - full_steps * batch, tail_slice};
  }
  BatchAt batch_at(int64_t s) const { return {gather, s * batch}; }
  bool launches_recording(int64_t s) const { return recorded && s < full_steps; }
  // This rank's rows of the batch `at` names; gathering it is a device call, part of the step.
  Batch select_batch(const StepSlice& w, BatchAt at);
  // The epoch's loss sums (of every rank, in data-parallel training), read to the host.
  void read_stats(LossStats host[2]);
  // Whether to stop now (Ctrl-C, SIGTERM): on every rank the same answer.
  bool stop_requested_everywhere() const;

  Model& model;
  Backend& backend;
  const DataSplit& split;
  int64_t samples = 0, features = 0, batch = 0;
  int64_t full_steps = 0, steps_per_epoch = 0;  // per epoch: full batches, and all batches
  // Data-parallel training across MPI ranks (null: this process alone), and this rank's slices of
  // a full batch and of the partial batch (the whole batches without ranks).
  DataParallel* data_parallel = nullptr;
  RankSlice full_slice, tail_slice;
  // The batch shards of a full batch's step (1 in a fused group).
  int shards() const { return full ? full->shards() : 1; }
  // (Re)builds the full and partial batches' Networks: in `shards` batch shards (0: as the backend
  // prefers), each kernel on one thread where asked (ExecutionOptions::one_thread). A fused trial
  // stepping side by side is built so, and again with every thread while it steps alone.
  void plan_networks(int shards, bool on_one_thread);
  bool one_thread = false;  // the Networks' kernels each run on one thread

  DeviceBuffer x, y;               // the training set
  std::optional<Network> full;     // a full batch (none in a fused group)
  std::optional<Network> partial;  // the last, partial batch of an epoch (if this rank has rows)
  std::unique_ptr<OptimizerKernel> optimizer;
  // This rank's slices of the test and validation sets (evaluated in shards, the sums reduced).
  Dataset test_part, validation_part;
  std::optional<Evaluator> evaluator;  // when there is a test set
  std::optional<Evaluator> validator;  // when there is a validation set
  // The epoch's loss sums, two of them: stats[0] for its full batches, stats[1] for its partial
  // batch. Each adds batch means, and the epoch's mean loss per sample weights them by their
  // batch sizes (epoch_mean_loss), which one sum of batch means of unequal sizes could not.
  DeviceBuffer stats_buffer;
  LossStats* stats = nullptr;
  LossStats* stats_for(int64_t s) { return s < full_steps ? stats : stats + 1; }
  // Batches are gathered on the device when shuffled, and when the step is recorded: a recorded
  // step must find its batch without the host. The epoch's order, the batch, the position.
  DeviceBuffer order, batch_x, batch_y, position;
  bool gather = false;
  // StepMarks::kPerStep per step of an epoch (none for a fused trial: its group's times it)
  std::unique_ptr<QueueClock> clock;
  std::unique_ptr<RecordedWork> recorded;  // the full-batch step, where the backend records
  // The full-batch step is launched as part of a recording the plan does not own (a fused group's,
  // train/trials.h): its phases are not timed either.
  bool recorded_in_group = false;
  bool step_recorded() const { return recorded != nullptr || recorded_in_group; }
};

// Device memory holding `values`: a copy of them, or, where they are borrowed (`owner` keeps them
// alive: data/arrays.h) and the backend reads host memory in place (Backend::borrow_host), the
// values themselves.
template <typename T>
DeviceBuffer to_device(Backend& backend, std::span<const T> values,
                       const std::shared_ptr<const void>& owner = nullptr) {
  if (owner) {
    if (DeviceBuffer in_place = backend.borrow_host(values.data(), values.size_bytes(), owner))
      return in_place;
  }
  DeviceBuffer buffer = backend.allocate(values.size_bytes());
  backend.upload(buffer.as<T>(), values.data(), buffer.bytes());
  return buffer;
}
template <typename T>
DeviceBuffer to_device(Backend& backend, const std::vector<T>& values) {
  return to_device(backend, std::span<const T>(values));
}

}  // namespace xo

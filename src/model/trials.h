// Fused trials: several models of one architecture (a hyper-parameter search's trials) trained in
// lockstep as one model. Each trial keeps its own Model (its parameters, seed, dropout rates,
// running statistics), and the models' flat buffers lie one after another at a fixed stride in
// one allocation, so that each Linear of all of them is one batched matmul over a trial
// dimension (and each LSTM one kernel whose per-step products are batched so, where the backend
// has one: Backend::lstm_fuses_trials); every other node runs trial by trial on its slice of the
// trials' activations, and each trial has its own loss. The trials are split into groups that run
// concurrently, one per worker of the backend (Backend::parallel_shards), as a Network's batch
// shards are.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"

namespace xo {

// Why two models cannot train as one (empty: they can): they must have the same nodes with the
// same shapes and the same loss. Their parameters, seeds and dropout rates may differ.
std::string trials_differ(const Model& a, const Model& b);

// How a fused group's trials step (train/trials.h).
enum class TrialStepping {
  // As one TrialNetwork: each Linear (and on a CPU each LSTM) one kernel over the trials, the
  // trials split over the workers, each trial's whole batch on one. A GPU's groups, and a CPU's
  // where neither of the others applies.
  Together,
  // Each trial its own Network, its batch split over the workers as when it trains alone, one
  // trial after another (in rounds of steps). On a CPU where convolutions do most of a step's
  // work: their memory-bound passes (reorders, pooling) slow down once a trial's whole batch runs
  // on one core, its tensors past the core's cache: together, a group of them trained fewer
  // trial-steps a second than one trial alone (docs/benchmarks.md, "The fused Linear's last
  // passes and convolutional groups"). And a CPU's group of one trial that would step together:
  // its trial alone, in the shards it takes alone (in a group's one shard it ran slower than
  // alone: "Trials side by side"); its checkpoints resume in a larger group and back, to f32
  // rounding (RunFingerprint::shards_may_differ).
  OneAfterAnother,
  // Each trial its own Network in one batch shard, the trials side by side on the workers (in
  // rounds of steps, each trial on one worker for a round). On a CPU for a model that trains
  // alone in one batch shard with every product on one thread, and whose kernels are crossover's
  // own loops (Linear, activations, dropout, embeddings): there a trial alone leaves the other
  // cores idle, and steps on a worker exactly as alone. Side by side, a group trains more
  // trial-steps a second than together (docs/benchmarks.md, "Trials side by side").
  SideBySide,
};
const char* trial_stepping_name(TrialStepping s);

// How `trials` trials of this model step on a device of `kind` whose workers and thread rules
// `policy` gives (Backend::execution_policy, or a profile's).
TrialStepping trial_stepping(const std::vector<Node>& nodes,
                             const std::vector<ParamTensor>& tensors, int64_t batch,
                             DeviceKind kind, const ExecutionPolicy& policy, int trials);

// Floats between trial t's flat buffers and trial t + 1's (pack_trials): a whole number of 64-byte
// lines.
int64_t trial_stride(int64_t flat_size);

// The models' parameters (and gradients) moved into one allocation, trial t's at t * stride
// floats (Model::swap_params, swap_grads; the values copied): what lets TrialNetwork batch them.
// The models must share one layout. Returns the allocation (the models keep views of it).
DeviceBuffer pack_trials(const std::vector<Model*>& models);

class TrialNetwork {
 public:
  // The training step of `trials` (trials_differ empty for each pair) on batches of `batch`
  // samples, the mean loss of each trial over its batch. Consecutive trials whose buffers lie at
  // one stride (pack_trials) share their Linear (and LSTM) kernels. groups: how many groups of
  // trials run concurrently (0: one per worker of the backend, at most one per trial).
  TrialNetwork(std::vector<const Model*> trials, int64_t batch, int groups = 0);

  int64_t batch() const { return batch_; }
  size_t trials() const { return trials_.size(); }
  int groups() const { return static_cast<int>(groups_.size()); }

  // src [trials, batch, input features] and labels [trials, batch], trial after trial, in device
  // memory. Overwrites each trial's gradients, adds its loss and accuracy to *stats[t] and
  // advances its step counter (dropout masks). On the worker of trial t's group, `begin(t)` runs
  // before the group's forward (it may fill trial t's rows of src and labels and set stats[t]: the
  // trials' batches are then gathered concurrently) and `done(t)` as soon as trial t's gradients
  // are complete (its optimizer's step: the trials' steps then run concurrently, as their forward
  // and backward do). `batched` (Backend::trials_step, for a network of one group): the trials'
  // losses are its one call, and their step counters are left to its update().
  void train_step(const float* src, const int32_t* labels, LossStats* const* stats,
                  FunctionRef<void(size_t trial)> begin, FunctionRef<void(size_t trial)> done,
                  TrialsStepKernel* batched = nullptr);

 private:
  // Trials [first, first + count) of a group with one layer (a batched Linear, or one trial's).
  struct Run {
    int first = 0, count = 1;  // within the group
    std::unique_ptr<Layer> layer;
  };
  struct Group {
    int first = 0, count = 0;                         // trials [first, first + count)
    std::vector<std::vector<Run>> nodes;              // per node; empty where the node is a view
    std::vector<float*> outputs, d_outputs;           // per node: [count, batch, out_size]
    std::vector<std::unique_ptr<LossKernel>> losses;  // per trial
  };
  // Node `node`'s layers in group `g`: runs of trials whose buffers lie one stride apart share
  // one layer where the node fuses trials (`groups`: how many groups the network has).
  std::vector<Run> node_runs(const Group& g, size_t node, int groups) const;
  void group_step(Group& g, const float* src, const int32_t* labels, LossStats* const* stats,
                  FunctionRef<void(size_t trial)> begin, FunctionRef<void(size_t trial)> done,
                  TrialsStepKernel* batched);

  std::vector<const Model*> trials_;
  int64_t batch_;
  std::vector<Group> groups_;
  std::vector<DeviceBuffer> memory_;
};

}  // namespace xo

// Fused models: several models of one architecture trained in lockstep as one (a search's trials,
// train/trials.h: "trial" is the search's word, "model" the engine's). Each keeps its own Model
// (its parameters, seed, dropout rates, running statistics), and the models' flat buffers lie one
// after another at a fixed stride in one allocation, so that each Linear of all of them is one
// batched matmul over a model dimension (and each LSTM one kernel whose per-step products are
// batched so, where the backend has one: Backend::lstm_fuses_models); every other node runs model
// by model on its slice of the models' activations, and each model has its own loss. The models are
// split into groups that run concurrently, one per worker of the backend
// (Backend::parallel_shards), as a Network's batch shards are.
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
std::string models_differ(const Model& a, const Model& b);

// How a fused group's models step (train/trials.h).
enum class FusedStepping {
  // As one FusedNetwork: each Linear (and on a CPU each LSTM) one kernel over the models, the
  // models split over the workers, each model's whole batch on one. A GPU's groups, and a CPU's
  // where neither of the others applies.
  Together,
  // Each model its own Network, its batch split over the workers as when it trains alone, one
  // model after another (in rounds of steps). On a CPU where convolutions do most of a step's
  // work: their memory-bound passes (reorders, pooling) slow down once a model's whole batch runs
  // on one core, its tensors past the core's cache: together, a group of them trained fewer
  // model-steps a second than one model alone (docs/benchmarks.md, "The fused Linear's last
  // passes and convolutional groups"). And a CPU's group of one model that would step together:
  // its model alone, in the shards it takes alone (in a group's one shard it ran slower than
  // alone: "Trials side by side"); its checkpoints resume in a larger group and back, to f32
  // rounding (RunFingerprint::shards_may_differ). And a CPU of one worker (one thread) for the
  // models of crossover's own loops (below) but the smallest: each model's products already run
  // on the core as alone, and together they only fill its caches K times over ("One worker's
  // groups").
  OneAfterAnother,
  // Each model its own Network in one batch shard, the models side by side on the workers (in
  // rounds of steps, each model on one worker for a round). On a CPU of two workers or more for a
  // model that trains alone in one batch shard with every product on one thread, and whose
  // kernels are crossover's own loops (Linear, activations, dropout, embeddings): there a model
  // alone leaves the other cores idle, and steps on a worker exactly as alone (docs/benchmarks.md,
  // "Trials side by side"). And for two models or more of any other kinds but convolutions,
  // pooling and batch normalisation, their kernels made for one thread: a model steps slower than
  // alone, the group faster than together ("A fused group at bf16 reads its trials' weight
  // copies"); a model left to step alone goes on with every thread.
  SideBySide,
};
const char* fused_stepping_name(FusedStepping s);

// How `models` models of this architecture step on a device of `kind` whose workers and thread
// rules `policy` gives (Backend::execution_policy, or a profile's).
FusedStepping fused_stepping(const std::vector<Node>& nodes,
                             const std::vector<ParamTensor>& tensors, int64_t batch,
                             DeviceKind kind, const ExecutionPolicy& policy, int models);
// Whether a model steps alone in one batch shard with every product one thread's work (below
// policy.single_thread_flops): side by side its step takes as long as alone.
bool steps_alone_on_one_thread(const std::vector<Node>& nodes,
                               const std::vector<ParamTensor>& tensors, int64_t batch,
                               const ExecutionPolicy& policy);

// Floats between model t's flat buffers and model t + 1's (pack_models): a whole number of 64-byte
// lines.
int64_t model_stride(int64_t flat_size);

// The models' parameters (and gradients) moved into one allocation, model t's at t * stride
// floats (Model::swap_params, swap_grads; the values copied): what lets FusedNetwork batch them.
// The models must share one layout. Returns the allocation (the models keep views of it).
DeviceBuffer pack_models(const std::vector<Model*>& models);

class FusedNetwork {
 public:
  // The training step of `models` (models_differ empty for each pair) on batches of `batch`
  // samples, the mean loss of each model over its batch. Consecutive models whose buffers lie at
  // one stride (pack_models) share their Linear (and LSTM) kernels. groups: how many groups of
  // models run concurrently (0: one per worker of the backend, at most one per model).
  FusedNetwork(std::vector<const Model*> models, int64_t batch, int groups = 0);

  int64_t batch() const { return batch_; }
  size_t models() const { return models_.size(); }
  int groups() const { return static_cast<int>(groups_.size()); }

  // src [models, batch, input features] and labels [models, batch], model after model, in device
  // memory. Overwrites each model's gradients, adds its loss and accuracy to *stats[t] and
  // advances its step counter (dropout masks). On the worker of model t's group, `begin(t)` runs
  // before the group's forward (it may fill model t's rows of src and labels and set stats[t]: the
  // models' batches are then gathered concurrently) and `done(t)` as soon as model t's gradients
  // are complete (its optimizer's step: the models' steps then run concurrently, as their forward
  // and backward do). `batched` (Backend::fused_step, for a network of one group): the models'
  // losses are its one call, and their step counters are left to its update().
  void train_step(const float* src, const int32_t* labels, LossStats* const* stats,
                  FunctionRef<void(size_t model)> begin, FunctionRef<void(size_t model)> done,
                  FusedStepKernel* batched = nullptr);

 private:
  // Models [first, first + count) of a group with one layer (a batched Linear, or one model's).
  struct Run {
    int first = 0, count = 1;  // within the group
    std::unique_ptr<Layer> layer;
  };
  struct Group {
    int first = 0, count = 0;                         // models [first, first + count)
    std::vector<std::vector<Run>> nodes;              // per node; empty where the node is a view
    std::vector<float*> outputs, d_outputs;           // per node: [count, batch, out_size]
    std::vector<std::unique_ptr<LossKernel>> losses;  // per model
  };
  // Node `node`'s layers in group `g`: runs of models whose buffers lie one stride apart share
  // one layer where the node fuses models (`groups`: how many groups the network has).
  std::vector<Run> node_runs(const Group& g, size_t node, int groups) const;
  void group_step(Group& g, const float* src, const int32_t* labels, LossStats* const* stats,
                  FunctionRef<void(size_t model)> begin, FunctionRef<void(size_t model)> done,
                  FusedStepKernel* batched);

  std::vector<const Model*> models_;
  int64_t batch_;
  std::vector<Group> groups_;
  std::vector<DeviceBuffer> memory_;
};

}  // namespace xo

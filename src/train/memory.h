// The memory a training run allocates on its device, worked out before anything is allocated, and
// the checks that it fits: a run too big for its device stops at once, saying how much it needs
// and how much is free, instead of failing (or meeting the OOM killer) halfway through planning.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "backend/backend.h"
#include "data/dataset.h"
#include "model/model.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

// Bytes a run allocates through its backend, by what they hold. The backends' own workspaces
// (oneDNN scratchpads, cuBLASLt and cuDNN workspaces, what kernels keep for backward: an LSTM's
// gates, max-pool positions, dropout masks) are not known before the kernels are built and come
// on top: the total is a lower bound.
struct MemoryEstimate {
  int64_t parameters = 0;   // the Model's: parameters, gradients, buffers, step counter
  int64_t optimizer = 0;    // its state: momentum, Adam's moments, ...
  int64_t activations = 0;  // the Networks' node outputs and gradients, shard gradients, loss sums
  int64_t data = 0;  // the training and test sets on the device, the epoch's order, the batch
  // Saturates at int64's maximum: the parts of a model far beyond any device may add up past it.
  int64_t total() const {
    int64_t sum = 0;
    for (int64_t part : {parameters, optimizer, activations, data}) {
      if (__builtin_add_overflow(sum, part, &sum)) return std::numeric_limits<int64_t>::max();
    }
    return sum;
  }
};

// Floats of optimizer state per parameter: SGD 1 with momentum (else 0), Adam and AdamW 2 (the
// moments), RMSprop 1, Adadelta 2.
int optimizer_state_per_parameter(const OptimizerSettings& optimizer);

// Whether the optimizer on `device` keeps a bf16 copy of the parameters (the CPU at bf16, 2 bytes
// a parameter, counted with its state).
bool keeps_bf16_weights(const DeviceInfo& device);

// What the Model for `layout` allocates when it is built, and the optimizer's state (and its bf16
// copy of the parameters, with bf16_weights).
MemoryEstimate model_memory(const ModelLayout& layout, const OptimizerSettings& optimizer,
                            bool bf16_weights = false);

// Everything train_model allocates through the model's backend for training on `data`: the Model's
// buffers, the optimizer's state, the training Network (per batch shard), the partial batch's,
// the evaluator's inference Networks, the node-timing Network (exec.node_time_steps), the data
// sets on the device and the batch gathering's buffers.
MemoryEstimate training_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                               const ExecutionOptions& exec);

// Before the Model for `spec` is built on `backend`: throws UserError naming the model, the
// device, what its parameters, gradients and optimizer state need and what is free, when they do
// not fit (its data and activations come later, with check_training_memory). Nothing is checked
// where the device does not say what is free.
void check_model_memory(const ModelSpec& spec, const Backend& backend);

// At the start of train_model, before the plan allocates anything: throws UserError naming the
// model, the device, the total with its breakdown and what is free, when training_memory does not
// fit beside what the Model already holds.
void check_training_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                           const ExecutionOptions& exec);

// What `trials` trials of `model`'s run trained as one fused group (train/trials.h) allocate: each
// trial's parameters, optimizer state and activations (its share of the group's step, its test
// evaluation) as training_memory counts them for the run alone, unsharded, and the data sets
// `data_sets` times (the trials that draw their own data).
MemoryEstimate fused_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                            int64_t trials, int64_t data_sets = 1);
// How many such trials fit in half of what the device has free now (the other half for what the
// estimate leaves out: the kernels' workspaces, blocked layouts), with the data once (at least 1;
// nullopt where the device does not say what is free).
std::optional<int64_t> fused_trials_that_fit(const Model& model, const DataSplit& data,
                                             const TrainSpec& train);
// Before a fused group allocates anything: throws UserError naming the trials, the device, the
// total with its breakdown, what is free and how many trials would fit, where the total is more
// than half of what is free.
void check_fused_memory(const Model& model, const DataSplit& data, const TrainSpec& train,
                        int64_t trials, int64_t data_sets);

}  // namespace xo

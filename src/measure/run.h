// Measuring one run: a spec trained on a device with the utilisation sampler running beside it,
// a per-node profile after training, the step's work and the peak memory — what every command
// that trains records of a (model, device): `train` and the measuring commands alike.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "measure/run_record.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

class Model;
struct DataSplit;

struct MeasureSettings {
  // How the trainer runs: profile steps, --steps, the recorded step, checkpoints, pause, NaN
  // stop, shards, and the data-parallel group this process is a rank of (null: the whole).
  ExecutionOptions exec;
  std::string init;  // initial weights from a safetensors file; empty: from the spec's seed
  // Initial weights in memory, over those of `init` or the seed (a model the Python module
  // fitted before: the next fit goes on from them); empty: none.
  std::vector<NamedTensor> init_weights;
  // The data in place of the spec's (the Python module's arrays, data/arrays.h); null: the
  // spec's [data].
  const DataSplit* data = nullptr;
  double sample_interval_s = 0.1;
};

// What a caller sees of a run as it goes: the model and its data once both are ready (before
// the first step), every epoch, and the model once trained (its weights, to save them).
struct RunHooks {
  std::function<void(const Model&, const DataSplit&)> ready;
  EpochCallback epoch;
  std::function<void(const Model&)> trained;
};

// Trains `spec` on `backend`. The record's axis is left empty for the caller. In a data-parallel
// group, the utilisation's other load leaves out the group's other ranks on this machine: they
// are this run.
RunRecord measure_run(Backend& backend, const ModelSpec& spec, const MeasureSettings& settings,
                      const RunHooks& hooks = {});

// One trial of a fused group (train/trials.h): its spec, its checkpoints, what the caller sees.
struct FusedRun {
  ModelSpec spec;
  CheckpointOptions checkpoint;
  RunHooks hooks;  // `ready` and `trained` per trial; `epoch` after each of its epochs
};
// Trains `runs` as one fused group on `backend` (train_fused: the same architecture, data and
// batch; their data loaded once), the sampler beside the group: a record per trial, each with the
// group's utilisation and step times. settings.exec's pause, NaN stop and step limit apply to
// every trial.
// Throws UserError saying why where the trials cannot train as one.
std::vector<RunRecord> measure_fused(Backend& backend, std::vector<FusedRun>& runs,
                                     const MeasureSettings& settings);

}  // namespace xo

// `crossover train SPEC_OR_NAME`'s job: one model trained (under an MPI launcher, one model across
// the ranks), its weights and result written where asked, its checkpoints kept or removed. What
// it says goes to the hooks: the header and the summary as results, each epoch, the notes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "job/options.h"
#include "job/run_notes.h"
#include "measure/run_record.h"
#include "train/trainer.h"

namespace xo::mpi {
class World;
}

namespace xo {

class JobHooks;

// What `train` is asked, as values (the CLI's flags, the Python module's arguments).
struct TrainJob {
  std::string spec;  // a built-in name, a TOML spec or an ONNX model
  std::string device = "cpu";
  std::optional<int64_t> epochs, batch;
  std::string optimizer;  // a torch.optim name: its defaults in place of the spec's optimizer
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  int threads = 0;
  int shards = 0;
  DataFlags data;
  std::string save, json;  // the trained weights (safetensors) and the result (JSON); empty: none
  bool quiet = false;      // no header and no epochs told: the summary alone
  std::string precision = "f32";
  bool record_step = true;
  int64_t pause_after = 0;
  int64_t max_steps = 0;
  CheckpointFlags checkpoint;
  std::string reduce = "auto";
  // The Python module's: the model itself in place of `spec`'s name, its data in memory in place
  // of the spec's (data/arrays.h), the weights to start from (empty: the spec's init or seed),
  // and the trained weights kept in TrainOutcome::weights.
  std::optional<ModelSpec> model;
  const DataSplit* arrays = nullptr;
  std::vector<NamedTensor> weights;
  bool keep_weights = false;
};

struct TrainOutcome {
  RunRecord run;
  bool lead = true;                  // this process reported the run (no launcher, or rank 0)
  ModelSpec spec;                    // what trained: the spec with the job's overrides
  std::vector<NamedTensor> weights;  // the trained weights, with TrainJob::keep_weights
  int exit_code() const { return xo::exit_code(run.result); }
};

// The run's result as `crossover train --json` writes it (crossover.train/2, with the machine).
nlohmann::json train_document(const RunRecord& run);

// One process (`world` null), or one rank of an MPI job training the model data-parallel: then
// rank 0 alone tells and writes (results, weights, checkpoints), and every rank trains its slice
// of each batch.
TrainOutcome train_job(const TrainJob& o, JobHooks& hooks, const mpi::World* world = nullptr);

}  // namespace xo

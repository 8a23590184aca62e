// `crossover train SPEC_OR_NAME`'s job: one model trained (under an MPI launcher, one model across
// the ranks), its weights and result written where asked, its checkpoints kept or removed. What
// it says goes to the hooks: the header and the summary as results, each epoch, the notes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
};

struct TrainOutcome {
  RunRecord run;
  bool lead = true;  // this process reported the run (no launcher, or rank 0)
  int exit_code() const { return xo::exit_code(run.result); }
};

// One process (`world` null), or one rank of an MPI job training the model data-parallel: then
// rank 0 alone tells and writes (results, weights, checkpoints), and every rank trains its slice
// of each batch.
TrainOutcome train_job(const TrainJob& o, JobHooks& hooks, const mpi::World* world = nullptr);

}  // namespace xo

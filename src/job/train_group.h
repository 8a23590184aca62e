// `crossover train-group DIR...`'s job: trial folders of a search (each with its spec.toml)
// trained as one fused group (train/trials.h), each writing what `crossover train` writes of a
// trial there: its result.json, weights.safetensors, log.txt and checkpoints/. `tune --fuse` starts
// it as a process; a Dask worker runs it in its own process (crossover.dask). What it says goes to
// the hooks: each trial's epochs and summary line as results, its checkpoints' notes as notes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xo {

class JobHooks;

// What `train-group` is asked, as values (the CLI's flags, the Python module's arguments).
struct TrainGroupJob {
  std::vector<std::string> dirs;  // the trial folders (OUT/trials/ID)
  std::string device = "cpu";
  int threads = 0;
  std::string precision = "f32";
  bool quiet = false;  // each trial's summary alone, no epoch lines
  int64_t pause_after = 0;
  std::string checkpoint_every = "60s";
  bool resume = false;
  std::string on_nan = "stop";
};

// Trains the group and writes each trial's files; the exit code (core/exit_codes.h): interrupted
// where any trial was. Throws UserError for folders that cannot hold a trial's files.
int train_group_job(const TrainGroupJob& o, JobHooks& hooks);

}  // namespace xo

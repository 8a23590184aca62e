// A hyper-parameter search (`crossover tune`), the engine under the command: the trials of the
// --vary space, each its own `crossover train` process (so that one trial's crash, divergence or
// memory cannot touch the others, and a trial on a GPU has its own context and stream), several at
// once per device as measured fastest, across MPI ranks where `mpirun` started the job; successive
// halving pauses and resumes trials through their checkpoints. The record is published after every
// trial that starts or ends, and the same search in the same --out goes on where a stopped one was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "model/spec.h"
#include "train/trainer.h"
#include "tune/record.h"

namespace xo::mpi {
class World;
}

namespace xo {

// The search as the command's flags give it.
struct SearchOptions {
  std::string spec;               // a built-in name, a spec file or an ONNX model
  std::vector<std::string> vary;  // KEY=V1,V2,... or KEY=A..B[:log] (tune/space.h)
  int64_t samples = 0;            // random draws; 0: the whole grid
  uint64_t seed = 0;
  std::string objective;  // empty: validation, else test accuracy, else the training loss
  bool halving = false;
  int64_t min_epochs = 1;
  int64_t factor = 3;
  std::optional<int64_t> epochs;
  int parallel = 0;  // trials at once per device; 0: measured
  int threads = 0;   // CPU threads per trial (0: the cores shared among the trials at once)
  std::vector<std::string> devices;  // empty: every device here
  std::string out = "crossover-tune";
  bool restart = false;
  int instances = 4;  // instances in parallel for the search's predicted cost elsewhere
  int probe_steps = 200;
  std::string checkpoint_every = "60s";
  std::string command_line;  // for --out's lock file
  AdviceOptions advice;
};

// What the search needs from the layers above it, which the command provides: its documents read
// and written (report/), the catalog it is priced on, and what it says while it runs.
class SearchIo {
 public:
  virtual ~SearchIo() = default;
  // The record of an earlier process of this search (its results.json), and a trial's result.
  virtual TuneRecord read_record(const std::filesystem::path& file) = 0;
  virtual TrainResult read_trial(const std::filesystem::path& file) = 0;
  // The record as it stands: results.json, results.csv and report.html.
  virtual void publish(const TuneRecord& record) = 0;
  // The catalog with the user's overrides (a UserError leaves the search unpriced, saying why).
  virtual Catalog catalog() = 0;
  // The spec searched, once resolved (its notes); a note on stderr.
  virtual void resolved(const ModelSpec& spec) = 0;
  virtual void note(const std::string& line) = 0;
  // The trials and where they run, once chosen; each measurement of trials at once; each halving
  // decision; each trial that ended (not one stopped to go on later).
  virtual void started(const TuneRecord& record) = 0;
  virtual void measuring(int k, const std::string& device) = 0;
  virtual void decided(const HalvingDecision& decision) = 0;
  virtual void ended(const TrialRecord& trial, const std::string& objective) = 0;
};

// The search's record when it ends, finished or interrupted (a stop request: every trial saved its
// checkpoint, and the same search goes on from there).
struct SearchOutcome {
  TuneRecord record;
  std::filesystem::path out;
};

// Runs the search in this process, or as rank 0 of an MPI job (`world`) whose other ranks run
// run_search_worker.
SearchOutcome run_search(const SearchOptions& o, SearchIo& io, const mpi::World* world);

// A rank other than 0: runs the trials rank 0 sends, one at a time, until told the search ended.
int run_search_worker(const mpi::World& world, const std::vector<std::string>& devices);

}  // namespace xo

// `crossover tune`'s engine: a hyper-parameter search over a spec. The trials are the --vary
// dimensions' grid or random samples (tune/space.h); each runs as its own `crossover train`
// process (tune/trial_process.h) on a slot, several at once per device as measured fastest
// (tune/parallel.h), or one per rank under MPI (tune/ranks.h); successive halving (tune/halving.h)
// pauses trials at a rung and promotes the best through their checkpoints. The record is published
// whenever trials start or end (once for those started, or seen ending, together), and the same
// options with the same --out go on where a stopped search was (tune/resume.h).
//
// Three parts, kept apart so that another way of running trials can replace one: the search
// decides what trials there are, which runs next and what a trial's end means (search.cpp,
// progress.cpp, trial_result.cpp); the runner starts, stops and waits for processes on slots
// (slots.cpp, ranks.cpp); the record (tune/record.h) is what both keep up to date.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "data/dataset.h"
#include "model/spec.h"
#include "train/trainer.h"
#include "tune/record.h"

namespace xo::mpi {
class World;
}

namespace xo {

class JobRunner;

inline constexpr int kFuseAuto = -1;
// The largest group --fuse auto makes; within it, and what memory holds, the size that trains the
// most samples per second here, measured before the first trial (measure_fuse_cap): on this
// machine the fused loop's throughput stops growing between 4 and 64 disc trials, and falls past
// 16 for disc-7 and disc-8 (bench/fused_trials.cpp; docs/benchmarks.md, "Many small trials as one
// model: fused trials").
inline constexpr int kMaxAutoFuse = 64;

// The flags of `crossover tune`, as values.
struct SearchOptions {
  std::string spec;               // a built-in model's name, a spec file or an ONNX model
  std::vector<std::string> vary;  // KEY=V1,V2,... or KEY=A..B[:log]
  int64_t samples = 0;            // random trials; 0: the whole grid
  uint64_t seed = 0;
  std::string objective;  // a metric name; empty: tune/trial_result.h's default
  bool halving = false;
  int64_t min_epochs = 1;
  int64_t factor = 3;
  std::optional<int64_t> epochs;  // overrides train.epochs: the most any trial trains
  int parallel = 0;               // trials at once per device (0: measured)
  // Trials of one architecture, data and batch size trained as one fused group (train/trials.h):
  // at most this many per group; kFuseAuto: on the CPU the group size measured fastest up to
  // kMaxAutoFuse, on a GPU as many as are ready up to kMaxAutoFuse and what its memory holds; 0:
  // each trial a process of its own.
  int fuse = kFuseAuto;
  int threads = 0;  // CPU threads per trial (0: the cores shared among the trials at once)
  std::vector<std::string> devices;  // empty: every device
  std::string precision = "f32";     // --precision of every trial
  std::string out = "crossover-tune";
  bool restart = false;  // discard a search already in `out`
  int instances = 4;     // instances in parallel for the search's predicted cost elsewhere
  int probe_steps = 200;
  std::string checkpoint_every = "60s";
  std::string command_line;  // written into `out`'s lock, for the message of a refused job
  // The data the spec's source holds, in memory already (the Python module's arrays, borrowed, its
  // validation split made): the search plans with it instead of loading the file again, which its
  // trials read (a 188 MB Fashion-MNIST file took 0.4 s to load here). Null: loaded.
  const DataSplit* data = nullptr;
};

// What the search needs from the layers above it, which src/tune/ may not include: the report
// layer's readers of the documents it reads back, the catalog its cost elsewhere is priced with,
// where its record goes, and its progress for the terminal. cli/tune_command.cpp implements it.
class SearchHooks {
 public:
  virtual ~SearchHooks() = default;

  // results.json of an earlier search in --out, and a trial's result.json; `origin` names the
  // file. Throw UserError naming the file and field.
  // The spec the search varies, as SearchOptions::spec names it (the CLI puts its --data,
  // --test-data and --init in place of the spec's own).
  virtual ModelSpec read_spec(const std::string& spec) { return resolve_spec(spec); }
  virtual TuneRecord read_record(const std::string& text, const std::string& origin) = 0;
  virtual TrainResult read_result(const std::string& text, const std::string& origin) = 0;
  // What the search's price needs: asked once, from the search's start, on a thread of their own
  // at the lowest priority; a UserError leaves the search unpriced, saying why.
  virtual Catalog catalog() = 0;
  virtual AdviceOptions advice() = 0;

  // Where the search's jobs run instead of this machine's slots or the MPI ranks (the Python
  // module's runner: a Dask cluster's workers, a slot each); null: here. Its slots' `rank` tells
  // them apart, `host` names them in the record. The search does not own it.
  virtual JobRunner* runner() { return nullptr; }

  // The record as it stands, after every change a stopped search must find again: the jobs
  // started together (the trials laid out with the first), those ended, and the search's end.
  virtual void publish(const TuneRecord& record) = 0;

  // Progress, in the order it happens.
  virtual void spec_read(const ModelSpec& base) = 0;  // before the flags are checked against it
  // --samples asked for more trials than the space holds.
  virtual void fewer_trials(size_t distinct, int64_t samples) = 0;
  // --fuse K or auto, and no two trials could train as one (each its own architecture, batch
  // size or data): every trial trains in a process of its own, as with --fuse off.
  virtual void nothing_fuses() = 0;
  // A stopped search in --out goes on: `kept` of its `trials` are not pending.
  virtual void resumed(size_t kept, size_t trials) = 0;
  virtual void measuring(int k, const std::string& device) = 0;  // K trials at once on `device`
  // --fuse auto: fused groups being timed on the CPU to choose their size (tune/parallel.h).
  virtual void measuring_groups(const std::string& device) = 0;
  // The trials and their slots are laid out; no trial has started.
  virtual void started(const TuneRecord& record) = 0;
  // Halving promoted a trial to a longer rung (the decisions of the end come with the record).
  virtual void promoted(const HalvingDecision& decision) = 0;
  // A trial's process ended, other than by a stop request; `record` is the search's.
  virtual void trial_ended(const TrialRecord& trial, const TuneRecord& record) = 0;
};

// Runs the search on this machine's devices, or from rank 0 across `world`'s ranks (null: no
// launcher; the other ranks run tune/ranks.h's run_trial_worker). Throws UserError on bad input
// before any trial starts. Returns the record as it ended; `interrupted` there: a stop request
// ended it, and the same options go on from --out.
TuneRecord run_search(const SearchOptions& o, SearchHooks& hooks, const mpi::World* world);

}  // namespace xo

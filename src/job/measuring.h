// The measuring jobs: `run` (the default job, a suite of models on every device), `sweep` (one
// model grown along an axis; along ranks under an MPI launcher), `advise` and `cost` (a model
// measured here, predicted and priced elsewhere). Each locks its output folder, continues an
// unfinished job found there, writes its report after every model (results.json, results.csv,
// report.html) and returns the report; what it says on the way goes to the caller's hooks.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/exit_codes.h"
#include "job/options.h"
#include "model/spec.h"
#include "report/document.h"

namespace xo::mpi {
class World;
}

namespace xo {

class JobHooks;

// What `run` and `sweep` are asked to measure.
struct MeasureJob {
  MeasureOptions measure;
  CostOptions cost;
  std::vector<std::string> models;  // run: these models (empty: the suite's)
  std::string suite = "disc";       // run: disc (disc-2 ... disc-12) or classic (and Keras's three)
  std::string spec = "disc-12";     // sweep: the model grown
  std::string vary;                 // sweep: AXIS=V1,V2,... (empty: the disc family's depth)
  std::string reduce = "auto";      // sweep along ranks: how the gradients are summed
  int trials = 0;                   // sweep: each point K trials fused (0: one run)
  // The Python module's: the model itself in place of `spec`'s name (its data in
  // measure.arrays).
  std::optional<ModelSpec> given;
};

// What `advise` and `cost` are asked.
struct AdviseJob {
  MeasureOptions measure = {.settings = {.max_steps = 100, .node_time_steps = 10}};
  CostOptions cost;
  std::string spec;    // a model to measure here, or (cost) a results.json measured earlier
  std::string model;   // cost of a results.json: which run (empty: the last)
  int trials = 0;      // advise: a sweep of K trials, fused (0: one run)
  bool advise = true;  // false: `cost` (the advice left out)
  // The Python module's: the model itself in place of `spec`'s name (its data in
  // measure.arrays).
  std::optional<ModelSpec> given;
};

// A measuring job's end: its report, the folder it was written to, and whether a stop request cut
// it short (the report then says it is partial).
struct JobOutcome {
  Report report;
  std::filesystem::path out;  // empty: nothing written (a results file costed again)
  bool stopped = false;
  int exit_code() const { return stopped ? kExitInterrupted : kExitOk; }
};

// The disc-2 ... disc-12 suite (or `models`) on every device present.
JobOutcome run_job(const MeasureJob& o, JobHooks& hooks);
// `spec` grown along `vary` on every device, in one process (a sweep along ranks: below).
JobOutcome sweep_job(const MeasureJob& o, JobHooks& hooks);
// `mpirun -np N crossover sweep SPEC --vary ranks=1,2,…,N`: `base` trained data-parallel on the
// job's first k ranks for each k, every rank of `world` calling it. Rank 0 measures, reports and
// writes and gets the outcome; the other ranks get nothing.
std::optional<JobOutcome> rank_sweep_job(const MeasureJob& o, const ModelSpec& base,
                                         const mpi::World& world, JobHooks& hooks);
// The sweep's rank counts (`--vary ranks=…`: a list, or a range A..B), each from 1 to the job's
// ranks; refused, naming the value, otherwise.
std::vector<int> rank_counts(const std::string& vary, int job_ranks);

// `advise` / `cost SPEC`: the spec measured on every device here, then predicted, costed and
// (advise) advised. Nothing where a stop came before any run finished. `cost RESULTS.json`: the
// run a report recorded costed again, nothing measured.
std::optional<JobOutcome> advise_job(const AdviseJob& o, JobHooks& hooks);

}  // namespace xo

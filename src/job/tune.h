// `crossover tune`'s job: the search (tune/search.h) with its record published in its out folder
// after every change (results.json, results.csv, report.html: report/files.h) and its progress
// told through JobHooks: the lines the command prints, as results and notes. The command line and
// the Python module (crossover.tune) start it.
#pragma once

#include <optional>

#include "job/hooks.h"
#include "job/options.h"
#include "model/spec.h"
#include "tune/search.h"

namespace xo {

struct TuneJob {
  SearchOptions search;
  bool quiet = false;  // tell only notes, not each trial's line
  CostOptions cost;
  DataFlags data;  // --data, --test-data, --init over the spec's own
  // The spec itself (the Python module's model, its data and weights in files), in place of the
  // one search.spec names; search.spec then only names it in messages.
  std::optional<ModelSpec> given;
  // The crossover command the trials' processes run (the Python module's, installed beside it);
  // empty: this process's own binary.
  std::string program;
  // Where the trials' jobs run (the Python module's Dask runner); null: this machine, or `world`.
  JobRunner* runner = nullptr;
};

// Runs the search on this machine's devices, or from rank 0 across `world`'s ranks (null: no
// launcher). Returns the record as it ended (`interrupted`: a stop request ended it, and the same
// job goes on from search.out). Throws UserError on bad input before any trial starts.
TuneRecord tune_job(const TuneJob& job, JobHooks& hooks, const mpi::World* world = nullptr);

}  // namespace xo

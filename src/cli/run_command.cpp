// `crossover run` and `crossover sweep`: models trained on every device present, printed as one
// table and written as a report folder (results.json, results.csv, report.html) after every
// model. `run` is the default job, the classic disc-2 ... disc-12 depth sweep (with --suite
// classic also Keras's mnist-mlp, mnist-cnn and imdb-lstm); `sweep` grows any spec along one
// axis (depth, width, batch or sequence length) and finds where one device overtakes another.
// The jobs are job/measuring.h's; this file reads their flags and prints what they return.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "core/error.h"
#include "distributed/mpi.h"
#include "job/measuring.h"
#include "job/run_notes.h"
#include "report/terminal.h"

namespace xo::cli {
namespace {

// The job's table and where its report is; its exit code.
int print_outcome(const JobOutcome& outcome) {
  fmt::print("{}", summary_text(outcome.report, outcome.out, outcome.stopped));
  return outcome.exit_code();
}

int run_models(MeasureJob o) {
  o.measure.command_line = recorded_command_line();
  TerminalHooks hooks;
  return print_outcome(run_job(o, hooks));
}

// A sweep along ranks runs under an MPI launcher, every rank in the job; any other sweep is one
// process. Nothing (go on as one process), or the exit code of the sweep along ranks.
std::optional<int> sweep_on_ranks(const MeasureJob& o) {
  if (o.vary.rfind("ranks=", 0) == 0) {
    if (!mpi::launched()) {
      throw UserError(fmt::format(
          "--vary {}: a sweep along ranks runs under an MPI launcher with the largest count, "
          "e.g. mpirun -np 2 crossover sweep {} --vary ranks=1,2",
          o.vary, o.spec));
    }
    const mpi::World world;
    try {
      const ModelSpec base = resolve_spec_with(o.spec, o.measure.data);
      TerminalHooks hooks;
      if (world.rank() == 0) tell_spec_notes(hooks, base);
      const std::optional<JobOutcome> swept = rank_sweep_job(o, base, world, hooks);
      return swept ? print_outcome(*swept) : kExitOk;  // rank 0 reports
    } catch (const std::exception& e) {
      end_job(world, e);
    }
  }
  if (mpi::launched() && mpi::launched_size() > 1) {
    // Every rank would sweep on its own, into the same files: rank 0 says so, all stop.
    if (mpi::launched_rank() != 0) return kExitBadInput;
    throw UserError(fmt::format(
        "`crossover sweep` was started on {} ranks of an MPI job: along ranks (--vary "
        "ranks=1,2,...) it measures scaling on them; any other sweep is one process: run it "
        "without mpirun",
        mpi::launched_size()));
  }
  return std::nullopt;
}

int run_sweep(MeasureJob o) {
  if (o.trials > 0 && o.vary.rfind("ranks=", 0) == 0) {
    throw UserError(
        fmt::format("--trials {} with --vary {}: fused trials train in one process, "
                    "not across ranks (sweep one or the other)",
                    o.trials, o.vary));
  }
  o.measure.command_line = recorded_command_line();
  if (const std::optional<int> ranks = sweep_on_ranks(o)) return *ranks;
  TerminalHooks hooks;
  return print_outcome(sweep_job(o, hooks));
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<MeasureJob>();
  CLI::App* sub = app.add_subcommand(
      "run", "The default job: the disc-2 ... disc-12 sweep on every device present");
  add_measure_options(sub, o->measure, false);
  add_cost_options(sub, o->cost);
  sub->add_option("--suite", o->suite,
                  "disc: disc-2 ... disc-12; classic: those and mnist-mlp, mnist-cnn, imdb-lstm")
      ->check(CLI::IsMember({"disc", "classic"}))
      ->capture_default_str();
  sub->add_option("--models", o->models, "Models to run (replaces the suite's)")->delimiter(',');
  return {sub, [o] { return run_models(*o); }};
}

Command add_sweep(CLI::App& app) {
  auto o = std::make_shared<MeasureJob>();
  CLI::App* sub = app.add_subcommand(
      "sweep", "Grow a model along one axis on every device and find the crossover");
  sub->add_option("spec", o->spec,
                  "A built-in name or a TOML spec (default: the disc family, along depth)")
      ->capture_default_str();
  sub->add_option("--vary", o->vary,
                  "AXIS=V1,V2,... or AXIS=A..B: depth, width, batch, sequence, or any numeric "
                  "key of the spec as `tune --vary` takes it (train.optimizer.lr, dropout.p, "
                  "model.layers.0.out), or ranks=1,2,...: under mpirun, the same training on "
                  "that many data-parallel ranks of the job");
  sub->add_option("--reduce", o->reduce,
                  "Along ranks, how the gradients are summed: shared, after-backward, overlap or "
                  "auto (as train's --reduce)")
      ->check(CLI::IsMember({"auto", "shared", "after-backward", "overlap"}))
      ->capture_default_str();
  sub->add_option("--trials", o->trials,
                  "Each point as K trials of its model (a hyper-parameter search) trained as one "
                  "fused group: the crossover and the verdict for K trials (advise --trials shows "
                  "the throughput against K)")
      ->check(CLI::Range(2, 4096));
  add_measure_options(sub, o->measure, true);
  add_cost_options(sub, o->cost);
  return {sub, [o] { return run_sweep(*o); }};
}

}  // namespace xo::cli

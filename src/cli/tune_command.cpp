// `crossover tune SPEC --vary KEY=...`: a hyper-parameter search. The flags become a TuneJob;
// job/tune.h runs the search (tune/search.h: each trial its own `crossover train` process, several
// at once per device, across MPI ranks, halving through checkpoints) and keeps results.json,
// results.csv and report.html up to date; this file shows its progress on the terminal and the
// final table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "distributed/mpi.h"
#include "job/tune.h"
#include "report/tune_text.h"
#include "tune/ranks.h"
#include "tune/search.h"

namespace xo::cli {
namespace {

namespace fs = std::filesystem;

// The search, then its table and where its report is.
int search_and_render(const TuneJob& o, const mpi::World* world) {
  TerminalHooks terminal;
  const TuneRecord r = tune_job(o, terminal, world);
  if (!o.quiet) fmt::print("\n{}", tune_table_text(r));
  fmt::print("results: {}\n", (fs::path(o.search.out) / "report.html").string());
  const fs::path best_spec = fs::path(o.search.out) / "best.toml";
  if (!r.best.empty() && fs::exists(best_spec)) {
    const fs::path weights = fs::path(o.search.out) / "best.safetensors";
    fmt::print("best: {}, its spec in {}{}\n", r.best, best_spec.string(),
               fs::exists(weights)
                   ? fmt::format(" and its trained weights in {} (`crossover train {}` trains on "
                                 "from them)",
                                 weights.string(), best_spec.string())
                   : std::string());
  }
  if (r.interrupted) {
    fmt::print(stderr,
               "crossover: tune interrupted; finished trials are kept in {} and the same command "
               "goes on from there\n",
               o.search.out);
    return 130;
  }
  return 0;
}

int run_tune(const TuneJob& o) {
  // A process no launcher started never touches MPI.
  if (!mpi::launched()) return search_and_render(o, nullptr);
  const mpi::World world;
  if (world.rank() != 0) return run_trial_worker(world, o.search.devices, o.search.threads);
  try {
    return search_and_render(o, &world);
  } catch (const std::exception& e) {
    end_job(world, e);  // every rank ends now, with rank 0's message
  }
}

// --fuse: off, auto, or a count of trials a group.
void add_fuse_option(CLI::App* sub, SearchOptions& o) {
  // off, auto, or a count of trials: checked here, so that the callback below only converts.
  const CLI::Validator fuse_values(
      [](std::string& v) -> std::string {
        if (v == "off" || v == "auto") return {};
        char* end = nullptr;
        const long k = std::strtol(v.c_str(), &end, 10);
        if (!v.empty() && *end == '\0' && k >= 1 && k <= 1024) return {};
        return "expected off, auto or a number of trials per group (1 to 1024), not '" + v + "'";
      },
      "off|auto|K");
  sub->add_option_function<std::string>(
         "--fuse",
         [&o](const std::string& v) {
           o.fuse = v == "off" ? 0 : v == "auto" ? kFuseAuto : std::stoi(v);
         },
         "Train trials of one architecture, data and batch size as one fused group (each still "
         "ending as it does alone, to f32 rounding): at most K per group, auto (on the CPU, the "
         "group size measured fastest up to 64, timed within a twentieth of the search's own time) "
         "or off (a process per trial); on a GPU auto takes as many as are ready, up to 64 and "
         "what its memory holds")
      ->check(fuse_values)
      ->default_str("auto");
}

void add_search_options(CLI::App* sub, SearchOptions& o) {
  sub->add_option("spec", o.spec, "Built-in model name, spec file, or ONNX model")->required();
  sub->add_option("--vary", o.vary,
                  "KEY=V1,V2,... or KEY=A..B[:log] (repeatable): lr, optimizer, epochs, seed, "
                  "depth, width, batch, sequence, any dotted spec key (train.optimizer.momentum, "
                  "model.layers.0.out, data.validation_split), or TYPE.KEY (dropout.p)")
      ->required();
  sub->add_option("--samples", o.samples,
                  "Draw this many random trials (ranges and lists) instead of the whole grid")
      ->check(positive_number());
  sub->add_option("--seed", o.seed, "Seed of the random draws")->capture_default_str();
  sub->add_option("--objective", o.objective,
                  "What ranks trials: val_accuracy, val_loss, test_accuracy, test_loss or loss "
                  "(default: validation, else test accuracy, else the training loss)");
  sub->add_flag("--halving", o.halving,
                "Successive halving (ASHA): weak trials stop early, strong ones get more epochs");
  sub->add_option("--min-epochs", o.min_epochs, "Halving: the epochs every trial gets first")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--factor", o.factor,
                  "Halving: the top 1/factor go on, with factor times the epochs")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  sub->add_option("--epochs", o.epochs, "Override train.epochs (the most any trial trains)")
      ->check(positive_number());
  sub->add_option("--parallel", o.parallel,
                  "Trials at once per device (default: measured, the fastest of 1, 2, 4, ..., "
                  "within a twentieth of the search's steps; the most at once where it is "
                  "shorter)")
      ->check(positive_number());
  add_fuse_option(sub, o);
  add_threads_option(sub, o.threads, /*per_trial=*/true);
  add_precision_option(sub, o.precision);
  sub->add_option("--device", o.devices,
                  "Devices to run trials on (repeatable: cpu, cuda:N; default: every device)");
  sub->add_option("--out", o.out, "Results folder (the same one goes on a stopped search)")
      ->capture_default_str();
  sub->add_flag("--restart", o.restart, "Discard a search already in --out and start afresh");
  sub->add_option("--instances", o.instances,
                  "Instances in parallel for the search's predicted cost elsewhere")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--probe-steps", o.probe_steps,
                  "The most steps each process trains when measuring trials at once, and a fused "
                  "group size is timed over (both within a twentieth of the search's steps)")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--checkpoint-every", o.checkpoint_every,
                  "Each trial's checkpoints: every DURATION (30s, 5m) or N steps (500steps); a "
                  "stopped search goes on from them (halving needs them: not off)")
      ->capture_default_str();
}

}  // namespace

Command add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneJob>();
  CLI::App* sub = app.add_subcommand(
      "tune", "Search hyper-parameters: trials at once on every device, halving, priced");
  add_search_options(sub, o->search);
  add_data_options(sub, o->data);
  sub->add_flag("--quiet,-q", o->quiet, "Print only the final table");
  add_cost_options(sub, o->cost);
  return {sub, [o] {
            o->search.command_line = recorded_command_line();
            return run_tune(*o);
          }};
}

}  // namespace xo::cli

// `crossover tune SPEC --vary KEY=...`: a hyper-parameter search (tune/search.h). The command reads
// the flags, runs the search, and renders it: a line per trial that ends and per halving decision
// while it runs, the files after every trial, the table at the end.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <memory>

#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "dist/mpi.h"
#include "report/files.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/tune_json.h"
#include "report/tune_text.h"
#include "tune/search.h"

namespace xo::cli {
namespace {

namespace fs = std::filesystem;

struct TuneOptions {
  SearchOptions search;
  CostOptions cost;
  bool quiet = false;
};

// The search on the terminal and in its folder.
class TuneIo final : public SearchIo {
 public:
  explicit TuneIo(const TuneOptions& o) : o_(o) {}

  TuneRecord read_record(const fs::path& file) override {
    return read_tune_record(read_file(file), file.string());
  }
  TrainResult read_trial(const fs::path& file) override {
    return read_train_result(read_file(file), file.string());
  }
  void publish(const TuneRecord& r) override {
    write_tune_report(o_.search.out, r, describe_machine());
  }
  Catalog catalog() override { return load_user_catalog(o_.cost); }
  void resolved(const ModelSpec& spec) override { print_notes(spec); }
  void note(const std::string& line) override { fmt::print(stderr, "{}\n", line); }

  void started(const TuneRecord& r) override {
    if (o_.quiet) return;
    std::vector<std::string> where;
    for (const ParallelChoice& c : r.parallel) {
      where.push_back(fmt::format("{} at once on {}{}", c.k, c.device,
                                  c.measured ? " (measured fastest)" : ""));
    }
    fmt::print("{}: {} trials ({}), {} by {}; {}\n", terminal_safe(r.model), r.trials.size(),
               r.mode, r.higher_is_better ? "best" : "lowest", r.objective, fmt::join(where, ", "));
    std::fflush(stdout);
  }
  void measuring(int k, const std::string& device) override {
    if (!o_.quiet)
      fmt::print(stderr, "measuring {} trial{} at once on {}...\n", k, k == 1 ? "" : "s", device);
  }
  void decided(const HalvingDecision& d) override {
    if (!o_.quiet) fmt::print("{}\n", decision_text(d));
  }
  void ended(const TrialRecord& t, const std::string& objective) override {
    if (o_.quiet) return;
    std::vector<std::string> v;
    for (const auto& [k, x] : t.values) v.push_back(fmt::format("{}={}", k, x));
    const std::string values = fmt::format("{}", fmt::join(v, " "));
    const std::string figure = std::isnan(t.objective)
                                   ? terminal_safe(t.error)
                                   : fmt::format("{} {:.4g}", objective, t.objective);
    fmt::print("{} {}: {} after {} epoch{}, {}, {} on {}{}\n", t.id, terminal_safe(values),
               trial_status_name(t.status), t.epochs, t.epochs == 1 ? "" : "s", figure,
               duration(t.process_seconds), t.device,
               t.threads > 0 ? fmt::format(" ({} thread{})", t.threads, t.threads == 1 ? "" : "s")
                             : std::string());
    std::fflush(stdout);
  }

 private:
  const TuneOptions& o_;
};

// The search's end: the table, where the page is, and how an interrupted search goes on.
int render(const SearchOutcome& done, const TuneOptions& o) {
  if (!o.quiet) fmt::print("\n{}", tune_table_text(done.record));
  fmt::print("results: {}\n", (done.out / "report.html").string());
  if (done.record.interrupted) {
    fmt::print(stderr,
               "crossover: tune interrupted; finished trials are kept in {} and the same command "
               "goes on from there\n",
               done.out.string());
    return kExitInterrupted;
  }
  return kExitOk;
}

int run_tune(TuneOptions o) {
  o.search.command_line = recorded_command_line();
  o.search.advice = o.cost.advice;
  TuneIo io(o);
  // A process no launcher started never touches MPI.
  if (!mpi::launched()) return render(run_search(o.search, io, nullptr), o);
  const mpi::World world;
  if (world.rank() != 0) return run_search_worker(world, o.search.devices);
  try {
    return render(run_search(o.search, io, &world), o);
  } catch (const std::exception& e) {
    end_job(world, e);  // every rank ends now, with rank 0's message
  }
}

}  // namespace

Command add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* sub = app.add_subcommand(
      "tune", "Search hyper-parameters: trials at once on every device, halving, priced");
  sub->add_option("spec", o->search.spec, "Built-in model name, spec file, or ONNX model")
      ->required();
  sub->add_option("--vary", o->search.vary,
                  "KEY=V1,V2,... or KEY=A..B[:log] (repeatable): lr, optimizer, epochs, seed, "
                  "depth, width, batch, sequence, any dotted spec key (train.optimizer.momentum, "
                  "model.layers.0.out, data.validation_split), or TYPE.KEY (dropout.p)")
      ->required();
  sub->add_option("--samples", o->search.samples,
                  "Draw this many random trials (ranges and lists) instead of the whole grid")
      ->check(positive_number());
  sub->add_option("--seed", o->search.seed, "Seed of the random draws")->capture_default_str();
  sub->add_option("--objective", o->search.objective,
                  "What ranks trials: val_accuracy, val_loss, test_accuracy, test_loss or loss "
                  "(default: validation, else test accuracy, else the training loss)");
  sub->add_flag("--halving", o->search.halving,
                "Successive halving (ASHA): weak trials stop early, strong ones get more epochs");
  sub->add_option("--min-epochs", o->search.min_epochs,
                  "Halving: the epochs every trial gets first")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--factor", o->search.factor,
                  "Halving: the top 1/factor go on, with factor times the epochs")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  sub->add_option("--epochs", o->search.epochs, "Override train.epochs (the most any trial trains)")
      ->check(positive_number());
  sub->add_option("--parallel", o->search.parallel,
                  "Trials at once per device (default: measured, the fastest of 1, 2, 4, ...)")
      ->check(positive_number());
  sub->add_option("--threads", o->search.threads,
                  "CPU threads per trial (default: the cores shared among the trials at once)")
      ->check(positive_number());
  sub->add_option("--device", o->search.devices,
                  "Devices to run trials on (repeatable: cpu, cuda:N; default: every device)");
  sub->add_option("--out", o->search.out, "Results folder (the same one goes on a stopped search)")
      ->capture_default_str();
  sub->add_flag("--restart", o->search.restart,
                "Discard a search already in --out and start afresh");
  sub->add_option("--instances", o->search.instances,
                  "Instances in parallel for the search's predicted cost elsewhere")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--probe-steps", o->search.probe_steps,
                  "Steps each process trains when measuring trials at once")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--checkpoint-every", o->search.checkpoint_every,
                  "Each trial's checkpoints: every DURATION (30s, 5m) or N steps (500steps); a "
                  "stopped search goes on from them (halving needs them: not off)")
      ->capture_default_str();
  sub->add_flag("--quiet,-q", o->quiet, "Print only the final table");
  add_cost_options(sub, o->cost);
  return {sub, [o] { return run_tune(*o); }};
}

}  // namespace xo::cli

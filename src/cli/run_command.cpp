// `crossover run` and `crossover sweep`: models trained on every device present, printed as one
// table and written as a report folder (results.json, results.csv, report.html) after every
// model. `run` is the default job, the classic disc-2 ... disc-12 depth sweep (with --suite
// classic also Keras's mnist-mlp, mnist-cnn and imdb-lstm); `sweep` grows any spec along one
// axis (depth, width, batch or sequence length) and finds where one device overtakes another.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/session.h"
#include "core/error.h"
#include "dist/mpi.h"
#include "model/cost.h"
#include "model/model.h"
#include "model/vary.h"
#include "report/assemble.h"
#include "report/files.h"
#include "report/terminal.h"
#include "train/data_parallel.h"
#include "tune/space.h"

namespace xo::cli {
namespace {

struct RunOptions {
  MeasureOptions measure;
  CostOptions cost;
  std::vector<std::string> models;
  std::string suite = "disc";
  std::string spec = "disc-12";
  std::string vary;
  std::string reduce = "auto";  // along ranks: how the gradients are summed
  int trials = 0;               // sweep --trials K: each point K trials fused (0: one run)
};

std::vector<std::string> suite_models(const std::string& suite) {
  std::vector<std::string> names;
  for (int layers = 2; layers <= 12; ++layers) names.push_back(fmt::format("disc-{}", layers));
  if (suite == "classic") {
    for (const char* name : {"mnist-mlp", "mnist-cnn", "imdb-lstm"}) names.push_back(name);
  }
  return names;
}

int run_models(const RunOptions& o) {
  const std::vector<std::string> models = o.models.empty() ? suite_models(o.suite) : o.models;
  std::vector<ModelSpec> specs;
  for (const auto& m : models) {
    specs.push_back(resolve_spec_with(m, o.measure.data));  // fail before any training
    print_notes(specs.back());
  }
  const Catalog catalog = load_user_catalog(o.cost);
  Session session(o.measure);
  const std::filesystem::path out(session.out());
  const size_t jobs = specs.size() * session.devices().size();
  const std::string title = fmt::format("crossover run: {}", fmt::join(models, ", "));
  session.resume_job("run", title);
  auto write = [&](bool finished) {
    Report report = session.report("run", title, finished);
    std::vector<RunRecord> disc;
    for (const RunRecord& r : session.runs()) {
      if (!r.axis.empty()) disc.push_back(r);
    }
    add_sweep_and_advice(report, session.peaks(), disc, "depth", catalog, o.cost.advice);
    write_report(out, report);
    session.settle();  // the runs are in the report: their checkpoints hold nothing more
    return report;
  };
  size_t job = 0;
  for (const std::string& device : session.devices()) {
    for (const ModelSpec& spec : specs) {
      if (session.stopped()) break;
      const bool disc = spec.origin == "built-in" && spec.name.rfind("disc-", 0) == 0;
      session.measure(spec, device, job++, jobs, disc ? "depth" : "",
                      static_cast<double>(weighted_layers(spec)));
      write(false);  // after every model: an interruption keeps them
    }
  }
  const Report report = write(true);
  fmt::print("{}", summary_text(report, out, session.stopped()));
  return session.stopped() ? kExitInterrupted : kExitOk;
}

// The rank counts of `--vary ranks=…` (a list, or a range A..B), each from 1 to the job's ranks.
std::vector<int> rank_counts(const std::string& text, int job_ranks) {
  const std::string list = text.substr(text.find('=') + 1);
  auto count = [&](const std::string& v) {
    int n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > job_ranks) {
      throw UserError(fmt::format(
          "--vary '{}': '{}' is not a rank count from 1 to {}, the job's ranks (mpirun -np N "
          "sets the largest)",
          text, v, job_ranks));
    }
    return n;
  };
  std::vector<int> counts;
  if (const auto dots = list.find(".."); dots != std::string::npos) {
    const int a = count(list.substr(0, dots)), b = count(list.substr(dots + 2));
    for (int n = a; n <= b; ++n) counts.push_back(n);
  } else {
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      counts.push_back(count(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  if (counts.empty()) throw UserError(fmt::format("--vary '{}': no rank counts", text));
  return counts;
}

// `mpirun -np N crossover sweep SPEC --vary ranks=1,2,…,N`: the spec trained data-parallel on the
// job's first k ranks for each k, the same global batch each time, while the other ranks sleep
// (a quiet barrier, not MPI's spinning one, so they leave their cores to the run). Rank 0
// measures, reports and writes, as `sweep` does on one process; the scaling table gives each
// count's communication and its efficiency against one rank.
int run_rank_sweep(const RunOptions& o, const ModelSpec& base, const mpi::World& world) {
  const bool lead = world.rank() == 0;
  const std::vector<int> counts = rank_counts(o.vary, world.size());
  MeasureOptions measure = o.measure;
  for (const std::string& d : measure.settings.devices) {
    if (parse_device(d, 1, measure.settings.precision).kind != "cpu") {
      throw UserError(
          fmt::format("--device {}: a sweep along ranks runs on the CPU in this version (GPU "
                      "ranks train with `mpirun -np N crossover train --device cuda`, one run "
                      "per rank count)",
                      d));
    }
  }
  measure.settings.devices = {"cpu"};
  // The ranks on a machine share its cores: each takes its part unless told (as `train` does).
  measure.settings.threads = threads_per_rank(measure.settings.threads, world.local_size());
  load_user_catalog(o.cost);  // the cost flags checked before any work, though nothing is priced
  Session session(measure, &world);
  const std::filesystem::path out(session.out());
  const std::string title = fmt::format("crossover sweep: {} along ranks", base.name);
  if (lead) session.resume_job("sweep", title);
  world.wait_quietly();              // rank 0 has probed its peaks and decided what to continue
  reduce_mode_for(o.reduce, world);  // refused before any group trains (shared across machines)
  auto write = [&](bool finished) {
    Report report = session.report("sweep", title, finished);
    report.sweep =
        sweep_record("ranks", sweep_series(session.runs()), {}, std::vector<std::string>{});
    report.sweep->scaling = scaling_points(session.runs());
    write_report(out, report);
    session.settle();
    return report;
  };
  for (size_t i = 0; i < counts.size(); ++i) {
    // Rank 0 says whether the job goes on (a stop request ends it after the run it was in).
    if (world.broadcast(session.stopped() ? "stop" : "go") != "go") break;
    const int k = counts[i];
    const std::unique_ptr<mpi::World> group = world.split(world.rank() < k);
    if (group && k == 1) {
      session.measure(base, "cpu", i, counts.size(), "ranks", 1);  // one process, as `train`
    } else if (group) {
      DataParallel ranks(*group, reduce_mode_for(o.reduce, *group));
      session.measure(base, "cpu", i, counts.size(), "ranks", k, &ranks);
    }
    world.wait_quietly();
    if (lead) write(false);
  }
  if (!lead) return 0;
  const Report report = write(true);
  fmt::print("{}", summary_text(report, out, session.stopped()));
  return session.stopped() ? kExitInterrupted : kExitOk;
}

// A sweep along ranks runs under an MPI launcher, every rank in the job; any other sweep is one
// process. Nothing (go on as one process), or the exit code of the sweep along ranks.
std::optional<int> sweep_on_ranks(const RunOptions& o) {
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
      if (world.rank() == 0) print_notes(base);
      return run_rank_sweep(o, base, world);
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

// The sweep's models: `base` with each value of --vary, and the values as numbers (the chart's x).
struct SweepPoints {
  std::string axis;
  std::vector<ModelSpec> specs;
  std::vector<double> values;
};

// The same --vary as `tune`'s (tune/space.h): an axis or any key of the spec, whose values,
// numbers, are the chart's x. The disc family sweeps its depth by default.
SweepPoints sweep_points(const ModelSpec& base, const RunOptions& o) {
  std::string vary_text = o.vary;
  if (vary_text.empty()) {
    if (!(base.origin == "built-in" && base.name.rfind("disc-", 0) == 0)) {
      throw UserError(
          fmt::format("sweep {}: say what to vary, e.g. --vary batch=32,64,128 or "
                      "--vary width=64,128,256",
                      o.spec));
    }
    vary_text = "depth=2..12";
  }
  const Dimension vary = parse_dimension(vary_text);
  if (vary.values.empty()) {
    throw UserError(
        fmt::format("--vary '{}': a sweep takes a list of values (or an integer range "
                    "of at most 1000); `crossover tune --samples` draws from ranges",
                    vary_text));
  }
  SweepPoints points{vary.key.text, {}, {}};
  for (const std::string& v : vary.values) {
    double x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x)) {
      throw UserError(fmt::format(
          "--vary '{}': '{}' is not a number: a sweep's values are its chart's x (`crossover "
          "tune` compares other choices)",
          vary_text, v));
    }
    points.specs.push_back(with_spec_value(base, vary.key, v));
    points.values.push_back(x);
  }
  if (!base.init.empty() && std::any_of(points.specs.begin(), points.specs.end(),
                                        [](const ModelSpec& s) { return s.init.empty(); })) {
    fmt::print(stderr,
               "note: {}: its initial weights ({}) fit its own shapes only: along {} each model "
               "draws its own from the seed\n",
               base.origin, base.init, points.axis);
  }
  return points;
}

int run_sweep(const RunOptions& o) {
  if (o.trials > 0 && o.vary.rfind("ranks=", 0) == 0) {
    throw UserError(
        fmt::format("--trials {} with --vary {}: fused trials train in one process, "
                    "not across ranks (sweep one or the other)",
                    o.trials, o.vary));
  }
  if (const std::optional<int> ranks = sweep_on_ranks(o)) return *ranks;
  const ModelSpec base = resolve_spec_with(o.spec, o.measure.data);
  print_notes(base);
  const SweepPoints points = sweep_points(base, o);
  const Catalog catalog = load_user_catalog(o.cost);
  Session session(o.measure);
  const std::filesystem::path out(session.out());
  const size_t jobs = points.specs.size() * session.devices().size();
  const std::string title = fmt::format("crossover sweep: {} along {}", base.name, points.axis);
  session.resume_job("sweep", title);
  AdviceOptions advice = o.cost.advice;
  advice.trials = o.trials;  // the verdict and predictions are for K trials, fused
  auto write = [&](bool finished) {
    Report report = session.report("sweep", title, finished);
    add_sweep_and_advice(report, session.peaks(), session.runs(), points.axis, catalog, advice);
    write_report(out, report);
    session.settle();  // the runs are in the report: their checkpoints hold nothing more
    return report;
  };
  size_t job = 0;
  for (const std::string& device : session.devices()) {
    for (size_t i = 0; i < points.specs.size(); ++i) {
      if (session.stopped()) break;
      if (o.trials > 0) {
        session.measure_trials(points.specs[i], o.trials, device, job++, jobs, points.axis,
                               points.values[i]);
      } else {
        session.measure(points.specs[i], device, job++, jobs, points.axis, points.values[i]);
      }
      write(false);
    }
  }
  const Report report = write(true);
  fmt::print("{}", summary_text(report, out, session.stopped()));
  return session.stopped() ? kExitInterrupted : kExitOk;
}

}  // namespace

Command add_run(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
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
  auto o = std::make_shared<RunOptions>();
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

// The measuring jobs (job/measuring.h): `run`, `sweep` (and along ranks), `advise` and `cost`.
#include "job/measuring.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <memory>

#include "advisor/advice.h"
#include "advisor/sweep.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "distributed/mpi.h"
#include "job/hooks.h"
#include "job/run_notes.h"
#include "job/session.h"
#include "model/model.h"
#include "model/vary.h"
#include "model/work.h"
#include "report/assemble.h"
#include "report/files.h"
#include "report/recorded_run.h"
#include "report/report_json.h"
#include "train/data_parallel.h"
#include "tune/space.h"

namespace xo {
namespace {

std::vector<std::string> suite_models(const std::string& suite) {
  std::vector<std::string> names;
  for (int layers = 2; layers <= 12; ++layers) names.push_back(fmt::format("disc-{}", layers));
  if (suite == "classic") {
    for (const char* name : {"mnist-mlp", "mnist-cnn", "imdb-lstm"}) names.push_back(name);
  }
  return names;
}

// The sweep's models: `base` with each value of --vary, and the values as numbers (the chart's x).
struct SweepPoints {
  std::string axis;
  std::vector<ModelSpec> specs;
  std::vector<double> values;
};

// The same --vary as `tune`'s (tune/space.h): an axis or any key of the spec, whose values,
// numbers, are the chart's x. The disc family sweeps its depth by default.
SweepPoints sweep_points(const ModelSpec& base, const MeasureJob& o, JobHooks& hooks) {
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
    hooks.note(fmt::format(
        "note: {}: its initial weights ({}) fit its own shapes only: along {} each model draws "
        "its own from the seed",
        base.origin, base.init, points.axis));
  }
  return points;
}

// The fused group sizes measured for --trials K: 1, 4, 16, … below K, then K.
std::vector<int> trial_counts(int k) {
  std::vector<int> counts;
  for (int t = 1; t < k; t *= 4) counts.push_back(t);
  counts.push_back(k);
  return counts;
}

// `cost RESULTS.json`: a run measured earlier costed again; its spec and its device's peaks are in
// the file.
Report recost(const AdviseJob& o, const Catalog& catalog) {
  const nlohmann::json doc = parse_report_json(read_file(o.spec), o.spec);
  if (doc.is_discarded()) {
    throw UserError(fmt::format("{}: not a crossover results.json (expected schema '{}')", o.spec,
                                kReportSchema));
  }
  Report report = read_report(doc, o.spec);
  const RunRecord run = recorded_run(report, o.spec, o.model);
  report.sweep.reset();  // the recorded sweep's axis is not this run's
  // A fused group's run (advise --trials) is costed as that many trials fused, as it was measured.
  AdviceOptions advice = o.cost.advice;
  if (run.result.fused_trials > 1) advice.trials = run.result.fused_trials;
  add_advice(report, run, {run}, report.peaks, catalog, advice, "", true);
  report.advice.reset();
  return report;
}

// The spec measured on every device here, then predicted, costed and (advise) advised; the
// report written to the job's folder. Nothing when a stop came before any run finished.
std::optional<JobOutcome> measure_and_advise(const AdviseJob& o, const Catalog& catalog,
                                             JobHooks& hooks) {
  const bool advise = o.advise;
  const ModelSpec spec = o.given ? *o.given : resolve_spec_with(o.spec, o.measure.data);
  tell_spec_notes(hooks, spec);
  Session session(o.measure, hooks, nullptr, bf16_changes_products(spec));
  const std::string kind = advise ? "advise" : "cost";
  const std::string title = fmt::format("crossover {}: {}", kind, spec.name);
  session.resume_job(kind, title);
  const std::vector<int> counts = o.trials > 0 ? trial_counts(o.trials) : std::vector<int>{};
  const size_t jobs = session.devices().size() * (1 + counts.size());
  size_t job = 0;
  for (const std::string& device : session.devices()) {
    if (session.stopped()) break;
    if (session.measures(spec, device)) session.measure(spec, device, job, jobs);
    ++job;
  }
  // --trials: the same model's trials fused in groups of each count, on every device.
  for (const std::string& device : session.devices()) {
    for (const int k : counts) {
      if (session.stopped()) break;
      if (!session.measures(spec, device)) continue;
      try {
        session.measure_trials(spec, k, device, job++, jobs);
      } catch (const UserError& e) {  // more trials than the device's memory holds, say
        hooks.note(fmt::format("note: {} trials of {} on {} not measured: {}", k,
                               terminal_safe(spec.name), device, terminal_safe(e.what())));
        break;
      }
    }
  }
  if (session.runs().empty()) return std::nullopt;
  Report report = session.report(kind, title, true);
  if (o.trials > 0) {
    add_trials_advice(report, session.runs(), o.trials, session.peaks(), catalog, o.cost.advice);
  } else {
    add_width_sweep_and_advice(report, spec, session.runs().front(), session.runs(),
                               session.peaks(), catalog, o.cost.advice);
  }
  if (!advise) report.advice.reset();
  write_report(session.out(), report);
  session.settle();
  return JobOutcome{std::move(report), session.out(), session.stopped()};
}

}  // namespace

JobOutcome run_job(const MeasureJob& o, JobHooks& hooks) {
  const std::vector<std::string> models = o.models.empty() ? suite_models(o.suite) : o.models;
  std::vector<ModelSpec> specs;
  for (const auto& m : models) {
    specs.push_back(resolve_spec_with(m, o.measure.data));  // fail before any training
    tell_spec_notes(hooks, specs.back());
  }
  const Catalog catalog = load_user_catalog(o.cost);
  Session session(o.measure, hooks, nullptr,
                  std::any_of(specs.begin(), specs.end(), bf16_changes_products));
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
      if (!session.measures(spec, device)) {
        ++job;
        continue;
      }
      session.measure(spec, device, job++, jobs, disc ? "depth" : "",
                      static_cast<double>(weighted_layers(spec)));
      write(false);  // after every model: an interruption keeps them
    }
  }
  return {write(true), out, session.stopped()};
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
std::optional<JobOutcome> rank_sweep_job(const MeasureJob& o, const ModelSpec& base,
                                         const mpi::World& world, JobHooks& hooks) {
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
  Session session(measure, hooks, &world);
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
  if (!lead) return std::nullopt;
  return JobOutcome{write(true), out, session.stopped()};
}

JobOutcome sweep_job(const MeasureJob& o, JobHooks& hooks) {
  const ModelSpec base = o.given ? *o.given : resolve_spec_with(o.spec, o.measure.data);
  tell_spec_notes(hooks, base);
  const SweepPoints points = sweep_points(base, o, hooks);
  const Catalog catalog = load_user_catalog(o.cost);
  Session session(o.measure, hooks, nullptr,
                  std::any_of(points.specs.begin(), points.specs.end(), bf16_changes_products));
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
      if (!session.measures(points.specs[i], device)) {
        ++job;
        continue;
      }
      if (o.trials > 0) {
        session.measure_trials(points.specs[i], o.trials, device, job++, jobs, points.axis,
                               points.values[i]);
      } else {
        session.measure(points.specs[i], device, job++, jobs, points.axis, points.values[i]);
      }
      write(false);
    }
  }
  return {write(true), out, session.stopped()};
}

std::optional<JobOutcome> advise_job(const AdviseJob& o, JobHooks& hooks) {
  const Catalog catalog = load_user_catalog(o.cost);
  const bool from_results = !o.advise && std::filesystem::path(o.spec).extension() == ".json" &&
                            std::filesystem::exists(o.spec);
  if (from_results) return JobOutcome{recost(o, catalog), {}, false};
  return measure_and_advise(o, catalog, hooks);
}

}  // namespace xo

// `crossover advise SPEC` and `crossover cost RESULTS.json|SPEC`: the spec measured on every device
// here, predicted on the catalog's devices, the cost of a run on each cloud instance and on owned
// hardware, and (advise) a short recommendation. Every figure is measured or a labelled prediction.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "advisor/advice.h"
#include "advisor/sweep.h"
#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "report/assemble.h"
#include "report/files.h"
#include "report/recorded_run.h"
#include "report/report_json.h"
#include "report/terminal.h"

namespace xo::cli {
namespace {

struct AdviseOptions {
  MeasureOptions measure;
  CostOptions cost;
  std::string spec;
  std::string model;  // cost: which run of a results file
  int trials = 0;     // advise --trials K: a sweep of K trials, fused (0: one run)
  bool verbose = false;  // advise: every table on the terminal, not only the answer
};

// The fused group sizes measured for --trials K: 1, 4, 16, … below K, then K.
std::vector<int> trial_counts(int k) {
  std::vector<int> counts;
  for (int t = 1; t < k; t *= 4) counts.push_back(t);
  counts.push_back(k);
  return counts;
}

// `cost RESULTS.json`: a run measured earlier costed again; its spec and its device's peaks are in
// the file.
Report recost(const AdviseOptions& o, const Catalog& catalog) {
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
std::optional<Report> measure_and_advise(const AdviseOptions& o, const Catalog& catalog,
                                         bool advise, std::string& out, bool& stopped) {
  const ModelSpec spec = resolve_spec_with(o.spec, o.measure.data);
  print_notes(spec);
  Session session(o.measure);
  const std::string kind = advise ? "advise" : "cost";
  const std::string title = fmt::format("crossover {}: {}", kind, spec.name);
  session.resume_job(kind, title);
  const std::vector<int> counts = o.trials > 0 ? trial_counts(o.trials) : std::vector<int>{};
  const size_t jobs = session.devices().size() * (1 + counts.size());
  size_t job = 0;
  for (const std::string& device : session.devices()) {
    if (session.stopped()) break;
    session.measure(spec, device, job++, jobs);
  }
  // --trials: the same model's trials fused in groups of each count, on every device.
  for (const std::string& device : session.devices()) {
    for (const int k : counts) {
      if (session.stopped()) break;
      try {
        session.measure_trials(spec, k, device, job++, jobs);
      } catch (const UserError& e) {  // more trials than the device's memory holds, say
        fmt::print(stderr, "note: {} trials of {} on {} not measured: {}\n", k,
                   terminal_safe(spec.name), device, terminal_safe(e.what()));
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
  out = session.out();
  write_report(out, report);
  session.settle();
  stopped = session.stopped();
  return report;
}

int run_advise(const AdviseOptions& o, bool advise) {
  const Catalog catalog = load_user_catalog(o.cost);
  const bool from_results = !advise && std::filesystem::path(o.spec).extension() == ".json" &&
                            std::filesystem::exists(o.spec);
  bool stopped = false;  // interrupted: the report says it is partial, the exit code 130
  std::string out;       // the folder written (a spec measured here)
  std::optional<Report> measured;
  if (!from_results) {
    measured = measure_and_advise(o, catalog, advise, out, stopped);
    if (!measured) return kExitInterrupted;
  }
  const Report report = from_results ? recost(o, catalog) : std::move(*measured);
  // advise answers in one screen (the verdict, the advice, where the rest is); `cost`, and advise
  // with --verbose, print every table.
  const bool everything = !advise || o.verbose;
  if (report.verdict) fmt::print("{}", wrap(verdict_text(*report.verdict)));
  if (everything) {
    fmt::print("{}", predictions_text(report));
    fmt::print("{}", cost_text(*report.cost));
  }
  if (report.advice) {
    fmt::print("\nAdvice for {}:\n{}", terminal_safe(o.spec), wrap(advice_text(*report.advice)));
  }
  if (!from_results) {
    fmt::print("\nreport: {}{}{}\n",
               terminal_safe((std::filesystem::path(out) / "report.html").string()),
               stopped ? " (interrupted: partial)" : "",
               everything ? "" : " (every device's prediction, the costs and buying: --verbose)");
  }
  return stopped ? kExitInterrupted : kExitOk;
}

Command add(CLI::App& app, const char* name, const char* help, bool advise) {
  auto o = std::make_shared<AdviseOptions>();
  o->measure.settings.max_steps = 100;
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("spec", o->spec,
                  advise ? "A built-in name or a TOML spec"
                         : "A results.json from run/sweep/advise, or a spec to measure now")
      ->required();
  if (!advise)
    sub->add_option("--model", o->model, "Which run of a results.json (default: the last)");
  if (advise) {
    sub->add_option("--trials", o->trials,
                    "Advise on a sweep of K trials of the model (a hyper-parameter search) "
                    "trained as one fused group: groups of 1, 4, 16, ... and K measured on every "
                    "device here, the catalog's devices predicted, the verdict for K trials and "
                    "for one")
        ->check(CLI::Range(2, 4096));
    sub->add_flag("--verbose,-v", o->verbose,
                  "Print every device's prediction, the validation of the predictions, the cost "
                  "table and buying against renting, not only the verdict and the advice");
  }
  add_measure_options(sub, o->measure, true);
  add_cost_options(sub, o->cost);
  return {sub, [o, advise] { return run_advise(*o, advise); }};
}

}  // namespace

Command add_advise(CLI::App& app) {
  return add(app, "advise",
             "Measure a spec here, predict it on the catalog's hardware, and recommend where to "
             "train it (--steps 100 by default)",
             true);
}

Command add_cost(CLI::App& app) {
  return add(app, "cost",
             "What a run costs on each cloud instance and on owned hardware, and when buying "
             "pays off",
             false);
}

}  // namespace xo::cli

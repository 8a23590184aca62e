// `crossover advise SPEC` and `crossover cost RESULTS.json|SPEC`: the spec measured on every device
// here, predicted on the catalog's devices, the cost of a run on each cloud instance and on owned
// hardware, and (advise) a short recommendation. Every figure is measured or a labelled prediction.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <memory>

#include "advisor/advice.h"
#include "advisor/sweep.h"
#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "model/cost.h"
#include "model/model.h"
#include "model/vary.h"
#include "report/assemble.h"
#include "report/files.h"
#include "report/report_json.h"
#include "report/terminal.h"

namespace xo::cli {
namespace {

struct AdviseOptions {
  MeasureOptions measure;
  CostOptions cost;
  std::string spec;
  std::string model;  // cost: which run of a results file
};

// The predicted crossover along width: this spec's hidden width scaled from 16 to 4096, on this
// machine's first device (its roofline calibrated by the measured spec) and on the catalog's
// reference GPU (or a measured GPU's roofline).
std::vector<Crossover> predicted_width_crossover(const ModelSpec& spec, const RunRecord& measured,
                                                 const std::vector<DevicePeaks>& peaks,
                                                 const Catalog& catalog, const AdviceOptions& o_in,
                                                 std::vector<SweepSeries>& series_out) {
  const AdviceOptions o = with_profiles(o_in);
  const DevicePeaks* local = find_peaks(peaks, measured.result.device.id);
  const CatalogDevice* gpu = reference_gpu(catalog);
  if (!local || !gpu || measured.result.device.kind == DeviceKind::Gpu) return {};
  const double eff = local_efficiency(measured, peaks);
  const DeviceRates local_rates = probed_rates(*local);
  const DeviceRates gpu_rates = catalog_rates(*gpu, peaks, o);
  const TargetDevice gpu_target = catalog_target(*gpu, peaks, o);
  const TargetDevice here_target = local_target(measured.result.device, *local, o);
  const bool profiled = !o.profiles.empty();
  auto cpu_backend = make_backend(parse_device("cpu", 1));
  SweepSeries here{measured.result.device.id + (profiled ? " (predicted)" : " (calibrated)"), {}};
  SweepSeries there{gpu->id + (profiled ? " (predicted)" : " (predicted, lower bound)"), {}};
  for (int64_t width = 16; width <= 4096; width *= 2) {
    ModelSpec s;
    try {
      s = vary_spec(spec, Axis::Width, width);
    } catch (const UserError&) {
      return {};  // no hidden width to vary
    }
    if (parameter_count(s) > 100'000'000) break;
    const Model m(s, *cpu_backend);
    const StepCost cost = step_cost(m, measured.result.batch);
    const double params = static_cast<double>(m.parameter_count());
    // Per 100 epochs, as every sweep chart: the spec's steps per epoch at this batch.
    const double per_100 = static_cast<double>(measured.result.steps_per_epoch) * 100;
    const auto here_step =
        profiled ? profiled_step(s, measured.result.batch, here_target, o) : std::nullopt;
    const auto gpu_step =
        profiled ? profiled_step(s, measured.result.batch, gpu_target, o) : std::nullopt;
    here.points.push_back(
        {static_cast<double>(width), params,
         (here_step ? here_step->step.seconds : predict_step(cost, local_rates, eff).seconds) *
             per_100});
    there.points.push_back(
        {static_cast<double>(width), params,
         (gpu_step ? gpu_step->step.seconds : predict_step(cost, gpu_rates, 1.0).seconds) *
             per_100});
  }
  series_out = {here, there};
  return find_crossovers(series_out);
}

// The figures a cost is computed from, in a results file that may have been edited: a step time or
// a peak of zero or below divided into "inf ms +inf%". Each must be a positive, finite number (a
// null peak, a device that was not probed, stays unknown).
void check_recosted_figures(const Report& report, const RunRecord& run, const std::string& file) {
  const TrainResult& r = run.result;
  const std::string where = fmt::format("run '{}' on {}", r.model, r.device.id);
  const auto positive = [&](const std::string& place, const char* field, double v, bool null_ok) {
    if ((null_ok && std::isnan(v)) || (v > 0 && std::isfinite(v))) return;
    throw UserError(
        fmt::format("{}: {}: {}: {} (expected a positive number)", file, place, field, v));
  };
  positive(where, "step_ms.median", r.step_ms.median, false);
  if (r.batch <= 0 || r.steps_per_epoch <= 0) {
    throw UserError(
        fmt::format("{}: {}: batch {} and steps_per_epoch {} (expected positive "
                    "integers)",
                    file, where, r.batch, r.steps_per_epoch));
  }
  for (size_t i = 0; i < report.peaks.size(); ++i) {
    const DevicePeaks& p = report.peaks[i];
    const std::string place = fmt::format("peaks[{}] ({})", i, p.device);
    positive(place, "matmul_gflops", p.matmul_gflops, true);
    positive(place, "bandwidth_gbs", p.bandwidth_gbs, true);
    if (p.step_overhead_us < 0 || p.layer_overhead_us < 0) {
      throw UserError(
          fmt::format("{}: {}: step_overhead_us {} and layer_overhead_us {} (expected "
                      "0 or more)",
                      file, place, p.step_overhead_us, p.layer_overhead_us));
    }
  }
}

// The run of `model` (the last run when empty) in a results file read strictly, with its step's
// work computed again from the spec it recorded.
RunRecord recorded_run(const Report& report, const std::string& file, const std::string& model) {
  const ReportRun* found = nullptr;
  for (const ReportRun& r : report.runs) {
    if (model.empty() || r.run.result.model == model) found = &r;
  }
  if (!found) {
    throw UserError(fmt::format("{}: no run{} in it", file,
                                model.empty() ? "" : fmt::format(" of model '{}'", model)));
  }
  RunRecord run = found->run;
  check_recosted_figures(report, run, file);
  const ModelSpec spec = parse_spec(run.spec_toml, file + " (spec_toml)");
  auto cpu = make_backend(parse_device("cpu", 1));
  const Model m(spec, *cpu);
  run.cost = step_cost(m, run.result.batch);
  return run;
}

int run_advise(const AdviseOptions& o, bool advise) {
  const Catalog catalog = load_user_catalog(o.cost);
  Report report;
  bool stopped = false;  // interrupted: the report says it is partial, the exit code 130
  std::string out;       // the folder written (a spec measured here)
  const bool from_results = !advise && std::filesystem::path(o.spec).extension() == ".json" &&
                            std::filesystem::exists(o.spec);
  if (from_results) {
    // Re-cost a run that was measured earlier: its spec and its device's peaks are in the file.
    const nlohmann::json doc = parse_report_json(read_file(o.spec), o.spec);
    if (doc.is_discarded()) {
      throw UserError(fmt::format("{}: not a crossover results.json (expected schema '{}')", o.spec,
                                  kReportSchema));
    }
    report = read_report(doc, o.spec);
    const RunRecord run = recorded_run(report, o.spec, o.model);
    report.sweep.reset();  // the recorded sweep's axis is not this run's
    add_advice(report, run, {run}, report.peaks, catalog, o.cost.advice, "", true);
    report.advice.reset();
  } else {
    const ModelSpec spec = resolve_spec(o.spec);
    print_notes(spec);
    Session session(o.measure);
    const std::string kind = advise ? "advise" : "cost";
    const std::string title = fmt::format("crossover {}: {}", kind, spec.name);
    session.resume_job(kind, title);
    const size_t jobs = session.devices().size();
    size_t job = 0;
    for (const std::string& device : session.devices()) {
      if (session.stopped()) break;
      session.measure(spec, device, job++, jobs);
    }
    if (session.runs().empty()) return kExitInterrupted;
    report = session.report(kind, title, true);
    const RunRecord& focus = session.runs().front();
    std::vector<SweepSeries> series;
    const std::vector<Crossover> crossovers =
        predicted_width_crossover(spec, focus, session.peaks(), catalog, o.cost.advice, series);
    if (!series.empty()) {
      report.sweep =
          sweep_record("width", series, crossovers, {series[0].device, series[1].device});
      const AdviceOptions profiled = with_profiles(o.cost.advice);
      report.sweep->series[0].note =
          profiled.profiles.empty()
              ? fmt::format(
                    "this machine's {} at the probe's roofline, calibrated by the "
                    "efficiency {} reached here",
                    focus.result.device.id, spec.name)
              : fmt::format(
                    "this machine's {} predicted from a device profile at each width "
                    "(the measured point is {}'s own width)",
                    focus.result.device.id, spec.name);
      report.sweep->series[1].note = reference_gpu_note(catalog, profiled);
    }
    add_advice(report, focus, session.runs(), session.peaks(), catalog, o.cost.advice, "width",
               true);
    if (!advise) report.advice.reset();
    out = session.out();
    write_report(out, report);
    session.settle();
    stopped = session.stopped();
  }
  if (report.verdict) fmt::print("{}", verdict_text(*report.verdict));
  fmt::print("{}", predictions_text(report));
  fmt::print("{}", cost_text(*report.cost));
  if (report.advice) {
    fmt::print("\nAdvice for {}:\n{}", terminal_safe(o.spec), advice_text(*report.advice));
  }
  if (!from_results) {
    fmt::print("\nreport: {}{}\n",
               terminal_safe((std::filesystem::path(out) / "report.html").string()),
               stopped ? " (interrupted: partial)" : "");
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

// `crossover advise SPEC` and `crossover cost RESULTS.json|SPEC`: the spec measured on every device
// here, predicted on the catalog's devices, the cost of a run on each cloud instance and on owned
// hardware, and (advise) a short recommendation. Every figure is measured or a labelled prediction.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "advisor/advice.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "model/model.h"
#include "model/vary.h"
#include "report/table.h"

namespace xo::cli {
namespace {

struct AdviseOptions {
  MeasureOptions measure;
  CostOptions cost;
  std::string spec;
  std::string model;  // cost: which run of a results file
};

std::string money(const nlohmann::json& v) {
  return v.is_number() ? format_usd(v.get<double>()) : std::string("n/a");
}

std::string hours(double h) { return format_duration(h * 3600); }

void print_cost(const nlohmann::json& report) {
  const nlohmann::json& c = report["cost"];
  fmt::print("\nCost of {} epochs of {} ({} steps each):\n", c["epochs"].get<int64_t>(),
             c["model"].get<std::string>(), c["steps_per_epoch"].get<int64_t>());
  for (const auto& l : c["local"]) {
    fmt::print("  here, on {}: {} (measured)\n", l["device"].get<std::string>(),
               hours(l["run_hours"].get<double>()));
  }
  Table inst({"provider", "instance", "device", "$/h", "run time", "on demand", "spot", "time"});
  for (const auto& i : c["instances"]) {
    inst.add_row({i["provider"].get<std::string>(), i["name"].get<std::string>(),
                  fmt::format("{}{}", i["device_count"].get<int>() > 1
                                          ? fmt::format("{}x ", i["device_count"].get<int>())
                                          : "",
                              i["device"].get<std::string>()),
                  fmt::format("{:.3f}", i["on_demand_usd_per_hour"].get<double>()),
                  hours(i["run_hours"].get<double>()), money(i["on_demand_usd"]),
                  money(i["spot_usd"]), i["predicted"].get<bool>() ? "predicted" : "measured"});
  }
  fmt::print("{}", inst.render());
  Table own({"owned device", "price", "capital $/h", "power $/h", "run time", "per run", "time"});
  for (const auto& o : c["ownership"]) {
    own.add_row({o["name"].get<std::string>(), money(o["price_usd"]),
                 fmt::format("{:.4f}", o["hourly_capital_usd"].get<double>()),
                 fmt::format("{:.4f}", o["hourly_power_usd"].get<double>()),
                 hours(o["run_hours"].get<double>()), money(o["run_usd"]),
                 o["predicted"].get<bool>() ? "predicted" : "measured"});
  }
  fmt::print("{}", own.render());
  Table be({"buy", "instead of renting", "break-even h/month", "payback"});
  for (const auto& b : c["break_even"]) {
    be.add_row({b["name"].get<std::string>(), b["instance"].get<std::string>(),
                b["hours_per_month"].is_number()
                    ? fmt::format("{:.0f}", b["hours_per_month"].get<double>())
                    : std::string("never"),
                b["payback_months"].is_number()
                    ? fmt::format("{:.1f} months at {:.0f} h/month",
                                  b["payback_months"].get<double>(),
                                  b["at_hours_per_month"].get<double>())
                    : std::string("never")});
  }
  fmt::print("{}", be.render());
  const nlohmann::json& a = c["assumptions"];
  fmt::print(
      "Assumptions: owned hardware written off over {} years at {:.0f}% use, electricity "
      "${}/kWh, {} W host around a GPU; whole instances are billed even where a run uses one of "
      "their GPUs. Predicted times are roofline predictions (see report.html for their "
      "assumptions).\n",
      a["lifetime_years"].get<double>(), 100 * a["utilisation"].get<double>(),
      a["electricity_usd_per_kwh"].get<double>(), a["host_power_w"].get<double>());
}

void print_predictions(const nlohmann::json& report) {
  Table t({"device", "step (predicted)", "bound", "measured", "error"});
  for (const auto& p : report["predictions"]) {
    t.add_row({p["name"].get<std::string>(), fmt::format("{:.4f} ms", p["step_ms"].get<double>()),
               p["bound"].get<std::string>(),
               p["measured_step_ms"].is_number()
                   ? fmt::format("{:.4f} ms", p["measured_step_ms"].get<double>())
                   : std::string("-"),
               p["error_percent"].is_number()
                   ? fmt::format("{:+.0f}%", p["error_percent"].get<double>())
                   : std::string("-")});
  }
  fmt::print("\nPredicted step times ({}):\n{}", report["predictions"][0]["model"].get<std::string>(),
             t.render());
}

// The predicted crossover along width: this spec's hidden width scaled from 16 to 4096, on this
// machine's first device (its roofline calibrated by the measured spec) and on the catalog's
// reference GPU (or a measured GPU's roofline).
std::vector<Crossover> predicted_width_crossover(const ModelSpec& spec, const SweepRow& measured,
                                                 const std::vector<DevicePeaks>& peaks,
                                                 const Catalog& catalog, const AdviceOptions& o,
                                                 std::vector<SweepSeries>& series_out) {
  const DevicePeaks* local = find_peaks(peaks, measured.result.device.id);
  const CatalogDevice* gpu = reference_gpu(catalog);
  if (!local || !gpu || measured.result.device.kind == "cuda") return {};
  const double eff = local_efficiency(measured, peaks);
  const DeviceRates local_rates = probed_rates(*local);
  const DeviceRates gpu_rates = catalog_rates(*gpu, peaks, o);
  auto cpu_backend = make_backend(parse_device("cpu", 1));
  SweepSeries here{measured.result.device.id + " (calibrated)", {}};
  SweepSeries there{gpu->id + " (predicted)", {}};
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
    here.points.push_back({static_cast<double>(width), params,
                           predict_step(cost, local_rates, eff).seconds * per_100});
    there.points.push_back({static_cast<double>(width), params,
                            predict_step(cost, gpu_rates, 1.0).seconds * per_100});
  }
  series_out = {here, there};
  return find_crossovers(series_out);
}

int run_advise(const AdviseOptions& o, bool advise) {
  const Catalog catalog = load_user_catalog(o.cost);
  nlohmann::json report;
  const bool from_results =
      !advise && std::filesystem::path(o.spec).extension() == ".json" &&
      std::filesystem::exists(o.spec);
  if (from_results) {
    // Re-cost a run that was measured earlier: its spec and its device's peaks are in the file.
    report = nlohmann::json::parse(read_file(o.spec), nullptr, false);
    if (report.is_discarded() || !report.is_object() ||
        report.value("schema", "") != std::string(kReportSchema)) {
      throw UserError(fmt::format("{}: not a crossover results.json (expected schema '{}')",
                                  o.spec, kReportSchema));
    }
    const nlohmann::json* run = nullptr;
    for (const nlohmann::json& r : report["runs"]) {
      if (o.model.empty() || r.value("model", "") == o.model) run = &r;
    }
    if (!run) {
      throw UserError(fmt::format("{}: no run{} in it", o.spec,
                                  o.model.empty() ? "" : fmt::format(" of model '{}'", o.model)));
    }
    // The fields the measuring commands write; a file edited or cut short names what it lacks.
    std::vector<DevicePeaks> peaks;
    SweepRow row;
    try {
      for (const nlohmann::json& p : report["peaks"]) peaks.push_back(peaks_from_json(p));
      row.spec_toml = run->at("spec_toml").get<std::string>();
      TrainResult& r = row.result;
      r.model = run->at("model").get<std::string>();
      r.params = run->at("params").get<int64_t>();
      r.batch = run->at("batch").get<int64_t>();
      r.steps_per_epoch = run->at("steps_per_epoch").get<int64_t>();
      r.step_ms.median = run->at("median_step_ms").get<double>();
      r.device.id = run->at("device").get<std::string>();
      r.device.kind = run->at("device_info").at("kind").get<std::string>();
      r.device.name = run->at("device_info").at("name").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      throw UserError(fmt::format("{}: run '{}' or its device's peaks lack a field crossover "
                                  "writes ({})",
                                  o.spec, run->value("model", "?"), e.what()));
    }
    const ModelSpec spec = parse_spec(row.spec_toml, o.spec + " (spec_toml)");
    auto cpu = make_backend(parse_device("cpu", 1));
    const Model m(spec, *cpu);
    const TrainResult& r = row.result;
    row.cost = step_cost(m, r.batch);
    add_advice(report, row, {row}, peaks, catalog, o.cost.advice, {}, "width", true);
    report.erase("advice");
  } else {
    const ModelSpec spec = resolve_spec(o.spec);
    Session session(o.measure);
    const size_t jobs = session.devices().size();
    size_t job = 0;
    for (const std::string& device : session.devices()) {
      if (session.stopped()) break;
      session.measure(spec, device, job++, jobs);
    }
    if (session.rows().empty()) return 130;
    report = session.report(advise ? "advise" : "cost",
                            fmt::format("crossover {}: {}", advise ? "advise" : "cost", spec.name));
    const SweepRow& focus = session.rows().front();
    std::vector<SweepSeries> series;
    const std::vector<Crossover> crossovers = predicted_width_crossover(
        spec, focus, session.peaks(), catalog, o.cost.advice, series);
    if (!series.empty()) {
      report["sweep"] = sweep_json("width", series, crossovers,
                                   {series[0].device, series[1].device});
    }
    add_advice(report, focus, session.rows(), session.peaks(), catalog, o.cost.advice, crossovers,
               "width", true);
    if (!advise) report.erase("advice");
    write_report(o.measure.out, report);
  }
  print_predictions(report);
  print_cost(report);
  if (report.contains("advice")) {
    fmt::print("\nAdvice for {}:\n", o.spec);
    for (const auto& line : report["advice"]) fmt::print("- {}\n", line.get<std::string>());
  }
  if (!from_results) {
    fmt::print("\nreport: {}\n", (std::filesystem::path(o.measure.out) / "report.html").string());
  }
  return 0;
}

Command add(CLI::App& app, const char* name, const char* help, bool advise) {
  auto o = std::make_shared<AdviseOptions>();
  o->measure.max_steps = 100;
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("spec", o->spec,
                  advise ? "A built-in name or a TOML spec"
                         : "A results.json from run/sweep/advise, or a spec to measure now")
      ->required();
  if (!advise) sub->add_option("--model", o->model, "Which run of a results.json (default: the last)");
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

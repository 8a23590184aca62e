// The terminal's text: the runs table, the peaks, predictions, cost and advice. Names that come
// from files (models, devices, catalog entries) go through terminal_safe.
#include "report/terminal.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/format.h"
#include "report/table.h"

namespace xo {
namespace {

std::string hours(double h) { return duration(h * 3600); }

// The runs table, with a "*" on per-epoch times estimated from the median step, a "!" on timings
// other processes contaminated, a "~" on figures not bit-identical to an uninterrupted run's.
std::string runs_table(const Report& report) {
  Table table({"model", "layers", "params", "device", "s/100 epochs", "ms/step", "spread",
               "GFLOP/s", "% of peak", "train error", "test accuracy"});
  for (const ReportRun& run : report.runs) {
    const TrainResult& r = run.run.result;
    const RunAnalysis& a = run.analysis;
    table.add_row(
        {r.model, std::to_string(run.run.layers), std::to_string(r.params), device_label(r),
         fmt::format("{:.3f}{}", 100 * a.seconds_per_epoch, a.per_epoch_estimated ? "*" : ""),
         fmt::format("{:.4f}{}", r.step_ms.median,
                     run.run.utilisation && timings_contaminated(*run.run.utilisation) ? "!" : ""),
         std::isfinite(relative_spread(r.step_ms))
             ? fmt::format("{:.1f}%", 100.0 * relative_spread(r.step_ms))
             : std::string("-"),
         fmt::format("{:.1f}", r.gflops),
         a.peak_fraction ? fmt::format("{:.1f}%", 100 * *a.peak_fraction) : std::string("n/a"),
         !r.epochs.empty() && std::isfinite(r.final_train_error)
             ? fmt::format("{:.2f}%{}", r.final_train_error,
                           r.resumed_differently.empty() ? "" : "~")
             : std::string("-"),
         std::isfinite(r.final_test_accuracy) ? fmt::format("{:.2f}%", r.final_test_accuracy)
                                              : std::string("-")});
  }
  return table.render();
}

}  // namespace

std::string summary_text(const Report& report, const std::filesystem::path& out, bool stopped) {
  std::string s = runs_table(report);
  // The answer first, then the tables and notes it stands on.
  if (report.verdict) s = verdict_text(*report.verdict).substr(1) + "\n" + s;
  bool estimated = false;
  for (const ReportRun& run : report.runs) estimated |= run.analysis.per_epoch_estimated;
  if (estimated) s += "* from the median step times the steps per epoch (--steps)\n";
  s += "spread: p10 to p90 of the step times, as a share of the median\n";
  for (const ReportRun& run : report.runs) {
    if (!run.run.utilisation) continue;
    const TrainResult& r = run.run.result;
    const std::string warning =
        contamination_warning(*run.run.utilisation, r.model + " on " + r.device.id,
                              r.device.kind == DeviceKind::Cpu ? r.device.threads : 0);
    if (!warning.empty()) s += "! " + terminal_safe(warning) + "\n";
  }
  for (const ReportRun& run : report.runs) {
    const TrainResult& r = run.run.result;
    if (r.resumed_differently.empty()) continue;
    s += fmt::format("~ {} on {}: not bit-identical to an uninterrupted run: {}\n",
                     terminal_safe(r.model), r.device.id, terminal_safe(r.resumed_differently));
  }
  for (const DevicePeaks& p : report.peaks) {
    // In the precision it was probed at (a cpu:bf16 backend's is its bf16 peak).
    s += fmt::format("peak of {}: {:.1f} GFLOP/s {} matmul, {:.1f} GB/s (probed {}{})\n",
                     terminal_safe(p.device), p.matmul_gflops,
                     p.precision.empty() ? "f32" : terminal_safe(p.precision), p.bandwidth_gbs,
                     terminal_safe(p.probed), p.cached ? ", cached" : "");
  }
  for (const ReportRun& run : report.runs) {
    if (run.analysis.peak_fraction && *run.analysis.peak_fraction > 1.05) {
      s += fmt::format(
          "note: {} on {} reached {:.0f}% of the peak: the peak was probed on a busier machine; "
          "`crossover devices --reprobe` measures it again\n",
          terminal_safe(run.run.result.model), terminal_safe(run.run.result.device.id),
          100 * *run.analysis.peak_fraction);
      break;
    }
  }
  for (const ReportRun& run : report.runs) {
    const TrainResult& r = run.run.result;
    if (r.resumed_at_step > 0) {
      s += fmt::format(
          "note: {} on {} resumed from its checkpoint at step {}: its step times come from both "
          "processes, its utilisation from the last one\n",
          terminal_safe(r.model), terminal_safe(device_label(r)), r.resumed_at_step);
    }
  }
  if (report.sweep && !report.sweep->scaling.empty()) s += scaling_text(report.sweep->scaling);
  if (report.advice) {
    s += '\n';
    s += advice_text(*report.advice);
  }
  s += fmt::format("\nreport: {} (and results.json, results.csv){}\n",
                   terminal_safe((out / "report.html").string()),
                   stopped ? " (interrupted: partial)" : "");
  return s;
}

std::string scaling_text(const std::vector<ScalingPoint>& points) {
  auto ms = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.3f} ms", v); };
  Table t({"ranks", "step", "samples/s", "communicate", "summed per step", "bus bandwidth",
           "efficiency"});
  for (const ScalingPoint& p : points) {
    t.add_row(
        {std::to_string(p.ranks), ms(p.step_ms), fmt::format("{:.0f}", p.samples_per_second),
         ms(p.communicate_ms),
         p.reduced_bytes > 0 ? byte_size(static_cast<double>(p.reduced_bytes)) : std::string("-"),
         std::isnan(p.bus_gbs) ? std::string("-") : fmt::format("{:.2f} GB/s", p.bus_gbs),
         std::isnan(p.efficiency) ? std::string("-") : fmt::format("{:.1f}%", 100 * p.efficiency)});
  }
  return "\nScaling across ranks (the same global batch; efficiency: throughput against that "
         "many times one rank's):\n" +
         t.render();
}

std::string predictions_text(const Report& report) {
  if (report.predictions.empty()) return "";
  Table t({"device", "step (predicted)", "expected error (median, worst)", "from", "bound",
           "measured", "error"});
  for (const DevicePrediction& p : report.predictions) {
    t.add_row({p.name, fmt::format("{:.4f} ms", p.step.seconds * 1e3),
               p.expected_error
                   ? fmt::format(
                         "{}±{:.0f}%{}", p.expected_at_least ? "not validated, >= " : "",
                         100 * *p.expected_error,
                         p.expected_worst ? fmt::format(", {:.0f}%", 100 * *p.expected_worst) : "")
                   : std::string(p.profile.empty() ? "-" : "unknown"),
               p.profile.empty()
                   ? std::string(p.lower_bound ? "roofline (lower bound)" : "roofline")
                   : p.profile,
               p.step.bound,
               p.measured_s ? fmt::format("{:.4f} ms", *p.measured_s * 1e3) : std::string("-"),
               p.measured_s
                   ? fmt::format("{:+.0f}%", 100 * (p.step.seconds - *p.measured_s) / *p.measured_s)
                   : std::string("-")});
  }
  return fmt::format("\nPredicted step times ({}):\n{}{}",
                     terminal_safe(report.predictions.front().model), t.render(),
                     validation_text(report.validation));
}

std::string validation_text(const std::vector<ValidationRow>& rows) {
  if (rows.empty()) return "";
  Table t({"device", "predicted from", "models", "median |error|", "worst |error|", "worst model",
           "runs moved"});
  for (const ValidationRow& r : rows) {
    if (r.entries.empty()) {
      t.add_row({r.device, r.how, "-", "unmeasured", "", r.unmeasured, ""});
      continue;
    }
    const auto worst = std::max_element(
        r.entries.begin(), r.entries.end(),
        [](const auto& a, const auto& b) { return std::abs(a.error()) < std::abs(b.error()); });
    t.add_row({r.device, r.how, std::to_string(r.entries.size()),
               fmt::format("{:.1f}%", 100 * r.median_abs),
               fmt::format("{:.1f}%", 100 * r.worst_abs),
               fmt::format("{} ({:+.0f}%)", worst->model, 100 * worst->error()),
               r.spread > 0 ? fmt::format("{:.1f}%", 100 * r.spread) : std::string("-")});
  }
  return fmt::format(
      "Expected error: predictions against measurements of the built-in models on the devices "
      "crossover has profiled (data/profiles/; `crossover validate` measures this machine):\n{}",
      t.render());
}

namespace {

// The data-parallel runs of a cost table: on all of an instance's devices, and across several
// instances.
std::string scale_out_text(const CostTable& c) {
  std::string s;
  Table scale({"instance", "all its devices", "link", "step", "efficiency", "run time", "on demand",
               "one device"});
  bool scaled = false;
  for (const CostTable::Instance& i : c.instances) {
    if (!i.scale_out) continue;
    const CostTable::Instance::ScaleOut& x = *i.scale_out;
    scaled = true;
    scale.add_row({i.provider + " " + i.name, fmt::format("{}x {}", x.devices, i.device),
                   fmt::format("{}, {:.0f} GB/s", x.link, x.link_gbs), duration(x.step_s),
                   fmt::format("{:.0f}%", 100 * x.efficiency), hours(x.run_hours),
                   usd(x.on_demand_usd), hours(i.run_hours)});
  }
  if (scaled) {
    s += "Data-parallel on all of an instance's devices (predicted: each device's slice of the "
         "batch, plus the ring all-reduce of the gradients over the link that backward does not "
         "hide; crossover runs it itself: mpirun -np N crossover train --device cuda --reduce "
         "nccl, not yet measured on more than one GPU):\n";
    s += scale.render();
  }
  Table across({"instances", "devices", "network", "step", "all-reduce", "efficiency", "run time",
                "on demand", "one device"});
  bool across_any = false;
  for (const CostTable::Instance& i : c.instances) {
    for (const CostTable::Instance::ScaleOut& x : i.across) {
      across_any = true;
      across.add_row({fmt::format("{}x {} {}", x.instances, i.provider, i.name),
                      fmt::format("{}x {}", x.devices, i.device),
                      fmt::format("{}, {:.0f} Gbit/s", x.network, x.network_gbit),
                      duration(x.step_s), duration(x.allreduce_s),
                      fmt::format("{:.0f}%", 100 * x.efficiency), hours(x.run_hours),
                      usd(x.on_demand_usd), hours(i.run_hours)});
    }
  }
  if (across_any) {
    s += "Data-parallel across several instances (predicted as above, the ring crossing between "
         "the instances over their network at its rated speed: a lower bound on the all-reduce; "
         "not measured on a cloud):\n";
    s += across.render();
  }
  return s;
}

}  // namespace

std::string cost_text(const CostTable& c) {
  std::string s = fmt::format("\nCost of {} epochs of {} ({} steps each):\n", c.epochs,
                              terminal_safe(c.model), c.steps_per_epoch);
  for (const CostTable::Local& l : c.local) {
    s += fmt::format("  here, on {}: {} (measured)\n", terminal_safe(l.device), hours(l.run_hours));
  }
  Table inst({"provider", "instance", "device", "$/h", "run time", "on demand", "spot", "time"});
  for (const CostTable::Instance& i : c.instances) {
    inst.add_row({i.provider, i.name,
                  fmt::format("{}{}", i.device_count > 1 ? fmt::format("{}x ", i.device_count) : "",
                              i.device),
                  fmt::format("{:.3f}", i.on_demand_usd_per_hour), hours(i.run_hours),
                  usd(i.on_demand_usd), usd(i.spot_usd), i.predicted ? "predicted" : "measured"});
  }
  s += inst.render();
  s += scale_out_text(c);
  Table own({"owned device", "price", "capital $/h", "power $/h", "run time", "per run", "time"});
  for (const CostTable::Owned& o : c.ownership) {
    own.add_row({o.name, usd(o.price_usd), fmt::format("{:.4f}", o.hourly_capital_usd),
                 fmt::format("{:.4f}", o.hourly_power_usd), hours(o.run_hours), usd(o.run_usd),
                 o.predicted ? "predicted" : "measured"});
  }
  s += own.render();
  Table be({"buy", "instead of renting", "break-even h/month", "payback"});
  bool other_devices = false;  // a pairing with another device: said under the table
  for (const CostTable::BuyOrRent& b : c.break_even) {
    other_devices |= !b.same_device;
    be.add_row({b.name, b.same_device ? b.instance : b.instance + " *",
                b.hours_per_month ? fmt::format("{:.0f}", *b.hours_per_month) : "never",
                b.payback_months ? fmt::format("{:.1f} months at {:.0f} h/month", *b.payback_months,
                                               b.at_hours_per_month)
                                 : "never"});
  }
  s += be.render();
  if (other_devices) {
    s += "* no instance in the catalog rents that device alone: compared with the single-device "
         "instance of its kind with the cheapest run, priced for the same work\n";
  }
  s += fmt::format(
      "Assumptions: owned hardware written off over {} years at {:.0f}% use, electricity "
      "${}/kWh, {} W host around a GPU; whole instances are billed even where a run uses one of "
      "their GPUs. Predicted times are roofline predictions (see report.html for their "
      "assumptions).\n",
      c.assumptions.lifetime_years, 100 * c.assumptions.utilisation,
      c.assumptions.electricity_usd_per_kwh, c.assumptions.host_power_w);
  return s;
}

std::string verdict_text(const GpuVerdict& v) {
  std::string s =
      v.trials > 0
          ? fmt::format("\nVerdict for {} trials of {} epochs each, fused ({}): {}\n", v.trials,
                        v.epochs, terminal_safe(v.model), terminal_safe(v.sentence))
          : fmt::format("\nVerdict for {} epochs of {}: {}\n", v.epochs, terminal_safe(v.model),
                        terminal_safe(v.sentence));
  if (!v.single_trial.empty()) s += "For one trial alone: " + terminal_safe(v.single_trial) + "\n";
  if (!v.crossover.empty()) s += terminal_safe(v.crossover) + "\n";
  if (!v.caution.empty())
    s += "! the time here is not to be trusted: " + terminal_safe(v.caution) + "\n";
  if (v.here_estimated) {
    s += "(the time here is the median step times the steps per epoch: no epoch completed within "
         "--steps)\n";
  }
  return s;
}

std::string advice_text(const std::vector<std::string>& advice) {
  std::string s;
  for (const std::string& line : advice) s += fmt::format("- {}\n", terminal_safe(line));
  return s;
}

std::string calibration_text(const std::vector<CalibrationRow>& rows, bool markdown) {
  if (rows.empty()) return "";
  const std::vector<std::string> header = {
      "prediction of", "held-out entries", "within stated worst",
      "stated median", "measured median",  "measured / stated",
      "holds"};
  std::vector<std::vector<std::string>> body;
  for (const CalibrationRow& c : rows) {
    body.push_back({prediction_kind_name(c.kind), std::to_string(c.entries),
                    fmt::format("{} ({:.0f}%)", c.covered, 100 * c.coverage()),
                    fmt::format("{:.1f}%", 100 * c.stated_median),
                    fmt::format("{:.1f}%", 100 * c.measured_median),
                    fmt::format("{:.2f}", c.median_ratio), c.holds() ? "yes" : "NO"});
  }
  if (markdown) {
    std::string md =
        fmt::format("| {} |\n|---|---:|---:|---:|---:|---:|---|\n", fmt::join(header, " | "));
    for (const auto& r : body) md += fmt::format("| {} |\n", fmt::join(r, " | "));
    return md;
  }
  Table t(header);
  for (auto& r : body) t.add_row(std::move(r));
  return fmt::format(
      "Calibration: each held-out entry (a model predicted on a device, its kernels not in the "
      "profile) against the error crossover states for its kind of prediction with that model "
      "left out; a stated error holds where at least 90% of the entries are within its worst and "
      "the median of measured / stated median is within 1.5x:\n{}",
      t.render());
}

std::string validation_markdown(const std::vector<ValidationRow>& rows) {
  std::string md =
      "| device | predicted from | model | predicted ms | measured ms | error |\n"
      "|---|---|---|---:|---:|---:|\n";
  for (const ValidationRow& r : rows) {
    if (r.entries.empty()) {
      md += fmt::format("| {} | {} | all | unmeasured | | {} |\n", r.device, r.how, r.unmeasured);
      continue;
    }
    for (const auto& e : r.entries) {
      md +=
          fmt::format("| {} | {} | {}{} | {:.4g} | {:.4g} | {:+.1f}% |\n", r.device, r.how, e.model,
                      e.unprofiled ? fmt::format(" ({} kernel(s) of a kind not in the profile: "
                                                 "their roofline)",
                                                 e.unprofiled)
                                   : "",
                      e.predicted_ms, e.measured_ms, 100 * e.error());
    }
    md += fmt::format(
        "| {} | {} | **median / worst** | | | **{:.1f}% / {:.1f}%**{} |\n", r.device, r.how,
        100 * r.median_abs, 100 * r.worst_abs,
        r.spread > 0 ? fmt::format(" (runs moved by up to {:.1f}%)", 100 * r.spread) : "");
  }
  return md;
}

}  // namespace xo

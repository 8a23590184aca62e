// report.html's sections on what each run measured: the results tables, the device peaks with the
// fraction of them each run achieved, the time split of a step, and the per-layer profile.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/format.h"
#include "report/html_sections.h"
#include "report/svg.h"

namespace xo::html {
namespace {

// The training phases' colours, apart from the devices'.
struct Phase {
  const char* key;
  const char* colour;
};
constexpr Phase kPhases[] = {
    {"data", "#9AA5B1"}, {"forward", "#4C78A8"}, {"backward", "#F58518"}, {"optimizer", "#54A24B"}};

// A phase's time per step in `p`, when it was timed.
std::optional<double> phase_ms(const StepPhases& p, std::string_view key) {
  if (key == "data") return p.data_ms;
  if (key == "forward") return p.forward_ms;
  if (key == "backward") return p.backward_ms;
  return p.optimizer_ms;
}

// The runs whose fraction of the peak is known, each with it.
std::vector<std::pair<const ReportRun*, double>> achieved_rows(const Report& report) {
  std::vector<std::pair<const ReportRun*, double>> rows;
  for (const ReportRun& r : report.runs) {
    const auto f = r.analysis.peak_fraction;
    if (f && std::isfinite(*f) && *f >= 0) rows.emplace_back(&r, *f);
  }
  return rows;
}

// A run's bar at `y`: its label, the bar to its fraction `f` of the peak (the achieved GFLOP/s
// in its tooltip), and the fraction written after it.
std::string achieved_bar(const ReportRun& run, double f, double y, const Scale& s,
                         const std::string& colour) {
  const double left = s.from;  // the bars start where the axis does
  const std::string label = run_label(run.run);
  const std::string shown = escape(fraction_percent(f));
  std::string out = fmt::format("<g class=\"run\" data-run=\"{}\">", escape(label));
  out += bar_row_label(y, label, colour);
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"><title>{}: {} of "
      "the matmul peak ({} GFLOP/s)</title></rect>",
      px(left), px(y + 4), px(std::max(0.0, s(f) - left)), px(kBarRow - 8), colour, escape(label),
      shown, escape(plain(finite(run.run.result.gflops))));
  return out + fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", px(s(f) + 6),
                           px(y + kBarRow / 2 + 4), shown);
}

// The fraction of the measured matmul peak each run achieved: a bar per run on a shared axis.
std::string achieved_chart(const Report& report, const DeviceColours& colours) {
  const std::vector<std::pair<const ReportRun*, double>> rows = achieved_rows(report);
  if (rows.empty()) return "";
  double max_fraction = 0;
  for (const auto& [run, f] : rows) max_fraction = std::max(max_fraction, f);
  constexpr double kTop = 8, kAxis = 40;
  const double height = kTop + static_cast<double>(rows.size()) * (kBarRow + kBarGap) + kAxis;
  const double left = kBarLabel, right = kBarWidth - kBarValue;
  const Scale s = make_scale(0, std::max(max_fraction, 1e-3), false, left, right, true);
  std::string out =
      svg_open("achieved", kBarWidth, height, "fraction of the measured matmul peak per run");
  const double axis_y = height - kAxis + 4;
  for (const Tick& t : linear_ticks(
           s, 5, [](double v) { return fmt::format("{}%", significant(v * 100, 3, true)); })) {
    out += vertical_line(s(t.value), kTop, axis_y, "major");
    out += text_at(s(t.value), axis_y + 15, "middle", t.label);
  }
  double y = kTop;
  for (const auto& [run, f] : rows) {
    out += achieved_bar(*run, f, y, s, colours(run->run.result.device.id));
    y += kBarRow + kBarGap;
  }
  out += axis_title((left + right) / 2, height - 4,
                    "achieved GFLOP/s as a fraction of the measured matmul peak (linear scale)");
  return out + "</svg>\n";
}

// The speed table's columns; the swept axis only where a run has one.
std::vector<Column> speed_columns(bool any_axis) {
  std::vector<Column> columns = {{"model"}, {"device"}};
  if (any_axis) columns.push_back({"axis"});
  for (const char* c : {"params", "layers", "batch", "step (median)", "step p10–p90", "spread",
                        "per 100 epochs", "GFLOP/s", "of peak"}) {
    columns.push_back({c, true});
  }
  return columns;
}

// A run's row of the speed table: its size, its step time and spread, and the rate it achieved.
std::vector<std::string> speed_row(const ReportRun& run, const DeviceColours& colours,
                                   bool any_axis) {
  const RunRecord& row = run.run;
  const TrainResult& r = row.result;
  std::vector<std::string> cells = {text_cell(r.model),
                                    device_cell(colours, r.device.id, device_label(r))};
  if (any_axis) {
    cells.push_back(row.axis.empty()
                        ? na()
                        : escape(row.axis) + " " + cell(significant(row.axis_value, 4, true)));
  }
  const auto p10 = finite(r.step_ms.p10), p90 = finite(r.step_ms.p90);
  cells.insert(
      cells.end(),
      {cell(exact_count(static_cast<double>(r.params))),
       cell(exact_count(static_cast<double>(row.layers))),
       cell(exact_count(static_cast<double>(r.batch))), cell(duration_ms(finite(r.step_ms.median))),
       cell(p10 && p90 ? duration_ms(p10) + " – " + duration_ms(p90) : std::string(kMissing)),
       cell(fraction_percent(finite(relative_spread(r.step_ms)))),
       cell(duration(finite(100 * run.analysis.seconds_per_epoch))), cell(plain(finite(r.gflops))),
       cell(fraction_percent(run.analysis.peak_fraction))});
  return cells;
}

// The outcome table's columns. The data description can be long: last, where it may wrap.
std::vector<Column> outcome_columns() {
  return {{"model"},
          {"device"},
          {"epochs", true},
          {"final loss", true},
          {"train error", true},
          {"test accuracy", true},
          {"peak RSS (MiB)", true},
          {"mean CPU", true},
          {"mean GPU", true},
          {"data"}};
}

// A run's row of the outcome table: what it learned, and the memory and processors it used.
std::vector<std::string> outcome_row(const ReportRun& run, const DeviceColours& colours) {
  const RunRecord& row = run.run;
  const TrainResult& r = row.result;
  // Without a completed epoch (a sweep capped by --steps) there is no final loss or error.
  const bool trained = !r.epochs.empty();
  const std::optional<Utilisation>& u = row.utilisation;
  return {text_cell(r.model),
          device_cell(colours, r.device.id, device_label(r)),
          cell(exact_count(static_cast<double>(epochs_completed(r)))),
          cell(plain(trained ? finite(r.final_loss) : std::nullopt, 4)),
          cell(percent(trained ? finite(r.final_train_error) : std::nullopt)),
          cell(percent(finite(r.final_test_accuracy))),
          cell(plain(finite(row.peak_rss_mib))),
          cell(percent(u ? u->mean_cpu_percent : std::nullopt)),
          cell(percent(u ? u->mean_gpu_percent : std::nullopt)),
          text_cell(r.data)};
}

// A profiled run's bar: the phases of its step that were timed, and their total.
struct PhaseRow {
  std::string label, colour;
  std::vector<std::pair<const Phase*, double>> parts;
  double total = 0;
};

// One bar per run whose profiled step has some time in it.
std::vector<PhaseRow> phase_rows(const Report& report, const DeviceColours& colours) {
  std::vector<PhaseRow> rows;
  for (const ReportRun& r : report.runs) {
    if (!r.analysis.phases) continue;
    PhaseRow row{run_label(r.run), colours(r.run.result.device.id), {}, 0};
    for (const Phase& p : kPhases) {
      const auto ms = phase_ms(*r.analysis.phases, p.key);
      if (ms && std::isfinite(*ms) && *ms > 0) {
        row.parts.emplace_back(&p, *ms);
        row.total += *ms;
      }
    }
    if (row.total > 0) rows.push_back(std::move(row));
  }
  return rows;
}

// A run's bar at `y`: its label, a segment per phase as wide as its share of the step (the share
// written inside where it fits), and the step's time after the bar.
std::string phase_bar(const PhaseRow& row, double y) {
  constexpr double kLeft = kBarLabel, kWidth = kBarWidth - kBarValue - kBarLabel;
  constexpr double kLabelMinPx = 44;  // a percentage fits inside the segment
  std::string out = fmt::format("<g class=\"run\" data-run=\"{}\">\n", escape(row.label));
  out += bar_row_label(y, row.label, row.colour);
  double x = kLeft;
  for (const auto& [phase, ms] : row.parts) {
    const double w = kWidth * ms / row.total;
    const std::string share = escape(percent(100 * ms / row.total));
    out += fmt::format(
        "<rect class=\"segment\" data-phase=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "fill=\"{}\"><title>{} · {}: {} per step ({})</title></rect>\n",
        phase->key, px(x), px(y + 3), px(w), px(kBarRow - 6), phase->colour, escape(row.label),
        phase->key, escape(duration_ms(ms)), share);
    if (w >= kLabelMinPx) {
      out +=
          fmt::format("<text class=\"inside\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                      px(x + w / 2), px(y + kBarRow / 2 + 4), share);
    }
    x += w;
  }
  return out + fmt::format("<text x=\"{}\" y=\"{}\">{} / step</text>\n</g>\n",
                           px(kLeft + kWidth + 8), px(y + kBarRow / 2 + 4),
                           escape(duration_ms(row.total)));
}

// The rows of a run's layer table: each layer's forward, backward and total time, its share of
// the step's, and the rate it achieved.
std::vector<std::vector<std::string>> layer_rows(const std::vector<LayerTime>& layers) {
  double total = 0;
  for (const LayerTime& l : layers)
    total += finite(l.forward_ms).value_or(0) + finite(l.backward_ms).value_or(0);
  std::vector<std::vector<std::string>> rows;
  for (const LayerTime& l : layers) {
    const auto f = finite(l.forward_ms), b = finite(l.backward_ms);
    const bool timed = f || b;
    const double sum = f.value_or(0) + b.value_or(0);
    std::string share = na();
    if (timed && total > 0) {
      const double p = 100 * sum / total;
      share = fmt::format("<div class=\"share\"><span style=\"width:{:.1f}%\"></span></div>{}", p,
                          escape(percent(p)));
    }
    rows.push_back({text_cell(l.name), cell(duration_ms(f)), cell(duration_ms(b)),
                    cell(timed ? duration_ms(sum) : std::string(kMissing)), share,
                    cell(plain(finite(l.gflops))), cell(fraction_percent(l.peak_fraction)),
                    text_cell(l.bound.value_or(""))});
  }
  return rows;
}

}  // namespace

// Two tables with the same rows: the speed of each run, then what it learned and used.
std::string runs_html(const Report& report, const DeviceColours& colours) {
  if (report.runs.empty()) return "";
  bool any_axis = false;
  for (const ReportRun& r : report.runs) any_axis |= !r.run.axis.empty();
  std::vector<std::vector<std::string>> speed, outcome;
  std::string busy;  // the runs whose timings other processes contaminated, one warning each
  std::string resumed;  // the runs not bit-identical to an uninterrupted run, one note each
  for (const ReportRun& run : report.runs) {
    speed.push_back(speed_row(run, colours, any_axis));
    outcome.push_back(outcome_row(run, colours));
    if (const TrainResult& r = run.run.result; !r.resumed_differently.empty()) {
      outcome.back().front() += " ~";
      resumed += "<p class=\"note\">~ " + escape(r.model + " on " + r.device.id) +
                 ": not bit-identical to an uninterrupted run: " + escape(r.resumed_differently) +
                 "</p>\n";
    }
    if (run.run.utilisation && timings_contaminated(*run.run.utilisation)) {
      speed.back().front() += " !";
      busy +=
          "<p class=\"note warning\">! " +
          escape(contamination_warning(
              *run.run.utilisation, run.run.result.model + " on " + run.run.result.device.id,
              run.run.result.device.kind == DeviceKind::Cpu ? run.run.result.device.threads : 0)) +
          "</p>\n";
    }
  }
  return "<h3>Speed</h3>\n" + html_table(speed_columns(any_axis), speed, "runs") + busy +
         "<p class=\"note\">Step times are medians over the timed steps; spread is p10 to p90 of "
         "them as a share of the median; GFLOP/s is achieved, against the device's measured matmul "
         "peak.</p>\n<h3>Training and resources</h3>\n" +
         html_table(outcome_columns(), outcome, "outcomes") + resumed +
         "<p class=\"note\">Train error is the percentage of the last epoch's samples "
         "misclassified while training. CPU % is the mean over all cores.</p>\n";
}

std::string peaks_html(const Report& report, const DeviceColours& colours) {
  std::vector<std::vector<std::string>> rows;
  for (const DevicePeaks& p : report.peaks) {
    rows.push_back({device_cell(colours, p.device), text_cell(p.name),
                    cell(plain(finite(p.matmul_gflops))), cell(plain(finite(p.bandwidth_gbs))),
                    text_cell(p.probed), p.cached ? "cached" : "probed now"});
  }
  std::string out;
  if (!rows.empty()) {
    out += html_table({{"device"},
                       {"name"},
                       {"matmul GFLOP/s", true},
                       {"bandwidth GB/s", true},
                       {"probed"},
                       {"source"}},
                      rows, "peaks");
  }
  out += achieved_chart(report, colours);
  return out;
}

// One 100% stacked bar per profiled run, under a legend of the phases.
std::string phases_html(const Report& report, const DeviceColours& colours) {
  const std::vector<PhaseRow> rows = phase_rows(report, colours);
  if (rows.empty()) return "";
  std::vector<LegendItem> items;
  for (const Phase& p : kPhases)
    items.push_back({p.colour, p.key, false, LegendItem::Glyph::kBlock});
  auto [legend_svg, legend_height] = legend(items, kBarLabel, 4, kBarWidth - kBarLabel);
  const double top = legend_height + 14;
  const double height = top + static_cast<double>(rows.size()) * (kBarRow + kBarGap) + 4;
  std::string out = svg_open("phases", kBarWidth, height, "time split of a training step per run");
  out += legend_svg;
  double y = top;
  for (const PhaseRow& row : rows) {
    out += phase_bar(row, y);
    y += kBarRow + kBarGap;
  }
  out += "</svg>\n";
  return out +
         "<p class=\"note\">Each bar is one profiled step (synchronised, unsharded) split into its "
         "phases; hover a segment for its time.</p>\n";
}

// A table per profiled run.
std::string layers_html(const Report& report) {
  std::string out;
  int shown = 0;
  for (const ReportRun& r : report.runs) {
    const std::vector<LayerTime>& layers = r.analysis.layer_times;
    if (layers.empty()) continue;
    // The first few runs open; the rest fold (a sweep has one table per model and device).
    constexpr int kOpenTables = 3;
    out += fmt::format("<details{}><summary>{}</summary>\n", shown++ < kOpenTables ? " open" : "",
                       escape(run_label(r.run)));
    out += html_table({{"layer"},
                       {"forward", true},
                       {"backward", true},
                       {"total", true},
                       {"share", true},
                       {"GFLOP/s", true},
                       {"of peak", true},
                       {"bound"}},
                      layer_rows(layers), "layers");
    out += "</details>\n";
  }
  if (out.empty()) return "";
  return out +
         "<p class=\"note\">Bound: which term of the roofline the layer's time is closest to at "
         "the measured peaks — FLOPs, bytes, or overhead (far above both: fixed costs of dispatch "
         "and synchronisation).</p>\n";
}

}  // namespace xo::html

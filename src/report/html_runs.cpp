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

std::string achieved_chart(const Report& report, const DeviceColours& colours) {
  std::vector<std::pair<const ReportRun*, double>> rows;
  double max_fraction = 0;
  for (const ReportRun& r : report.runs) {
    const auto f = r.analysis.peak_fraction;
    if (f && std::isfinite(*f) && *f >= 0) {
      rows.emplace_back(&r, *f);
      max_fraction = std::max(max_fraction, *f);
    }
  }
  if (rows.empty()) return "";
  constexpr double kTop = 8, kAxis = 40;
  const double height = kTop + static_cast<double>(rows.size()) * (kBarRow + kBarGap) + kAxis;
  const double left = kBarLabel, right = kBarWidth - kBarValue;
  const Scale s = make_scale(0, std::max(max_fraction, 1e-3), false, left, right, true);
  std::string out =
      svg_open("achieved", kBarWidth, height, "fraction of the measured matmul peak per run");
  const double axis_y = height - kAxis + 4;
  for (const Tick& t : linear_ticks(
           s, 5, [](double v) { return fmt::format("{}%", significant(v * 100, 3, true)); })) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"major\"/><text x=\"{0}\" "
        "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(s(t.value)), px(kTop), px(axis_y), px(axis_y + 15), escape(t.label));
  }
  double y = kTop;
  for (const auto& [run, f] : rows) {
    const std::string label = run_label(run->run), colour = colours(run->run.result.device.id);
    const std::string shown = escape(fraction_percent(f));
    out += fmt::format("<g class=\"run\" data-run=\"{}\">", escape(label));
    out += bar_row_label(y, label, colour);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"><title>{}: {} of "
        "the matmul peak ({} GFLOP/s)</title></rect>",
        px(left), px(y + 4), px(std::max(0.0, s(f) - left)), px(kBarRow - 8), colour, escape(label),
        shown, escape(plain(finite(run->run.result.gflops))));
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", px(s(f) + 6),
                       px(y + kBarRow / 2 + 4), shown);
    y += kBarRow + kBarGap;
  }
  out += fmt::format(
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">achieved GFLOP/s as a "
      "fraction of the measured matmul peak (linear scale)</text>\n",
      px((left + right) / 2), px(height - 4));
  return out + "</svg>\n";
}

}  // namespace

// Two tables with the same rows: the speed of each run, then what it learned and used.
std::string runs_html(const Report& report, const DeviceColours& colours) {
  if (report.runs.empty()) return "";
  bool any_axis = false;
  for (const ReportRun& r : report.runs) any_axis |= !r.run.axis.empty();
  std::vector<Column> speed_columns = {{"model"}, {"device"}};
  if (any_axis) speed_columns.push_back({"axis"});
  for (const char* c : {"params", "layers", "batch", "step (median)", "step p10–p90", "step CV",
                        "per 100 epochs", "GFLOP/s", "of peak"}) {
    speed_columns.push_back({c, true});
  }
  // The data description can be long: last, where it may wrap.
  const std::vector<Column> outcome_columns = {{"model"},
                                               {"device"},
                                               {"epochs", true},
                                               {"final loss", true},
                                               {"train error", true},
                                               {"test accuracy", true},
                                               {"peak RSS (MiB)", true},
                                               {"mean CPU", true},
                                               {"mean GPU", true},
                                               {"data"}};
  std::vector<std::vector<std::string>> speed, outcome;
  for (const ReportRun& run : report.runs) {
    const RunRecord& row = run.run;
    const TrainResult& r = row.result;
    const std::string model_cell = text_cell(r.model);
    const std::string device_html = device_cell(colours, r.device.id);
    std::vector<std::string> cells = {model_cell, device_html};
    if (any_axis) {
      cells.push_back(row.axis.empty()
                          ? na()
                          : escape(row.axis) + " " + cell(significant(row.axis_value, 4, true)));
    }
    const auto p10 = finite(r.step_ms.p10), p90 = finite(r.step_ms.p90);
    cells.push_back(cell(exact_count(static_cast<double>(r.params))));
    cells.push_back(cell(exact_count(static_cast<double>(row.layers))));
    cells.push_back(cell(exact_count(static_cast<double>(r.batch))));
    cells.push_back(cell(duration_ms(finite(r.step_ms.median))));
    cells.push_back(
        cell(p10 && p90 ? duration_ms(p10) + " – " + duration_ms(p90) : std::string(kMissing)));
    cells.push_back(cell(fraction_percent(finite(r.step_ms.cv))));
    cells.push_back(cell(duration(finite(100 * run.analysis.seconds_per_epoch))));
    cells.push_back(cell(plain(finite(r.gflops))));
    cells.push_back(cell(fraction_percent(run.analysis.peak_fraction)));
    speed.push_back(std::move(cells));
    // Without a completed epoch (a sweep capped by --steps) there is no final loss or error.
    const bool trained = !r.epochs.empty();
    const std::optional<Utilisation>& u = row.utilisation;
    outcome.push_back(
        {model_cell, device_html, cell(exact_count(static_cast<double>(r.epochs.size()))),
         cell(plain(trained ? finite(r.final_loss) : std::nullopt, 4)),
         cell(percent(trained ? finite(r.final_train_error) : std::nullopt)),
         cell(percent(finite(r.final_test_accuracy))), cell(plain(finite(row.peak_rss_mib))),
         cell(percent(u ? u->mean_cpu_percent : std::nullopt)),
         cell(percent(u ? u->mean_gpu_percent : std::nullopt)), text_cell(r.data)});
  }
  return "<h3>Speed</h3>\n" + html_table(speed_columns, speed, "runs") +
         "<p class=\"note\">Step times are medians over the timed steps; CV is their coefficient "
         "of variation; GFLOP/s is achieved, against the device's measured matmul "
         "peak.</p>\n<h3>Training and resources</h3>\n" +
         html_table(outcome_columns, outcome, "outcomes") +
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

// One 100% stacked bar per profiled run.
std::string phases_html(const Report& report, const DeviceColours& colours) {
  struct Row {
    std::string label, colour;
    std::vector<std::pair<const Phase*, double>> parts;
    double total = 0;
  };
  std::vector<Row> rows;
  for (const ReportRun& r : report.runs) {
    if (!r.analysis.phases) continue;
    Row row{run_label(r.run), colours(r.run.result.device.id), {}, 0};
    for (const Phase& p : kPhases) {
      const auto ms = phase_ms(*r.analysis.phases, p.key);
      if (ms && std::isfinite(*ms) && *ms > 0) {
        row.parts.emplace_back(&p, *ms);
        row.total += *ms;
      }
    }
    if (row.total > 0) rows.push_back(std::move(row));
  }
  if (rows.empty()) return "";
  std::vector<LegendItem> items;
  for (const Phase& p : kPhases)
    items.push_back({p.colour, p.key, false, LegendItem::Glyph::kBlock});
  auto [legend_svg, legend_height] = legend(items, kBarLabel, 4, kBarWidth - kBarLabel);
  const double top = legend_height + 14;
  const double height = top + static_cast<double>(rows.size()) * (kBarRow + kBarGap) + 4;
  const double left = kBarLabel, width = kBarWidth - kBarValue - kBarLabel;
  std::string out = svg_open("phases", kBarWidth, height, "time split of a training step per run");
  out += legend_svg;
  double y = top;
  for (const Row& row : rows) {
    out += fmt::format("<g class=\"run\" data-run=\"{}\">\n", escape(row.label));
    out += bar_row_label(y, row.label, row.colour);
    double x = left;
    for (const auto& [phase, ms] : row.parts) {
      const double w = width * ms / row.total;
      const std::string share = escape(percent(100 * ms / row.total));
      out += fmt::format(
          "<rect class=\"segment\" data-phase=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
          "fill=\"{}\"><title>{} · {}: {} per step ({})</title></rect>\n",
          phase->key, px(x), px(y + 3), px(w), px(kBarRow - 6), phase->colour, escape(row.label),
          phase->key, escape(duration_ms(ms)), share);
      constexpr double kLabelMinPx = 44;  // a percentage fits inside the segment
      if (w >= kLabelMinPx) {
        out += fmt::format(
            "<text class=\"inside\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            px(x + w / 2), px(y + kBarRow / 2 + 4), share);
      }
      x += w;
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{} / step</text>\n</g>\n", px(left + width + 8),
                       px(y + kBarRow / 2 + 4), escape(duration_ms(row.total)));
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
    const std::vector<LayerProfile>& layers = r.analysis.layers_profile;
    if (layers.empty()) continue;
    double total = 0;
    for (const LayerProfile& l : layers)
      total += finite(l.forward_ms).value_or(0) + finite(l.backward_ms).value_or(0);
    std::vector<std::vector<std::string>> rows;
    for (const LayerProfile& l : layers) {
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
                      rows, "layers");
    out += "</details>\n";
  }
  if (out.empty()) return "";
  return out +
         "<p class=\"note\">Bound: which term of the roofline the layer's time is closest to at "
         "the measured peaks — FLOPs, bytes, or overhead (far above both: fixed costs of dispatch "
         "and synchronisation).</p>\n";
}

}  // namespace xo::html

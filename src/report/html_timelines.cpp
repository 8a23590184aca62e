// report.html's utilisation section: for a few runs, small multiples of CPU, memory and GPU use
// over the run's time, sharing the time axis.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/format.h"
#include "report/html_sections.h"
#include "report/svg.h"

namespace xo::html {
namespace {

// A metric's values, one per sample; missing where the sample had none (or not a finite one).
using Series = std::vector<std::optional<double>>;

Series finite_series(const std::vector<double>& values) {
  Series out;
  out.reserve(values.size());
  for (const double v : values) out.push_back(finite(v));
  return out;
}

Series finite_series(const std::vector<std::optional<double>>& values) {
  Series out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(v ? finite(*v) : std::nullopt);
  return out;
}

struct Metric {
  const char* key;
  const char* label;
  bool percent;
  Series (*values)(const Utilisation& u);
};
constexpr Metric kMetrics[] = {
    {"cpu_percent", "CPU % (mean of all cores)", true,
     [](const Utilisation& u) { return finite_series(u.cpu_percent); }},
    {"rss_mib", "resident memory (MiB)", false,
     [](const Utilisation& u) { return finite_series(u.rss_mib); }},
    {"gpu_percent", "GPU %", true,
     [](const Utilisation& u) { return finite_series(u.gpu_percent); }},
    {"gpu_memory_mib", "GPU memory (MiB)", false,
     [](const Utilisation& u) { return finite_series(u.gpu_memory_mib); }},
    {"gpu_power_w", "GPU power (W)", false,
     [](const Utilisation& u) { return finite_series(u.gpu_power_w); }}};

// The number of samples: the longest of the metrics' series.
size_t samples_of(const Utilisation& u) {
  return std::max({u.cpu_percent.size(), u.rss_mib.size(), u.gpu_percent.size(),
                   u.gpu_memory_mib.size(), u.gpu_power_w.size()});
}

// The sample times: t_s, else multiples of interval_s, else the sample index.
Series sample_times(const Utilisation& u, size_t n) {
  Series t(n);
  const auto interval = finite(u.interval_s);
  for (size_t i = 0; i < n; ++i) {
    if (i < u.t_s.size())
      t[i] = finite(u.t_s[i]);
    else
      t[i] = interval ? static_cast<double>(i) * *interval : static_cast<double>(i);
  }
  return t;
}

double timeline_length(const RunRecord& run) {
  if (!run.utilisation) return 0;
  const size_t n = samples_of(*run.utilisation);
  double longest = 0;
  for (const auto& t : sample_times(*run.utilisation, n))
    longest = std::max(longest, t.value_or(0));
  return n > 1 ? std::max(longest, 1e-9) : 0;
}

// A panel's mean or maximum as its title shows it.
std::string panel_figure(const Metric& m, double v) {
  return escape(m.percent ? percent(v) : significant(v, 3));
}

// The chart's layout in SVG units: one panel per metric, kPanel tall under a title line of kTitle
// and kGap apart, above the time axis that they share.
constexpr double kWidth = 900, kLeft = 64, kRight = 20, kPanel = 64, kTitle = 22, kGap = 10,
                 kAxis = 40;
constexpr double kPlotRight = kWidth - kRight;

// A metric's panel: its value at each sample, with their mean and maximum over the samples that
// have a time.
struct Panel {
  const Metric* metric;
  Series values;
  double max = 0, mean = 0;
};

// The panel of `m` at the sample times `t`, or nothing when no timed sample has a value of it.
std::optional<Panel> panel_of(const Metric& m, const Utilisation& u, const Series& t) {
  const Series values = m.values(u);
  Panel p{&m, Series(t.size()), 0, 0};
  size_t count = 0;
  for (size_t i = 0; i < values.size() && i < t.size(); ++i) {
    p.values[i] = values[i];
    if (p.values[i] && t[i]) {
      p.max = std::max(p.max, *p.values[i]);
      p.mean += *p.values[i];
      ++count;
    }
  }
  if (count == 0) return std::nullopt;
  p.mean /= static_cast<double>(count);
  return p;
}

// The time axis, from the run's start (even when the first sample came later) to the last
// sample; nothing when no sample has a time.
std::optional<Scale> time_scale(const Series& t) {
  double t_min = INFINITY, t_max = -INFINITY;
  for (const auto& v : t) {
    if (v) {
      t_min = std::min(t_min, *v);
      t_max = std::max(t_max, *v);
    }
  }
  if (!std::isfinite(t_min)) return std::nullopt;
  Scale sx;
  sx.lo = std::min(t_min, 0.0);
  sx.hi = t_max <= sx.lo ? sx.lo + 1 : t_max;
  sx.from = kLeft;
  sx.to = kPlotRight;
  return sx;
}

// A panel's value axis from zero: to 100 for a percentage that stays within it, else to a round
// number just above the maximum.
Scale value_scale(const Panel& p, double top) {
  Scale sy;
  sy.lo = 0;
  sy.hi = p.metric->percent && p.max <= 100 ? 100 : nice_ceiling(p.max * 1.02);
  sy.from = top + kPanel;
  sy.to = top;
  return sy;
}

// A panel's grid: a line at each time tick, and three labelled values, which is all a short panel
// has room for: zero, the middle and the top.
std::string panel_grid(const Scale& sx, const Scale& sy, const std::vector<Tick>& x_ticks,
                       double top, const std::string& unit) {
  std::string out;
  for (const Tick& tk : x_ticks) out += vertical_line(sx(tk.value), top, top + kPanel, "minor");
  for (const double v : {0.0, sy.hi / 2, sy.hi}) {
    out += horizontal_line(sy(v), kLeft, kPlotRight, "major");
    out += text_at(kLeft - 6, sy(v) + 4, "end", significant(v, 3, true) + unit);
  }
  return out;
}

// A panel's line and the area under it, as SVG path data.
struct PanelPaths {
  std::string line, area;
};
using Segment = std::vector<std::pair<double, double>>;  // (x, y) in SVG units

// `segment` appended to the line, and its area down to `bottom` to the area.
void add_segment(const Segment& segment, double bottom, PanelPaths& paths) {
  if (segment.empty()) return;
  auto line = std::back_inserter(paths.line), area = std::back_inserter(paths.area);
  for (size_t i = 0; i < segment.size(); ++i)
    fmt::format_to(line, "{}{:.1f},{:.1f}", i ? 'L' : 'M', segment[i].first, segment[i].second);
  fmt::format_to(area, "M{:.1f},{:.1f}", segment.front().first, bottom);
  for (const auto& [x, y] : segment) fmt::format_to(area, "L{:.1f},{:.1f}", x, y);
  fmt::format_to(area, "L{:.1f},{:.1f}Z", segment.back().first, bottom);
}

// The panel's values as paths. Gaps (samples without a value) split the line into segments, and
// each gets its own area; a value above the axis is drawn at its top.
PanelPaths panel_paths(const Panel& p, const Series& t, const Scale& sx, const Scale& sy,
                       double bottom) {
  PanelPaths paths;
  Segment segment;
  for (size_t i = 0; i < t.size(); ++i) {
    if (p.values[i] && t[i]) {
      segment.emplace_back(sx(*t[i]), sy(std::clamp(*p.values[i], sy.lo, sy.hi)));
    } else {
      add_segment(segment, bottom, paths);
      segment.clear();
    }
  }
  add_segment(segment, bottom, paths);
  return paths;
}

// One metric's panel with its top at `top`: the title with the mean and maximum, the grid, the
// area and the line of its values, and the frame.
std::string panel_svg(const Panel& p, const Series& t, const Scale& sx,
                      const std::vector<Tick>& x_ticks, double top, const std::string& colour) {
  const double bottom = top + kPanel;
  const Scale sy = value_scale(p, top);
  const std::string mean = panel_figure(*p.metric, p.mean), max = panel_figure(*p.metric, p.max);
  std::string out = fmt::format(
      "<text class=\"panel-title\" x=\"{}\" y=\"{}\">{} <tspan class=\"muted\">mean {}, max "
      "{}</tspan></text>\n",
      px(kLeft), px(top - 7), p.metric->label, mean, max);
  out += panel_grid(sx, sy, x_ticks, top, p.metric->percent ? "%" : "");
  const PanelPaths paths = panel_paths(p, t, sx, sy, bottom);
  out += fmt::format("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.14\" stroke=\"none\"/>\n",
                     paths.area, colour);
  out += fmt::format(
      "<path class=\"line\" data-metric=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
      "stroke-width=\"1.8\"><title>{}: mean {}, max {}</title></path>\n",
      p.metric->key, paths.line, colour, p.metric->label, mean, max);
  return out + plot_frame(kLeft, top, kPlotRight - kLeft, kPanel);
}

// The time axis under the panels, its labels at `y`: shared by them all, so drawn once.
std::string time_axis_svg(const Scale& sx, const std::vector<Tick>& x_ticks, double y,
                          double height) {
  std::string out;
  for (const Tick& tk : x_ticks) out += text_at(sx(tk.value), y + 6, "middle", tk.label);
  return out + axis_title((kLeft + kPlotRight) / 2, height - 6,
                          "time since the run started, s (linear scale)");
}

// A run's utilisation: a panel for each metric it sampled, over one time axis.
std::string timeline_chart(const RunRecord& run, const std::string& colour) {
  if (!run.utilisation) return "";
  const Utilisation& u = *run.utilisation;
  const Series t = sample_times(u, samples_of(u));
  std::vector<Panel> panels;
  for (const Metric& m : kMetrics) {
    if (auto panel = panel_of(m, u, t)) panels.push_back(std::move(*panel));
  }
  const std::optional<Scale> sx = time_scale(t);
  if (panels.empty() || !sx) return "";

  const double height = static_cast<double>(panels.size()) * (kTitle + kPanel + kGap) + kAxis;
  const std::string label = run_label(run);
  std::string out = svg_open("timeline", kWidth, height, "utilisation over time: " + label,
                             fmt::format(" data-run=\"{}\"", escape(label)));
  const std::vector<Tick> x_ticks =
      linear_ticks(*sx, 8, [](double v) { return significant(v, 3, true); });
  double y = 0;  // the top of the next panel's title
  for (const Panel& p : panels) {
    const double top = y + kTitle;
    out += panel_svg(p, t, *sx, x_ticks, top, colour);
    y = top + kPanel + kGap;
  }
  return out + time_axis_svg(*sx, x_ticks, y, height) + "</svg>\n";
}

// The runs with a timeline, as (length, index in `runs`), the longest first.
std::vector<std::pair<double, size_t>> timeline_candidates(const std::vector<ReportRun>& runs) {
  std::vector<std::pair<double, size_t>> candidates;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (const double length = timeline_length(runs[i].run); length > 0)
      candidates.emplace_back(length, i);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  return candidates;
}

// The runs whose timelines are drawn, in the runs' order: at most kMaxTimelines, the longest
// timeline of each device first, then the longest others.
std::vector<size_t> pick_timelines(const std::vector<std::pair<double, size_t>>& candidates,
                                   const std::vector<ReportRun>& runs) {
  constexpr size_t kMaxTimelines = 6;
  std::vector<size_t> picked;
  std::vector<std::string> devices;
  for (const auto& [length, i] : candidates) {
    const std::string& device = runs[i].run.result.device.id;
    if (picked.size() < kMaxTimelines &&
        std::find(devices.begin(), devices.end(), device) == devices.end()) {
      devices.push_back(device);
      picked.push_back(i);
    }
  }
  for (const auto& [length, i] : candidates) {
    if (picked.size() < kMaxTimelines && std::find(picked.begin(), picked.end(), i) == picked.end())
      picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

}  // namespace

std::string timelines_html(const Report& report, const DeviceColours& colours) {
  const std::vector<ReportRun>& runs = report.runs;
  const std::vector<std::pair<double, size_t>> candidates = timeline_candidates(runs);
  if (candidates.empty()) return "";
  const std::vector<size_t> picked = pick_timelines(candidates, runs);
  std::string out;
  for (const size_t i : picked) {
    const std::string colour = colours(runs[i].run.result.device.id);
    const std::string chart = timeline_chart(runs[i].run, colour);
    if (chart.empty()) continue;
    out += "<h3>" + swatch(colour) + escape(run_label(runs[i].run)) + "</h3>\n" + chart;
  }
  if (out.empty()) return "";
  if (candidates.size() > picked.size()) {
    out += fmt::format(
        "<p class=\"note\">Showing {} of {} runs with a timeline: the longest per device, then the "
        "longest others.</p>\n",
        picked.size(), candidates.size());
  }
  return out;
}

}  // namespace xo::html

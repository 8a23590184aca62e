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

std::string timeline_chart(const RunRecord& run, const std::string& colour) {
  if (!run.utilisation) return "";
  const Utilisation& u = *run.utilisation;
  const size_t n = samples_of(u);
  const Series t = sample_times(u, n);
  struct Panel {
    const Metric* metric;
    Series values;
    double max = 0, mean = 0;
  };
  std::vector<Panel> panels;
  for (const Metric& m : kMetrics) {
    const Series values = m.values(u);
    Panel p{&m, Series(n), 0, 0};
    size_t count = 0;
    for (size_t i = 0; i < values.size() && i < n; ++i) {
      p.values[i] = values[i];
      if (p.values[i] && t[i]) {
        p.max = std::max(p.max, *p.values[i]);
        p.mean += *p.values[i];
        ++count;
      }
    }
    if (count == 0) continue;
    p.mean /= static_cast<double>(count);
    panels.push_back(std::move(p));
  }
  double t_min = INFINITY, t_max = -INFINITY;
  for (const auto& v : t) {
    if (v) {
      t_min = std::min(t_min, *v);
      t_max = std::max(t_max, *v);
    }
  }
  if (panels.empty() || !std::isfinite(t_min)) return "";
  t_min = std::min(t_min, 0.0);  // from the run's start, even when the first sample came later
  if (t_max <= t_min) t_max = t_min + 1;

  constexpr double kWidth = 900, kLeft = 64, kRight = 20, kPanel = 64, kTitle = 22, kGap = 10,
                   kAxis = 40;
  const double right = kWidth - kRight;
  const double height = static_cast<double>(panels.size()) * (kTitle + kPanel + kGap) + kAxis;
  const std::string label = run_label(run);
  std::string out = svg_open("timeline", kWidth, height, "utilisation over time: " + label,
                             fmt::format(" data-run=\"{}\"", escape(label)));
  Scale sx;
  sx.lo = t_min;
  sx.hi = t_max;
  sx.from = kLeft;
  sx.to = right;
  const std::vector<Tick> x_ticks =
      linear_ticks(sx, 8, [](double v) { return significant(v, 3, true); });
  double y0 = 0;
  for (const Panel& p : panels) {
    const double top = y0 + kTitle, bottom = top + kPanel;
    Scale sy;
    sy.lo = 0;
    sy.hi = p.metric->percent && p.max <= 100 ? 100 : nice_ceiling(p.max * 1.02);
    sy.from = bottom;
    sy.to = top;
    const std::string unit = p.metric->percent ? "%" : "";
    out += fmt::format(
        "<text class=\"panel-title\" x=\"{}\" y=\"{}\">{} <tspan class=\"muted\">mean {}, max "
        "{}</tspan></text>\n",
        px(kLeft), px(top - 7), p.metric->label, panel_figure(*p.metric, p.mean),
        panel_figure(*p.metric, p.max));
    for (const Tick& tk : x_ticks) {
      out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"minor\"/>",
                         px(sx(tk.value)), px(top), px(bottom));
    }
    // A short panel has room for three labels: zero, the middle and the top.
    for (const double v : {0.0, sy.hi / 2, sy.hi}) {
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"major\"/><text x=\"{3}\" "
          "y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
          px(kLeft), px(sy(v)), px(right), px(kLeft - 6), px(sy(v) + 4),
          escape(significant(v, 3, true) + unit));
    }
    // Gaps (samples without a value) split the line into segments; each gets its area.
    std::string line, area;
    std::vector<std::pair<double, double>> segment;
    auto flush = [&] {
      if (segment.empty()) return;
      auto out_line = std::back_inserter(line), out_area = std::back_inserter(area);
      for (size_t i = 0; i < segment.size(); ++i) {
        fmt::format_to(out_line, "{}{:.1f},{:.1f}", i ? 'L' : 'M', segment[i].first,
                       segment[i].second);
      }
      fmt::format_to(out_area, "M{:.1f},{:.1f}", segment.front().first, bottom);
      for (const auto& [x, y] : segment) fmt::format_to(out_area, "L{:.1f},{:.1f}", x, y);
      fmt::format_to(out_area, "L{:.1f},{:.1f}Z", segment.back().first, bottom);
      segment.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      if (p.values[i] && t[i])
        segment.emplace_back(sx(*t[i]), sy(std::clamp(*p.values[i], sy.lo, sy.hi)));
      else
        flush();
    }
    flush();
    out += fmt::format("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.14\" stroke=\"none\"/>\n", area,
                       colour);
    out += fmt::format(
        "<path class=\"line\" data-metric=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"1.8\"><title>{}: mean {}, max {}</title></path>\n",
        p.metric->key, line, colour, p.metric->label, panel_figure(*p.metric, p.mean),
        panel_figure(*p.metric, p.max));
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n",
                       px(kLeft), px(top), px(right - kLeft), px(kPanel));
    y0 = bottom + kGap;
  }
  for (const Tick& tk : x_ticks) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       px(sx(tk.value)), px(y0 + 6), escape(tk.label));
  }
  out += fmt::format(
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">time since the run "
      "started, s (linear scale)</text>\n",
      px((kLeft + right) / 2), px(height - 6));
  return out + "</svg>\n";
}

}  // namespace

std::string timelines_html(const Report& report, const DeviceColours& colours) {
  // At most kMaxTimelines charts: the longest timeline of each device first, then the longest
  // others; shown in the runs' order.
  constexpr size_t kMaxTimelines = 6;
  const std::vector<ReportRun>& runs = report.runs;
  std::vector<std::pair<double, size_t>> candidates;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (const double length = timeline_length(runs[i].run); length > 0)
      candidates.emplace_back(length, i);
  }
  if (candidates.empty()) return "";
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
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

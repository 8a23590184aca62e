// report.html's sweep section: time per 100 epochs against parameters (or the swept axis), one line
// per device, predicted lines dashed, the crossovers marked where one device overtakes another.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/format.h"
#include "report/html_sections.h"
#include "report/svg.h"

namespace xo::html {
namespace {

// A point as the chart places it: the sweep's point with its chart coordinates.
struct ChartPoint {
  double x, y;
  std::optional<double> axis_value, params;
};

struct ChartLine {
  std::string device;
  bool predicted = false;
  std::vector<ChartPoint> points;  // sorted by x; points without a finite x or y left out
};

// y of `line` at `x`, interpolated between its neighbouring points in the chart's scales (a
// straight segment on the chart), or nothing outside its range.
std::optional<double> interpolate_y(const ChartLine& line, double x, const Scale& sx,
                                    const Scale& sy) {
  for (size_t i = 1; i < line.points.size(); ++i) {
    const ChartPoint &a = line.points[i - 1], &b = line.points[i];
    if (x < a.x || x > b.x) continue;
    const double xa = sx(a.x), xb = sx(b.x);
    const double t = xb == xa ? 0 : (sx(x) - xa) / (xb - xa);
    return sy(a.y) + t * (sy(b.y) - sy(a.y));
  }
  if (line.points.size() == 1 && line.points[0].x == x) return sy(line.points[0].y);
  return std::nullopt;
}

std::string sweep_chart(const SweepRecord& sweep, const DeviceColours& colours) {
  const bool x_is_params = sweep.x != "axis_value";
  const std::string& axis = sweep.axis;
  std::vector<ChartLine> lines;
  for (const SweepLine& s : sweep.series) {
    ChartLine line{s.device, s.predicted, {}};
    for (const SweepPoint& p : s.points) {
      const auto x = finite(x_is_params ? p.params : p.axis_value), y = finite(p.seconds);
      if (!x || !y) continue;
      line.points.push_back({*x, *y, finite(p.axis_value), finite(p.params)});
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
    lines.push_back(std::move(line));
  }
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const ChartLine& l : lines) {
    for (const ChartPoint& p : l.points) {
      x_min = std::min(x_min, p.x);
      x_max = std::max(x_max, p.x);
      y_min = std::min(y_min, p.y);
      y_max = std::max(y_max, p.y);
    }
  }
  if (!std::isfinite(x_min)) return "";  // no point to draw

  // Parameters grow geometrically along a sweep: log x. Another axis (batch, sequence length)
  // goes log when it spans more than kLogSpan, as the time does.
  constexpr double kLogSpan = 30;
  const bool x_log = x_min > 0 && (x_is_params || x_max / x_min > kLogSpan);
  const bool y_log = y_min > 0 && y_max / y_min > kLogSpan;

  constexpr double kWidth = 900, kLeft = 78, kRight = 28, kBottom = 54;
  std::vector<LegendItem> items;
  for (const ChartLine& l : lines) items.push_back({colours(l.device), l.device, l.predicted});
  if (!sweep.crossovers.empty())
    items.push_back({"#5b6475", "crossover", true, LegendItem::Glyph::kLine});
  const auto [legend_svg, legend_height] = legend(items, kLeft, 6, kWidth - kLeft - kRight);
  const double top = 14 + legend_height, plot_height = 330, height = top + plot_height + kBottom;
  const double bottom = top + plot_height, right = kWidth - kRight;

  const Scale sx = make_scale(x_min, x_max, x_log, kLeft, right);
  const Scale sy = make_scale(y_min, y_max, y_log, bottom, top, /*from_zero=*/true);
  const TickFormat x_format = [&](double v) {
    return x_is_params ? short_count(v) : significant(v, 3, true);
  };
  const TickFormat y_format = [](double v) { return duration(v, /*trim=*/true); };
  const std::vector<Tick> x_ticks = x_log ? log_ticks(sx, x_format) : linear_ticks(sx, 8, x_format);
  const std::vector<Tick> y_ticks = y_log ? log_ticks(sy, y_format) : linear_ticks(sy, 6, y_format);

  const std::string x_name = x_is_params ? "parameters" : (axis.empty() ? "axis value" : axis);
  std::string out = svg_open("sweep", kWidth, height,
                             "time per 100 epochs against " + x_name + ", one line per device");
  out += legend_svg;
  out += "<g class=\"grid\">\n";
  for (const Tick& t : x_ticks) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"{3}\"/>",
                       px(sx(t.value)), px(top), px(bottom), t.major ? "major" : "minor");
    if (!t.label.empty()) {
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                         px(sx(t.value)), px(bottom + 17), escape(t.label));
    }
  }
  for (const Tick& t : y_ticks) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"{3}\"/>",
                       px(kLeft), px(sy(t.value)), px(right), t.major ? "major" : "minor");
    if (!t.label.empty()) {
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(kLeft - 7),
                         px(sy(t.value) + 4), escape(t.label));
    }
  }
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n</g>\n",
                     px(kLeft), px(top), px(right - kLeft), px(plot_height));
  out += fmt::format(
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} ({} scale)</text>\n",
      px((kLeft + right) / 2), px(height - 8), escape(x_name), x_log ? "log" : "linear");
  out += fmt::format(
      "<text class=\"axis-label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">time per 100 epochs ({} scale)</text>\n",
      px((top + bottom) / 2), y_log ? "log" : "linear");

  for (const ChartLine& l : lines) {
    const std::string colour = colours(l.device);
    out += fmt::format("<g class=\"series\" data-device=\"{}\" data-points=\"{}\">\n",
                       escape(l.device), l.points.size());
    if (l.points.size() > 1) {
      std::string points;
      for (const ChartPoint& p : l.points) points += px(sx(p.x)) + "," + px(sy(p.y)) + " ";
      points.pop_back();
      out += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.2\"{}/>\n", points,
          colour, l.predicted ? " stroke-dasharray=\"6 4\"" : "");
    }
    for (const ChartPoint& p : l.points) {
      std::string tip = l.device;
      if (l.predicted && l.device.find("predicted") == std::string::npos) tip += " (predicted)";
      if (p.axis_value && !axis.empty())
        tip += " · " + axis + " " + significant(*p.axis_value, 4, true);
      if (p.params) tip += " · " + exact_count(p.params) + " params";
      tip += " · " + duration(p.y) + " per 100 epochs";
      out += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>\n",
          px(sx(p.x)), px(sy(p.y)), colour, escape(tip));
    }
    out += "</g>\n";
  }

  int index = 0;
  for (const Crossover& c : sweep.crossovers) {
    const auto x = finite(x_is_params ? c.params : c.axis_value);
    if (!x || (x_log && *x <= 0) || *x < sx.lo || *x > sx.hi) continue;
    const auto params = finite(c.params), axis_value = finite(c.axis_value);
    const double cx = sx(*x);
    std::optional<double> cy;
    for (const ChartLine& l : lines) {
      if (l.device == c.faster && !cy) cy = interpolate_y(l, *x, sx, sy);
    }
    const std::string where = x_is_params
                                  ? short_count(*x) + " params"
                                  : (axis.empty() ? "" : axis + " ") + significant(*x, 3, true);
    const std::string label = (c.faster.empty() ? "?" : c.faster) + " faster above " + where;
    std::string tip = label;
    if (!c.slower.empty()) tip += " (overtakes " + c.slower + ")";
    if (axis_value && !axis.empty()) tip += " · " + axis + " " + significant(*axis_value, 3, true);
    if (params) tip += " · " + exact_count(params) + " params";
    const double label_y = top + 16 + 16 * (index++ % 4);
    const bool left = cx + 6 + text_width(label) > right;
    out += fmt::format("<g class=\"crossover\"><title>{}</title>\n", escape(tip));
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#5b6475\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"5 4\"/>\n",
        px(cx), px(top), px(bottom));
    if (cy) {
      out += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"6.5\" fill=\"none\" stroke=\"#1d2330\" "
          "stroke-width=\"2\"/>\n",
          px(cx), px(*cy));
    }
    out += fmt::format(
        "<text class=\"mark-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n</g>\n",
        px(left ? cx - 6 : cx + 6), px(label_y), left ? "end" : "start", escape(label));
  }
  return out + "</svg>\n";
}

}  // namespace

std::string sweep_html(const Report& report, const DeviceColours& colours) {
  if (!report.sweep) return "";
  const SweepRecord& sweep = *report.sweep;
  std::string out = sweep_chart(sweep, colours);
  if (out.empty()) return "";
  std::string notes;
  for (const SweepLine& s : sweep.series) {
    if (s.predicted) {
      notes += "<li>" + escape(s.device) +
               ": <span class=\"badge\">predicted</span> from the roofline model, not measured "
               "(dashed).</li>\n";
    }
  }
  if (sweep.crossovers.empty()) {
    notes += "<li>No crossover: one device stays faster across the whole sweep.</li>\n";
  }
  if (!notes.empty()) out += "<ul class=\"notes\">\n" + notes + "</ul>\n";
  return out;
}

}  // namespace xo::html

// report.html's sweep section: time per 100 epochs (along "trials": trial-epochs per second)
// against parameters (or the swept axis), one line per device, predicted lines dashed, the
// crossovers marked where one device overtakes another.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "advisor/verdict.h"
#include "core/format.h"
#include "report/html_sections.h"
#include "report/svg.h"

namespace xo::html {
namespace {

// The chart's layout in SVG units: the legend on top, then the plot, with room on its left for
// the time labels and below it for the x labels and the axis title.
constexpr double kWidth = 900, kLeft = 78, kRight = 28, kBottom = 54, kPlotHeight = 330;
constexpr double kPlotRight = kWidth - kRight;
constexpr double kLegendTop = 6, kBelowLegend = 14;
// Parameters grow geometrically along a sweep: log x. Another axis (batch, sequence length) goes
// log when it spans more than kLogSpan, as the time does.
constexpr double kLogSpan = 30;
constexpr const char* kCrossoverColour = "#5b6475";

// What the chart's x is: the parameter count, or the value of the swept axis; and its y: the time
// per 100 epochs, or along "trials" (fused trials, advise --trials) the throughput of the group,
// trial-epochs per second (its trials x 100 over its time per 100 epochs: higher is faster).
struct XAxis {
  bool is_params;
  std::string axis;  // the swept axis's name ("depth", "batch"); may be empty

  bool throughput() const { return axis == "trials"; }
  std::optional<double> y_of(const SweepPoint& p) const {
    const auto seconds = finite(p.seconds);
    if (!throughput() || !seconds) return seconds;
    return finite(p.axis_value * 100 / *seconds);
  }
  std::string y_name() const {
    return throughput() ? "trial-epochs per second" : "time per 100 epochs";
  }
  std::string y_tick(double v) const {
    return throughput() ? significant(v, 3, true) : duration(v, /*trim=*/true);
  }
  std::string y_tip(double v) const {
    return throughput() ? significant(v, 4, true) + " trial-epochs per second"
                        : duration(v) + " per 100 epochs";
  }

  // A point's or a crossover's x, when it is finite.
  template <typename T>
  std::optional<double> of(const T& p) const {
    return finite(is_params ? p.params : p.axis_value);
  }
  std::string name() const {
    return is_params ? "parameters" : (axis.empty() ? "axis value" : axis);
  }
  std::string tick(double v) const { return is_params ? short_count(v) : significant(v, 3, true); }
  // Where a crossover lies, as its label says: "701k params", "batch 96".
  std::string where(double x) const {
    return is_params ? short_count(x) + " params"
                     : (axis.empty() ? "" : axis + " ") + significant(x, 3, true);
  }
};

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

// The smallest and largest x and y of the points drawn.
struct Extent {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
};

// The plot's area in the chart and its scales; a scale's `log` says whether that axis is log.
struct Plot {
  double top, bottom, height;  // the plot's top and bottom edges; the whole chart's height
  Scale sx, sy;
};

// Each series as a line of the points that can be drawn, in order of x.
std::vector<ChartLine> drawable_lines(const SweepRecord& sweep, const XAxis& x_axis) {
  std::vector<ChartLine> lines;
  for (const SweepLine& s : sweep.series) {
    ChartLine line{s.device, s.predicted, {}};
    for (const SweepPoint& p : s.points) {
      const auto x = x_axis.of(p), y = x_axis.y_of(p);
      if (!x || !y) continue;
      line.points.push_back({*x, *y, finite(p.axis_value), finite(p.params)});
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const ChartPoint& a, const ChartPoint& b) { return a.x < b.x; });
    lines.push_back(std::move(line));
  }
  return lines;
}

// The extent of every line's points; nothing when no line has a point.
std::optional<Extent> extent_of(const std::vector<ChartLine>& lines) {
  Extent e;
  for (const ChartLine& l : lines) {
    for (const ChartPoint& p : l.points) {
      e.x_min = std::min(e.x_min, p.x);
      e.x_max = std::max(e.x_max, p.x);
      e.y_min = std::min(e.y_min, p.y);
      e.y_max = std::max(e.y_max, p.y);
    }
  }
  if (!std::isfinite(e.x_min)) return std::nullopt;
  return e;
}

// The plot under a legend `legend_height` tall, log on an axis whose data span more than kLogSpan
// (x always for parameters), the time from zero where it is linear.
Plot place_plot(const Extent& e, bool x_is_params, double legend_height) {
  const bool x_log = e.x_min > 0 && (x_is_params || e.x_max / e.x_min > kLogSpan);
  const bool y_log = e.y_min > 0 && e.y_max / e.y_min > kLogSpan;
  Plot p;
  p.top = kBelowLegend + legend_height;
  p.bottom = p.top + kPlotHeight;
  p.height = p.top + kPlotHeight + kBottom;
  p.sx = make_scale(e.x_min, e.x_max, x_log, kLeft, kPlotRight);
  p.sy = make_scale(e.y_min, e.y_max, y_log, p.bottom, p.top, /*from_zero=*/true);
  return p;
}

// One legend entry per line (dashed where predicted), and the crossovers' mark when there are any.
std::vector<LegendItem> legend_items(const SweepRecord& sweep, const std::vector<ChartLine>& lines,
                                     const DeviceColours& colours) {
  std::vector<LegendItem> items;
  for (const ChartLine& l : lines) items.push_back({colours(l.device), l.device, l.predicted});
  if (!sweep.crossovers.empty())
    items.push_back({kCrossoverColour, "crossover", true, LegendItem::Glyph::kLine});
  return items;
}

// The grid behind the lines: a line at every tick of both axes, labelled where the tick has a
// label, and the frame around the plot.
std::string grid_svg(const Plot& p, const XAxis& x_axis) {
  const TickFormat x_format = [&](double v) { return x_axis.tick(v); };
  const TickFormat y_format = [&](double v) { return x_axis.y_tick(v); };
  const std::vector<Tick> x_ticks =
      p.sx.log ? log_ticks(p.sx, x_format) : linear_ticks(p.sx, 8, x_format);
  const std::vector<Tick> y_ticks =
      p.sy.log ? log_ticks(p.sy, y_format) : linear_ticks(p.sy, 6, y_format);
  std::string out = "<g class=\"grid\">\n";
  for (const Tick& t : x_ticks) {
    out += vertical_line(p.sx(t.value), p.top, p.bottom, t.major ? "major" : "minor");
    if (!t.label.empty()) out += text_at(p.sx(t.value), p.bottom + 17, "middle", t.label);
  }
  for (const Tick& t : y_ticks) {
    out += horizontal_line(p.sy(t.value), kLeft, kPlotRight, t.major ? "major" : "minor");
    if (!t.label.empty()) out += text_at(kLeft - 7, p.sy(t.value) + 4, "end", t.label);
  }
  return out + plot_frame(kLeft, p.top, kPlotRight - kLeft, kPlotHeight) + "</g>\n";
}

// The axes' titles, each saying whether its scale is log or linear (the time's runs up the left).
std::string axis_titles_svg(const Plot& p, const XAxis& x_axis) {
  std::string out = axis_title((kLeft + kPlotRight) / 2, p.height - 8,
                               x_axis.name() + (p.sx.log ? " (log scale)" : " (linear scale)"));
  out += fmt::format(
      "<text class=\"axis-label\" transform=\"translate(16 {}) rotate(-90)\" "
      "text-anchor=\"middle\">{} ({} scale)</text>\n",
      px((p.top + p.bottom) / 2), x_axis.y_name(), p.sy.log ? "log" : "linear");
  return out;
}

// A point's tooltip: the device, where the point lies on the swept axis and in parameters, and
// its time (or throughput).
std::string point_tip(const ChartLine& l, const ChartPoint& p, const XAxis& x_axis) {
  const std::string& axis = x_axis.axis;
  std::string tip = l.device;
  if (l.predicted && l.device.find("predicted") == std::string::npos) tip += " (predicted)";
  if (p.axis_value && !axis.empty())
    tip += " · " + axis + " " + significant(*p.axis_value, 4, true);
  if (p.params) tip += " · " + exact_count(p.params) + " params";
  return tip + " · " + x_axis.y_tip(p.y);
}

// A device's line through its points (dashed where predicted), and a dot with a tooltip at each;
// a lone point is only its dot.
std::string series_svg(const ChartLine& l, const Plot& p, const std::string& colour,
                       const XAxis& x_axis) {
  std::string out = fmt::format("<g class=\"series\" data-device=\"{}\" data-points=\"{}\">\n",
                                escape(l.device), l.points.size());
  if (l.points.size() > 1) {
    std::string points;
    for (const ChartPoint& pt : l.points) points += px(p.sx(pt.x)) + "," + px(p.sy(pt.y)) + " ";
    points.pop_back();
    out += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.2\"{}/>\n", points,
        colour, l.predicted ? " stroke-dasharray=\"6 4\"" : "");
  }
  for (const ChartPoint& pt : l.points) {
    out +=
        fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>\n",
                    px(p.sx(pt.x)), px(p.sy(pt.y)), colour, escape(point_tip(l, pt, x_axis)));
  }
  return out + "</g>\n";
}

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

// Where on the chart the faster device's line passes x: the crossover's ring goes there.
std::optional<double> crossing_y(const Crossover& c, double x, const std::vector<ChartLine>& lines,
                                 const Plot& p) {
  for (const ChartLine& l : lines) {
    if (l.device != c.faster) continue;
    if (const auto y = interpolate_y(l, x, p.sx, p.sy)) return y;
  }
  return std::nullopt;
}

// A crossover's tooltip: its label, the device overtaken, and where it lies on both axes.
std::string crossover_tip(const Crossover& c, const std::string& label, const std::string& axis) {
  const auto params = finite(c.params), axis_value = finite(c.axis_value);
  std::string tip = label;
  if (!c.slower.empty()) tip += " (overtakes " + c.slower + ")";
  if (axis_value && !axis.empty()) tip += " · " + axis + " " + significant(*axis_value, 3, true);
  if (params) tip += " · " + exact_count(params) + " params";
  return tip;
}

// A crossover at `x`: a dashed line across the plot, a ring where the faster line meets it, and a
// label on row `row` of four (so that neighbouring labels do not overlap), turned to the line's
// left where it would run past the plot.
std::string crossover_svg(const Crossover& c, double x, int row,
                          const std::vector<ChartLine>& lines, const Plot& p, const XAxis& x_axis) {
  const double cx = p.sx(x);
  const std::optional<double> cy = crossing_y(c, x, lines, p);
  const std::string label =
      (c.faster.empty() ? "?" : c.faster) + " faster above " + x_axis.where(x);
  const double label_y = p.top + 16 + 16 * (row % 4);
  const bool left = cx + 6 + text_width(label) > kPlotRight;
  std::string out = fmt::format("<g class=\"crossover\"><title>{}</title>\n",
                                escape(crossover_tip(c, label, x_axis.axis)));
  out += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"1.5\" "
      "stroke-dasharray=\"5 4\"/>\n",
      px(cx), px(p.top), px(p.bottom), kCrossoverColour);
  if (cy) {
    out += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"6.5\" fill=\"none\" stroke=\"#1d2330\" "
        "stroke-width=\"2\"/>\n",
        px(cx), px(*cy));
  }
  out +=
      fmt::format("<text class=\"mark-label\" x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n",
                  px(left ? cx - 6 : cx + 6), px(label_y), left ? "end" : "start", escape(label));
  return out + "</g>\n";
}

// The crossovers that lie on the plot (one whose x is unknown or off the plot is left out).
std::string crossovers_svg(const std::vector<Crossover>& crossovers,
                           const std::vector<ChartLine>& lines, const Plot& p,
                           const XAxis& x_axis) {
  std::string out;
  int row = 0;
  for (const Crossover& c : crossovers) {
    const auto x = x_axis.of(c);
    if (!x || (p.sx.log && *x <= 0) || *x < p.sx.lo || *x > p.sx.hi) continue;
    out += crossover_svg(c, *x, row++, lines, p, x_axis);
  }
  return out;
}

// The sweep's chart: legend, grid, axis titles, one line per device, then the crossovers on top.
std::string sweep_chart(const SweepRecord& sweep, const DeviceColours& colours) {
  const XAxis x_axis{sweep.x != "axis_value", sweep.axis};
  const std::vector<ChartLine> lines = drawable_lines(sweep, x_axis);
  const std::optional<Extent> extent = extent_of(lines);
  if (!extent) return "";  // no point to draw
  const auto [legend_svg, legend_height] =
      legend(legend_items(sweep, lines, colours), kLeft, kLegendTop, kPlotRight - kLeft);
  const Plot plot = place_plot(*extent, x_axis.is_params, legend_height);
  std::string out =
      svg_open("sweep", kWidth, plot.height,
               x_axis.y_name() + " against " + x_axis.name() + ", one line per device");
  out += legend_svg;
  out += grid_svg(plot, x_axis);
  out += axis_titles_svg(plot, x_axis);
  for (const ChartLine& l : lines) out += series_svg(l, plot, colours(l.device), x_axis);
  out += crossovers_svg(sweep.crossovers, lines, plot, x_axis);
  return out + "</svg>\n";
}

// A sweep along ranks: each rank count's step, communication and scaling efficiency.
std::string scaling_html(const std::vector<ScalingPoint>& points) {
  if (points.empty()) return "";
  auto ms = [](double v) {
    return cell(std::isnan(v) ? std::string(kMissing) : duration(v * 1e-3));
  };
  std::vector<std::vector<std::string>> rows;
  for (const ScalingPoint& p : points) {
    rows.push_back({cell(fmt::format("{}", p.ranks)), ms(p.step_ms),
                    cell(fmt::format("{:.0f}", p.samples_per_second)), ms(p.communicate_ms),
                    cell(p.reduced_bytes > 0 ? byte_size(static_cast<double>(p.reduced_bytes))
                                             : std::string(kMissing)),
                    cell(std::isnan(p.bus_gbs) ? std::string(kMissing)
                                               : fmt::format("{:.2f} GB/s", p.bus_gbs)),
                    cell(std::isnan(p.efficiency) ? std::string(kMissing)
                                                  : fmt::format("{:.1f}%", 100 * p.efficiency))});
  }
  return "<h3>Scaling across ranks</h3>\n<p class=\"note\">The same global batch on each count "
         "of data-parallel processes. <i>Communicate</i>: the step's wait for the gradient sums; "
         "<i>bus bandwidth</i>: as nccl-tests reports it, where that wait is the whole sum; "
         "<i>efficiency</i>: throughput against that many times one rank's.</p>\n" +
         html_table({{"ranks", true},
                     {"step", true},
                     {"samples/s", true},
                     {"communicate", true},
                     {"summed per step", true},
                     {"bus bandwidth", true},
                     {"efficiency", true}},
                    rows, "scaling");
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
               ": <span class=\"badge\">predicted</span>, not measured (dashed)" +
               (s.note.empty() ? std::string() : ": " + escape(s.note)) + ".</li>\n";
    }
  }
  if (sweep.crossovers.empty()) {
    if (const auto leader = fastest_throughout(as_series(sweep))) {
      notes += "<li>No crossover: " + escape(leader->device) + " is faster over the whole range (" +
               escape(sweep.axis) + " " + escape(significant(leader->from, 4, true)) + " to " +
               escape(significant(leader->to, 4, true)) + ").</li>\n";
    }
  }
  if (!notes.empty()) out += "<ul class=\"notes\">\n" + notes + "</ul>\n";
  return out + scaling_html(sweep.scaling);
}

}  // namespace xo::html

// The chart kit of report.html: scales with nice domains and ticks (linear and log), the <svg>
// element, grid lines, labels and frames, legends, and the labelled rows of horizontal bar charts.
// Coordinates are SVG user units.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xo::html {

// SVG coordinates: one decimal is finer than any screen needs. The scales only see finite data
// inside their domains; this guard keeps a slip from ever printing "nan".
std::string px(double v);

// Rough width of SVG text at `font_px` (system sans fonts average ~0.55 em per character).
double text_width(std::string_view s, double font_px = 12);

// A domain (data units) mapped onto a range (SVG units), linearly or by log10.
struct Scale {
  double lo = 0, hi = 1;
  double from = 0, to = 1;
  bool log = false;

  double operator()(double v) const;
};

struct Tick {
  double value;
  bool major;
  std::string label;  // empty: a tick without a label
};

using TickFormat = std::function<std::string(double)>;

// The smallest of 1, 2, 4, 5, 6, 8 × 10^k at or above v (> 0), so that its half is round too.
double nice_ceiling(double v);

// About `target` ticks at a round step (1, 2 or 5 × 10^k) across the domain.
std::vector<Tick> linear_ticks(const Scale& s, int target, const TickFormat& format);
// Powers of ten as major ticks, 2…9 between them as minor ones; 2 and 5 are labelled too where a
// decade is wide enough, and every tick when the domain spans less than a decade.
std::vector<Tick> log_ticks(const Scale& s, const TickFormat& format);

// A scale around the data [lo, hi] with some room: a linear domain widened to round steps (from
// zero where `from_zero`), a log domain padded by a factor.
Scale make_scale(double lo, double hi, bool log, double from, double to, bool from_zero = false);

// The opening <svg> tag of a chart; `label` (escaped here) is what a screen reader says.
std::string svg_open(std::string_view cls, double width, double height, const std::string& label,
                     std::string_view extra_attributes = "");

// The pieces of a plot below take SVG coordinates (written through px()) and escape their text.

// A grid line across the plot: vertical at x from y0 to y1, or horizontal at y from x0 to x1;
// `cls` is "major" or "minor" (the page's style draws minor lines lighter).
std::string vertical_line(double x, double y0, double y1, std::string_view cls);
std::string horizontal_line(double y, double x0, double x1, std::string_view cls);
// A tick label (or any plain text) at (x, y), anchored "start", "middle" or "end"; a line of its
// own.
std::string text_at(double x, double y, std::string_view anchor, std::string_view text);
// The frame around a plot's area.
std::string plot_frame(double left, double top, double width, double height);
// An axis's title, centred at (x, y).
std::string axis_title(double x, double y, std::string_view title);

struct LegendItem {
  enum class Glyph { kLineAndDot, kLine, kBlock };  // a series, a mark, a bar's segment
  std::string colour, name;
  bool dashed = false;
  Glyph glyph = Glyph::kLineAndDot;
};

// A legend row of `items`, wrapped at `width`: the SVG and the height it took.
std::pair<std::string, double> legend(const std::vector<LegendItem>& items, double left, double top,
                                      double width);

// Horizontal bar rows (the achieved-fraction and time-split charts): a label column, the bars, a
// value column.
inline constexpr double kBarWidth = 900, kBarLabel = 230, kBarValue = 110, kBarRow = 26,
                        kBarGap = 8;

// A row's label at `y`: a dot in the row's colour and the label, cut to fit with the whole of it
// as a tooltip.
std::string bar_row_label(double y, const std::string& label, const std::string& colour);

}  // namespace xo::html

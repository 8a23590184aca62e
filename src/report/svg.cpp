// The chart kit of report.html: scales, ticks, the <svg> element, grid lines, labels, frames,
// legends and bar-row labels.
#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "report/html_parts.h"

namespace xo::html {
namespace {

double nice_step(double span, int target) {
  const double raw = span / std::max(target, 1);
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  return magnitude * (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10);
}

// The domain widened to whole steps; lo stays at zero when it is zero.
std::pair<double, double> nice_domain(double lo, double hi, int target = 5) {
  if (!std::isfinite(hi - lo)) return {lo, hi};  // spans beyond double: no rounding
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.5;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double step = nice_step(hi - lo, target);
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step};
}

}  // namespace

std::string px(double v) { return std::isfinite(v) ? fmt::format("{:.1f}", v) : std::string("0"); }

double text_width(std::string_view s, double font_px) {
  size_t chars = 0;
  for (const char c : s)
    chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // UTF-8 code points
  return static_cast<double>(chars) * font_px * 0.55;
}

double Scale::operator()(double v) const {
  const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
  const double x = log ? std::log10(v) : v;
  return from + (x - a) / (b - a) * (to - from);
}

double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(v)));
  for (const double f : {1.0, 2.0, 4.0, 5.0, 6.0, 8.0}) {
    if (f * magnitude >= v * (1 - 1e-9)) return f * magnitude;
  }
  return 10 * magnitude;
}

std::vector<Tick> linear_ticks(const Scale& s, int target, const TickFormat& format) {
  std::vector<Tick> ticks;
  const double step = nice_step(s.hi - s.lo, target);
  const double first = std::ceil(s.lo / step - 1e-9);
  constexpr int kMaxTicks = 50;  // a domain no nice step fits (spans beyond double) stops here
  for (int k = 0; k < kMaxTicks; ++k) {
    const double v = (first + k) * step;  // multiplied, not accumulated: no drift
    if (v > s.hi + step * 1e-9) break;
    const double clean = std::fabs(v) < step * 1e-9 ? 0 : v;
    ticks.push_back({clean, true, format(clean)});
  }
  return ticks;
}

std::vector<Tick> log_ticks(const Scale& s, const TickFormat& format) {
  constexpr double kLabelledMinorDecadePx = 110;  // below this, "2" and "5" labels collide
  const double decades = std::log10(s.hi) - std::log10(s.lo);
  const bool room = std::fabs(s.to - s.from) / decades >= kLabelledMinorDecadePx;
  std::vector<Tick> ticks;
  for (int k = static_cast<int>(std::floor(std::log10(s.lo)));
       k <= static_cast<int>(std::ceil(std::log10(s.hi))); ++k) {
    for (int m = 1; m <= 9; ++m) {
      const double v = m * std::pow(10.0, k);
      if (v < s.lo * (1 - 1e-9) || v > s.hi * (1 + 1e-9)) continue;
      const bool labelled = m == 1 || (room && (m == 2 || m == 5));
      ticks.push_back({v, m == 1, labelled ? format(v) : std::string()});
    }
  }
  const auto labelled =
      std::count_if(ticks.begin(), ticks.end(), [](const Tick& t) { return !t.label.empty(); });
  if (labelled < 2) {
    for (Tick& t : ticks) t.label = format(t.value);
    if (ticks.size() < 2) ticks = {{s.lo, true, format(s.lo)}, {s.hi, true, format(s.hi)}};
  }
  return ticks;
}

Scale make_scale(double lo, double hi, bool log, double from, double to, bool from_zero) {
  Scale s;
  s.log = log;
  s.from = from;
  s.to = to;
  if (log) {
    double a = std::log10(lo), b = std::log10(hi);
    const double pad = std::max(0.06 * (b - a), 0.1);
    s.lo = std::max(std::pow(10.0, a - pad), std::numeric_limits<double>::min());
    s.hi = std::min(std::pow(10.0, b + pad), std::numeric_limits<double>::max());
  } else {
    const auto [nlo, nhi] = nice_domain(from_zero ? std::min(0.0, lo) : lo, hi);
    s.lo = nlo;
    s.hi = nhi;
  }
  return s;
}

std::string svg_open(std::string_view cls, double width, double height, const std::string& label,
                     std::string_view extra_attributes) {
  return fmt::format("<svg class=\"{}\"{} viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
                     cls, extra_attributes, px(width), px(height), escape(label));
}

std::string vertical_line(double x, double y0, double y1, std::string_view cls) {
  return fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"{3}\"/>", px(x),
                     px(y0), px(y1), cls);
}

std::string horizontal_line(double y, double x0, double x1, std::string_view cls) {
  return fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"{3}\"/>", px(x0),
                     px(y), px(x1), cls);
}

std::string text_at(double x, double y, std::string_view anchor, std::string_view text) {
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", px(x), px(y), anchor,
                     escape(text));
}

std::string plot_frame(double left, double top, double width, double height) {
  return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"frame\"/>\n",
                     px(left), px(top), px(width), px(height));
}

std::string axis_title(double x, double y, std::string_view title) {
  return fmt::format(
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", px(x),
      px(y), escape(title));
}

std::pair<std::string, double> legend(const std::vector<LegendItem>& items, double left, double top,
                                      double width) {
  constexpr double kRow = 20, kGlyph = 26, kGap = 18;
  std::string out = "<g class=\"legend\">\n";
  double x = left, y = top + 12;
  for (const LegendItem& item : items) {
    const double w = kGlyph + text_width(item.name) + kGap;
    if (x > left && x + w > left + width) {
      x = left;
      y += kRow;
    }
    if (item.glyph == LegendItem::Glyph::kBlock) {
      out +=
          fmt::format("<rect x=\"{}\" y=\"{}\" width=\"18\" height=\"11\" rx=\"2\" fill=\"{}\"/>",
                      px(x + 1), px(y - 10), item.colour);
    } else {
      out += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
          px(x), px(y - 4), px(x + 20), px(y - 4), item.colour,
          item.dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
    if (item.glyph == LegendItem::Glyph::kLineAndDot) {
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>", px(x + 10),
                         px(y - 4), item.colour);
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", px(x + kGlyph), px(y),
                       escape(item.name));
    x += w;
  }
  return {out + "</g>\n", y - top + 8};
}

std::string bar_row_label(double y, const std::string& label, const std::string& colour) {
  std::string shown = label;
  constexpr size_t kMaxBytes = 34;  // what fits in kBarLabel
  if (shown.size() > kMaxBytes) {
    size_t cut = kMaxBytes - 1;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80)
      --cut;  // not inside a UTF-8 character
    shown = shown.substr(0, cut) + "…";
  }
  return fmt::format(
      "<circle cx=\"8\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"20\" "
      "y=\"{}\">{}<title>{}</title></text>\n",
      px(y + kBarRow / 2), colour, px(y + kBarRow / 2 + 4), escape(shown), escape(label));
}

}  // namespace xo::html

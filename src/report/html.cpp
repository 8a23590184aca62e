// report.html: the report document as one page. Sections follow the order a reader asks in (what
// should I do, where do the devices cross, what was measured, where did the time go, what is
// predicted and what it costs, on what machine); each appears only when the document has its data.
// Charts are inline SVG written here; the page has no script and a Content-Security-Policy that
// forbids loading anything, so it is the same offline, in a mail attachment or in CI artefacts.
#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/file.h"

namespace xo {
namespace {

using json = nlohmann::json;

constexpr std::string_view kMissing = "n/a";

// ---------------------------------------------------------------------------------------------
// Reading the document. Nothing here throws on an unexpected shape: a field of the wrong type
// reads as missing (nlohmann's value() and operator[] would throw or insert).

const json& null_json() {
  static const json null;
  return null;
}

const json& field(const json& j, const char* key) {
  if (!j.is_object()) return null_json();
  const auto it = j.find(key);
  return it == j.end() ? null_json() : *it;
}

// An array field, or an empty array.
const json& list(const json& j, const char* key) {
  static const json empty = json::array();
  const json& v = field(j, key);
  return v.is_array() ? v : empty;
}

// A finite number; NaN and infinities set in code (JSON itself has none) read as missing.
std::optional<double> number(const json& j) {
  if (!j.is_number()) return std::nullopt;
  const double v = j.get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<double> number(const json& j, const char* key) { return number(field(j, key)); }

// A string field as it is; anything else as empty.
std::string text(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

bool is_true(const json& j, const char* key) {
  const json& v = field(j, key);
  return v.is_boolean() && v.get<bool>();
}

// ---------------------------------------------------------------------------------------------
// Escaping and number formatting. Every formatter answers "n/a" for a missing or non-finite value.

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters other than tab and newlines are parse errors in HTML.
        out +=
            (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ? ' ' : c;
    }
  }
  return out;
}

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::fabs(v))));
  const double rounded = std::round(v * scale) / scale;
  return std::isfinite(rounded) ? rounded : v;  // subnormal v: the scale overflows
}

// `v` with `digits` significant digits in fixed notation; `trim` drops trailing zeros (for axis
// labels: "2 ms", not "2.00 ms").
std::string significant(double v, int digits = 3, bool trim = false) {
  if (!std::isfinite(v)) return std::string(kMissing);
  // Fixed notation would print hundreds of digits (or only zeros) out here.
  constexpr double kFixedMax = 1e15, kFixedMin = 1e-9;
  if (std::fabs(v) >= kFixedMax || (v != 0 && std::fabs(v) < kFixedMin))
    return fmt::format("{:.{}e}", v, digits - 1);
  v = round_significant(v, digits);
  if (v == 0) v = 0;  // no "-0"
  const int magnitude = v == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::clamp(digits - 1 - magnitude, 0, 15);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (trim && s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// A duration with a unit that suits it: µs, ms, s (then min and h for long runs).
std::string duration(double seconds, bool trim = false) {
  if (!std::isfinite(seconds)) return std::string(kMissing);
  const double s = round_significant(seconds, 3), a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return significant(s * 1e6, 3, trim) + " µs";
  if (a < 1) return significant(s * 1e3, 3, trim) + " ms";
  if (a < 600) return significant(s, 3, trim) + " s";
  if (a < 36000) return significant(s / 60, 3, trim) + " min";
  return significant(s / 3600, 3, trim) + " h";
}

std::string duration(const std::optional<double>& seconds) {
  return seconds ? duration(*seconds) : std::string(kMissing);
}

std::string duration_ms(const std::optional<double>& ms) {
  return ms ? duration(*ms / 1e3) : std::string(kMissing);
}

// Counts in charts: 701k, 1.5M.
std::string short_count(double v) {
  if (!std::isfinite(v)) return std::string(kMissing);
  const double r = round_significant(v, 3), a = std::fabs(r);
  if (a >= 1e9) return significant(r / 1e9, 3, true) + "B";
  if (a >= 1e6) return significant(r / 1e6, 3, true) + "M";
  if (a >= 1e3) return significant(r / 1e3, 3, true) + "k";
  return significant(r, 3, true);
}

std::string group_digits(int64_t v) {
  const std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// Counts in tables, exact: 1,234,567.
std::string exact_count(const std::optional<double>& v) {
  if (!v) return std::string(kMissing);
  if (*v != std::floor(*v) || std::fabs(*v) >= 9e15) return significant(*v, 6);
  return group_digits(static_cast<int64_t>(*v));
}

// A value already in percent, with one decimal.
std::string percent(const std::optional<double>& p) {
  if (!p) return std::string(kMissing);
  if (*p > 0 && *p < 0.05) return "&lt;0.1%";
  return fmt::format("{:.1f}%", *p == 0 ? 0.0 : *p);
}

std::string fraction_percent(const std::optional<double>& f) {
  return f ? percent(*f * 100) : std::string(kMissing);
}

std::string usd(const std::optional<double>& v) {
  if (!v) return std::string(kMissing);
  const std::string sign = *v < 0 ? "-" : "";
  const double a = std::fabs(*v);
  if (a >= 1e15) return sign + "$" + significant(a, 3);
  if (a >= 100) return sign + "$" + group_digits(static_cast<int64_t>(std::llround(a)));
  if (a >= 1) return sign + fmt::format("${:.2f}", a);
  // Cents keep two decimals ($0.10); smaller amounts three significant digits ($0.00213).
  std::string cents = significant(a, 3, /*trim=*/true);
  const size_t dot = cents.find('.');
  if (dot == std::string::npos)
    cents += ".00";
  else if (cents.size() - dot < 3)
    cents.append(3 - (cents.size() - dot), '0');
  return sign + "$" + cents;
}

// A measured quantity to `digits` significant digits; thousands and up as whole numbers, grouped.
std::string plain(const std::optional<double>& v, int digits = 3) {
  if (!v) return std::string(kMissing);
  if (std::fabs(*v) >= 1000 && std::fabs(*v) < 9e15)
    return group_digits(static_cast<int64_t>(std::llround(*v)));
  return significant(*v, digits);
}

// A missing value in a table or text: "n/a", dimmed.
std::string na() { return "<span class=\"na\">n/a</span>"; }

// A table cell's content: the formatted value, with "n/a" dimmed.
std::string cell(const std::string& formatted) { return formatted == kMissing ? na() : formatted; }

// A string from the document, escaped, or a dimmed "n/a".
std::string text_cell(const std::string& raw) { return raw.empty() ? na() : escape(raw); }

// SVG coordinates: one decimal is finer than any screen needs. The scales only see finite data
// inside their domains; this guard keeps a slip from ever printing "nan".
std::string px(double v) { return std::isfinite(v) ? fmt::format("{:.1f}", v) : std::string("0"); }

// Rough width of SVG text at `font_px` (system sans fonts average ~0.55 em per character).
double text_width(std::string_view s, double font_px = 12) {
  size_t chars = 0;
  for (const char c : s)
    chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // UTF-8 code points
  return static_cast<double>(chars) * font_px * 0.55;
}

// ---------------------------------------------------------------------------------------------
// Colours. A device keeps its colour in every chart and table of the page (Okabe–Ito's
// colour-blind-safe palette first, then darker tones); the training phases have their own.

constexpr const char* kDevicePalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                          "#56B4E9", "#8C564B", "#7F7F7F", "#BCBD22", "#332288"};

class DeviceColours {
 public:
  void add(const std::string& device) {
    if (std::find(devices_.begin(), devices_.end(), device) == devices_.end())
      devices_.push_back(device);
  }
  bool has(const std::string& device) const {
    return std::find(devices_.begin(), devices_.end(), device) != devices_.end();
  }
  std::string operator()(const std::string& device) const {
    const auto it = std::find(devices_.begin(), devices_.end(), device);
    const size_t i =
        it == devices_.end() ? devices_.size() : static_cast<size_t>(it - devices_.begin());
    return kDevicePalette[i % std::size(kDevicePalette)];
  }

 private:
  std::vector<std::string> devices_;
};

// The devices the charts draw, in the order the page first shows them: the sweep's series, then
// the runs and the peaks. The catalog's devices (predictions, costs) are never drawn and get no
// colour, so that the palette does not repeat among the devices that are.
DeviceColours device_colours(const json& report) {
  DeviceColours colours;
  for (const json& s : list(field(report, "sweep"), "series")) colours.add(text(s, "device"));
  for (const json& r : list(report, "runs")) colours.add(text(r, "device"));
  for (const json& p : list(report, "peaks")) colours.add(text(p, "device"));
  return colours;
}

std::string swatch(const std::string& colour) {
  return fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", colour);
}

// A device's name for a table cell: its chart colour first where it has one.
std::string device_cell(const DeviceColours& colours, const std::string& device) {
  if (device.empty()) return na();
  return "<span class=\"device\">" +
         (colours.has(device) ? swatch(colours(device)) : std::string()) + escape(device) +
         "</span>";
}

struct Phase {
  const char* key;
  const char* colour;
};
constexpr Phase kPhases[] = {
    {"data", "#9AA5B1"}, {"forward", "#4C78A8"}, {"backward", "#F58518"}, {"optimizer", "#54A24B"}};

// ---------------------------------------------------------------------------------------------
// HTML tables.

struct Column {
  std::string header;  // HTML
  bool numeric = false;
};

// Cells are HTML (escaped by the caller). Numeric columns are right-aligned.
std::string html_table(const std::vector<Column>& columns,
                       const std::vector<std::vector<std::string>>& rows,
                       std::string_view cls = "") {
  std::string out = fmt::format("<div class=\"scroll\"><table{}>\n<thead><tr>",
                                cls.empty() ? "" : fmt::format(" class=\"{}\"", cls));
  for (const Column& c : columns)
    out += fmt::format("<th{}>{}</th>", c.numeric ? " class=\"num\"" : "", c.header);
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < columns.size(); ++i) {
      const std::string& v = i < row.size() ? row[i] : std::string();
      out += fmt::format("<td{}>{}</td>", columns[i].numeric ? " class=\"num\"" : "", v);
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

std::string run_label(const json& run) {
  const std::string model = text(run, "model"), device = text(run, "device");
  return (model.empty() ? "?" : model) + " on " + (device.empty() ? "?" : device);
}

// ---------------------------------------------------------------------------------------------
// Chart scaffolding: scales and ticks.

struct Scale {
  double lo = 0, hi = 1;    // domain (data units)
  double from = 0, to = 1;  // range (SVG units)
  bool log = false;

  double operator()(double v) const {
    const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
    const double x = log ? std::log10(v) : v;
    return from + (x - a) / (b - a) * (to - from);
  }
};

struct Tick {
  double value;
  bool major;
  std::string label;  // empty: a tick without a label
};

// The smallest of 1, 2, 4, 5, 6, 8 × 10^k at or above v (> 0), so that its half is round too.
double nice_ceiling(double v) {
  if (!(v > 0) || !std::isfinite(v)) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(v)));
  for (const double f : {1.0, 2.0, 4.0, 5.0, 6.0, 8.0}) {
    if (f * magnitude >= v * (1 - 1e-9)) return f * magnitude;
  }
  return 10 * magnitude;
}

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

template <typename Format>
std::vector<Tick> linear_ticks(const Scale& s, int target, Format format) {
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

// Powers of ten as major ticks, 2…9 between them as minor ones; 2 and 5 are labelled too where a
// decade is wide enough, and every tick when the domain spans less than a decade.
template <typename Format>
std::vector<Tick> log_ticks(const Scale& s, Format format) {
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

// A domain around [lo, hi] with some room; log domains pad by a factor.
Scale make_scale(double lo, double hi, bool log, double from, double to, bool from_zero = false) {
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
                     std::string_view extra_attributes = "") {
  return fmt::format("<svg class=\"{}\"{} viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
                     cls, extra_attributes, px(width), px(height), escape(label));
}

// A legend row: items of (colour, name, dashed), wrapped at `width`; returns the SVG and the
// height it took.
struct LegendItem {
  enum class Glyph { kLineAndDot, kLine, kBlock };  // a series, a mark, a bar's segment
  std::string colour, name;
  bool dashed = false;
  Glyph glyph = Glyph::kLineAndDot;
};

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

// ---------------------------------------------------------------------------------------------
// Section: header, navigation, advice.

struct Section {
  std::string id, title, html;
};

std::string header_html(const json& report, const std::vector<Section>& sections) {
  std::string title = text(report, "title");
  if (title.empty()) title = "crossover report";
  std::string out = "<header>\n<h1>" + escape(title) + "</h1>\n";
  std::vector<std::string> meta;
  if (const std::string kind = text(report, "kind"); !kind.empty()) meta.push_back(escape(kind));
  const std::string created = text(report, "created");
  meta.push_back("created " + (created.empty() ? na() : escape(created)));
  if (const std::string v = text(field(report, "machine"), "crossover"); !v.empty()) {
    meta.push_back("crossover " + escape(v));
  }
  out += "<p class=\"meta\">";
  for (size_t i = 0; i < meta.size(); ++i) out += (i ? " · " : "") + meta[i];
  out += "</p>\n";
  const json& complete = field(report, "complete");
  if (complete.is_boolean() && !complete.get<bool>()) {
    out +=
        "<div class=\"banner partial\">partial: interrupted — the run stopped before it finished; "
        "this page shows what completed.</div>\n";
  }
  if (sections.size() > 1) {
    out += "<nav>";
    for (const Section& s : sections) out += fmt::format("<a href=\"#{}\">{}</a>", s.id, s.title);
    out += "</nav>\n";
  }
  return out + "</header>\n";
}

std::string advice_html(const json& report) {
  std::string items;
  for (const json& line : list(report, "advice")) {
    if (line.is_string() && !line.get<std::string>().empty())
      items += "<li>" + escape(line.get<std::string>()) + "</li>\n";
  }
  return items.empty() ? std::string() : "<ul class=\"advice\">\n" + items + "</ul>\n";
}

// ---------------------------------------------------------------------------------------------
// Section: the sweep chart (time per 100 epochs against parameters, one line per device, the
// crossovers marked).

struct SweepPoint {
  double x, y;
  std::optional<double> axis_value, params, step_ms;
};

struct SweepLine {
  std::string device;
  bool predicted = false;
  std::vector<SweepPoint> points;  // sorted by x
};

// y of `line` at `x`, interpolated between its neighbouring points in the chart's scales (a
// straight segment on the chart), or nothing outside its range.
std::optional<double> interpolate_y(const SweepLine& line, double x, const Scale& sx,
                                    const Scale& sy) {
  for (size_t i = 1; i < line.points.size(); ++i) {
    const SweepPoint &a = line.points[i - 1], &b = line.points[i];
    if (x < a.x || x > b.x) continue;
    const double xa = sx(a.x), xb = sx(b.x);
    const double t = xb == xa ? 0 : (sx(x) - xa) / (xb - xa);
    return sy(a.y) + t * (sy(b.y) - sy(a.y));
  }
  if (line.points.size() == 1 && line.points[0].x == x) return sy(line.points[0].y);
  return std::nullopt;
}

std::string sweep_chart(const json& sweep, const DeviceColours& colours) {
  const bool x_is_params = text(sweep, "x") != "axis_value";
  const char* x_key = x_is_params ? "params" : "axis_value";
  const std::string axis = text(sweep, "axis");
  std::vector<SweepLine> lines;
  for (const json& s : list(sweep, "series")) {
    SweepLine line{text(s, "device"), is_true(s, "predicted"), {}};
    for (const json& p : list(s, "points")) {
      const auto x = number(p, x_key), y = number(p, "seconds_per_100_epochs");
      if (!x || !y) continue;
      line.points.push_back(
          {*x, *y, number(p, "axis_value"), number(p, "params"), number(p, "step_ms")});
    }
    std::sort(line.points.begin(), line.points.end(),
              [](const SweepPoint& a, const SweepPoint& b) { return a.x < b.x; });
    lines.push_back(std::move(line));
  }
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const SweepLine& l : lines) {
    for (const SweepPoint& p : l.points) {
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
  for (const SweepLine& l : lines) items.push_back({colours(l.device), l.device, l.predicted});
  const json& crossovers = list(sweep, "crossovers");
  if (!crossovers.empty())
    items.push_back({"#5b6475", "crossover", true, LegendItem::Glyph::kLine});
  const auto [legend_svg, legend_height] = legend(items, kLeft, 6, kWidth - kLeft - kRight);
  const double top = 14 + legend_height, plot_height = 330, height = top + plot_height + kBottom;
  const double bottom = top + plot_height, right = kWidth - kRight;

  const Scale sx = make_scale(x_min, x_max, x_log, kLeft, right);
  const Scale sy = make_scale(y_min, y_max, y_log, bottom, top, /*from_zero=*/true);
  auto x_format = [&](double v) { return x_is_params ? short_count(v) : significant(v, 3, true); };
  auto y_format = [](double v) { return duration(v, /*trim=*/true); };
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

  for (const SweepLine& l : lines) {
    const std::string colour = colours(l.device);
    out += fmt::format("<g class=\"series\" data-device=\"{}\" data-points=\"{}\">\n",
                       escape(l.device), l.points.size());
    if (l.points.size() > 1) {
      std::string points;
      for (const SweepPoint& p : l.points) points += px(sx(p.x)) + "," + px(sy(p.y)) + " ";
      points.pop_back();
      out += fmt::format(
          "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2.2\"{}/>\n", points,
          colour, l.predicted ? " stroke-dasharray=\"6 4\"" : "");
    }
    for (const SweepPoint& p : l.points) {
      std::string tip = l.device;
      if (l.predicted && l.device.find("predicted") == std::string::npos) tip += " (predicted)";
      if (p.axis_value && !axis.empty())
        tip += " · " + axis + " " + significant(*p.axis_value, 4, true);
      if (p.params) tip += " · " + exact_count(p.params) + " params";
      tip += " · " + duration(p.y) + " per 100 epochs";
      if (p.step_ms) tip += " · " + duration_ms(p.step_ms) + " per step";
      out += fmt::format(
          "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\"><title>{}</title></circle>\n",
          px(sx(p.x)), px(sy(p.y)), colour, escape(tip));
    }
    out += "</g>\n";
  }

  int index = 0;
  for (const json& c : crossovers) {
    const auto x = number(c, x_key);
    if (!x || (x_log && *x <= 0) || *x < sx.lo || *x > sx.hi) continue;
    const std::string faster = text(c, "faster"), slower = text(c, "slower");
    const auto params = number(c, "params"), axis_value = number(c, "axis_value");
    const double cx = sx(*x);
    std::optional<double> cy;
    for (const SweepLine& l : lines) {
      if (l.device == faster && !cy) cy = interpolate_y(l, *x, sx, sy);
    }
    const std::string where = x_is_params
                                  ? short_count(*x) + " params"
                                  : (axis.empty() ? "" : axis + " ") + significant(*x, 3, true);
    const std::string label = (faster.empty() ? "?" : faster) + " faster above " + where;
    std::string tip = label;
    if (!slower.empty()) tip += " (overtakes " + slower + ")";
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

std::string sweep_html(const json& report, const DeviceColours& colours) {
  const json& sweep = field(report, "sweep");
  if (!sweep.is_object()) return "";
  const std::string chart = sweep_chart(sweep, colours);
  if (chart.empty()) return "";
  std::string out = chart;
  std::string notes;
  for (const json& s : list(sweep, "series")) {
    if (is_true(s, "predicted")) {
      notes += "<li>" + escape(text(s, "device")) +
               ": <span class=\"badge\">predicted</span> from the roofline model, not measured "
               "(dashed).</li>\n";
    }
  }
  const json& crossovers = list(sweep, "crossovers");
  if (crossovers.empty()) {
    notes += "<li>No crossover: one device stays faster across the whole sweep.</li>\n";
  }
  if (!notes.empty()) out += "<ul class=\"notes\">\n" + notes + "</ul>\n";
  return out;
}

// ---------------------------------------------------------------------------------------------
// Section: the results table.

// Two tables with the same rows: the speed of each run, then what it learned and used.
std::string runs_html(const json& report, const DeviceColours& colours) {
  const json& runs = list(report, "runs");
  if (runs.empty()) return "";
  bool any_axis = false;
  for (const json& r : runs) any_axis |= field(r, "axis").is_object();
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
  for (const json& r : runs) {
    const std::string device = text(r, "device");
    const std::string model_cell = text_cell(text(r, "model"));
    const std::string device_html = device_cell(colours, device);
    std::vector<std::string> row = {model_cell, device_html};
    if (any_axis) {
      const json& axis = field(r, "axis");
      const auto v = number(axis, "value");
      row.push_back(axis.is_object()
                        ? escape(text(axis, "name")) + " " +
                              cell(v ? significant(*v, 4, true) : std::string(kMissing))
                        : na());
    }
    const json& step = field(r, "step_ms");
    auto median = number(step, "median");
    if (!median) median = number(r, "median_step_ms");
    const auto p10 = number(step, "p10"), p90 = number(step, "p90");
    auto per_100 = number(r, "seconds_per_100_epochs");
    if (!per_100) {
      if (const auto e = number(r, "seconds_per_epoch")) per_100 = 100 * *e;
    }
    row.push_back(cell(exact_count(number(r, "params"))));
    row.push_back(cell(exact_count(number(r, "layers"))));
    row.push_back(cell(exact_count(number(r, "batch"))));
    row.push_back(cell(duration_ms(median)));
    row.push_back(
        cell(p10 && p90 ? duration_ms(p10) + " – " + duration_ms(p90) : std::string(kMissing)));
    row.push_back(cell(fraction_percent(number(step, "cv"))));
    row.push_back(cell(duration(per_100)));
    row.push_back(cell(plain(number(r, "gflops"))));
    row.push_back(cell(fraction_percent(number(r, "peak_fraction"))));
    speed.push_back(std::move(row));
    outcome.push_back(
        {model_cell, device_html, cell(exact_count(number(r, "epochs"))),
         cell(plain(number(r, "final_loss"), 4)), cell(percent(number(r, "final_train_error"))),
         cell(percent(number(r, "final_test_accuracy"))), cell(plain(number(r, "peak_rss_mib"))),
         cell(percent(number(r, "mean_cpu_percent"))), cell(percent(number(r, "mean_gpu_percent"))),
         text_cell(text(r, "data"))});
  }
  return "<h3>Speed</h3>\n" + html_table(speed_columns, speed, "runs") +
         "<p class=\"note\">Step times are medians over the timed steps; CV is their coefficient "
         "of variation; GFLOP/s is achieved, against the device's measured matmul "
         "peak.</p>\n<h3>Training and resources</h3>\n" +
         html_table(outcome_columns, outcome, "outcomes") +
         "<p class=\"note\">Train error is the percentage of the last epoch's samples "
         "misclassified while training. CPU % is the mean over all cores.</p>\n";
}

// ---------------------------------------------------------------------------------------------
// Horizontal bar rows, shared by the achieved-fraction and time-split charts.

constexpr double kBarWidth = 900, kBarLabel = 230, kBarValue = 110, kBarRow = 26, kBarGap = 8;

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

// ---------------------------------------------------------------------------------------------
// Section: peaks and the fraction of them each run achieved.

std::string achieved_chart(const json& runs, const DeviceColours& colours) {
  std::vector<std::pair<const json*, double>> rows;
  double max_fraction = 0;
  for (const json& r : runs) {
    if (const auto f = number(r, "peak_fraction"); f && *f >= 0) {
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
        px(s(t.value)), px(kTop), px(axis_y), px(axis_y + 15), t.label);
  }
  double y = kTop;
  for (const auto& [run, f] : rows) {
    const std::string label = run_label(*run), colour = colours(text(*run, "device"));
    out += fmt::format("<g class=\"run\" data-run=\"{}\">", escape(label));
    out += bar_row_label(y, label, colour);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"><title>{}: {} of "
        "the matmul peak ({} GFLOP/s)</title></rect>",
        px(left), px(y + 4), px(std::max(0.0, s(f) - left)), px(kBarRow - 8), colour, escape(label),
        fraction_percent(f), plain(number(*run, "gflops")));
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text></g>\n", px(s(f) + 6),
                       px(y + kBarRow / 2 + 4), fraction_percent(f));
    y += kBarRow + kBarGap;
  }
  out += fmt::format(
      "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">achieved GFLOP/s as a "
      "fraction of the measured matmul peak (linear scale)</text>\n",
      px((left + right) / 2), px(height - 4));
  return out + "</svg>\n";
}

std::string peaks_html(const json& report, const DeviceColours& colours) {
  std::vector<std::vector<std::string>> rows;
  for (const json& p : list(report, "peaks")) {
    const std::string device = text(p, "device");
    const json& cached = field(p, "cached");
    rows.push_back({device_cell(colours, device), text_cell(text(p, "name")),
                    cell(plain(number(p, "matmul_gflops"))),
                    cell(plain(number(p, "bandwidth_gbs"))), text_cell(text(p, "probed")),
                    cached.is_boolean() ? (cached.get<bool>() ? "cached" : "probed now") : na()});
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
  out += achieved_chart(list(report, "runs"), colours);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Section: time split per step, one 100% stacked bar per run.

std::string phases_html(const json& report, const DeviceColours& colours) {
  struct Row {
    std::string label, colour;
    std::vector<std::pair<const Phase*, double>> parts;
    double total = 0;
  };
  std::vector<Row> rows;
  for (const json& r : list(report, "runs")) {
    const json& phases = field(r, "phases_ms");
    Row row{run_label(r), colours(text(r, "device")), {}, 0};
    for (const Phase& p : kPhases) {
      if (const auto ms = number(phases, p.key); ms && *ms > 0) {
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
      const std::string share = percent(100 * ms / row.total);
      out += fmt::format(
          "<rect class=\"segment\" data-phase=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
          "fill=\"{}\"><title>{} · {}: {} per step ({})</title></rect>\n",
          phase->key, px(x), px(y + 3), px(w), px(kBarRow - 6), phase->colour, escape(row.label),
          phase->key, duration_ms(ms), share);
      constexpr double kLabelMinPx = 44;  // a percentage fits inside the segment
      if (w >= kLabelMinPx) {
        out += fmt::format(
            "<text class=\"inside\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            px(x + w / 2), px(y + kBarRow / 2 + 4), share);
      }
      x += w;
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{} / step</text>\n</g>\n", px(left + width + 8),
                       px(y + kBarRow / 2 + 4), duration_ms(row.total));
    y += kBarRow + kBarGap;
  }
  out += "</svg>\n";
  return out +
         "<p class=\"note\">Each bar is one profiled step (synchronised, unsharded) split into its "
         "phases; hover a segment for its time.</p>\n";
}

// ---------------------------------------------------------------------------------------------
// Section: per-layer profile, a table per run.

std::string layers_html(const json& report) {
  std::string out;
  int shown = 0;
  for (const json& r : list(report, "runs")) {
    const json& layers = list(r, "layers_profile");
    if (layers.empty()) continue;
    double total = 0;
    for (const json& l : layers)
      total += number(l, "forward_ms").value_or(0) + number(l, "backward_ms").value_or(0);
    std::vector<std::vector<std::string>> rows;
    for (const json& l : layers) {
      const auto f = number(l, "forward_ms"), b = number(l, "backward_ms");
      const bool timed = f || b;
      const double sum = f.value_or(0) + b.value_or(0);
      std::string share = na();
      if (timed && total > 0) {
        const double p = 100 * sum / total;
        share = fmt::format("<div class=\"share\"><span style=\"width:{:.1f}%\"></span></div>{}", p,
                            percent(p));
      }
      rows.push_back({text_cell(text(l, "name")), cell(duration_ms(f)), cell(duration_ms(b)),
                      cell(timed ? duration_ms(sum) : std::string(kMissing)), share,
                      cell(plain(number(l, "gflops"))),
                      cell(fraction_percent(number(l, "peak_fraction"))),
                      text_cell(text(l, "bound"))});
    }
    // The first few runs open; the rest fold (a sweep has one table per model and device).
    constexpr int kOpenTables = 3;
    out += fmt::format("<details{}><summary>{}</summary>\n", shown++ < kOpenTables ? " open" : "",
                       escape(run_label(r)));
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

// ---------------------------------------------------------------------------------------------
// Section: utilisation timelines, small multiples per run sharing the time axis.

struct Metric {
  const char* key;
  const char* label;
  bool percent;
};
constexpr Metric kMetrics[] = {{"cpu_percent", "CPU % (mean of all cores)", true},
                               {"rss_mib", "resident memory (MiB)", false},
                               {"gpu_percent", "GPU %", true},
                               {"gpu_memory_mib", "GPU memory (MiB)", false},
                               {"gpu_power_w", "GPU power (W)", false}};

// The sample times: t_s, else multiples of interval_s, else the sample index.
std::vector<std::optional<double>> sample_times(const json& u, size_t n) {
  std::vector<std::optional<double>> t(n);
  const json& ts = list(u, "t_s");
  const auto interval = number(u, "interval_s");
  for (size_t i = 0; i < n; ++i) {
    if (i < ts.size())
      t[i] = number(ts[i]);
    else
      t[i] = interval ? static_cast<double>(i) * *interval : static_cast<double>(i);
  }
  return t;
}

size_t samples_of(const json& u) {
  size_t n = 0;
  for (const Metric& m : kMetrics) n = std::max(n, list(u, m.key).size());
  return n;
}

double timeline_length(const json& run) {
  const json& u = field(run, "utilisation");
  const size_t n = samples_of(u);
  double longest = 0;
  for (const auto& t : sample_times(u, n)) longest = std::max(longest, t.value_or(0));
  return n > 1 ? std::max(longest, 1e-9) : 0;
}

std::string timeline_chart(const json& run, const std::string& colour) {
  const json& u = field(run, "utilisation");
  const size_t n = samples_of(u);
  const std::vector<std::optional<double>> t = sample_times(u, n);
  struct Panel {
    const Metric* metric;
    std::vector<std::optional<double>> values;
    double max = 0, mean = 0;
  };
  std::vector<Panel> panels;
  for (const Metric& m : kMetrics) {
    const json& values = list(u, m.key);
    Panel p{&m, std::vector<std::optional<double>>(n), 0, 0};
    size_t count = 0;
    for (size_t i = 0; i < values.size() && i < n; ++i) {
      p.values[i] = number(values[i]);
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
        px(kLeft), px(top - 7), p.metric->label,
        p.metric->percent ? percent(p.mean) : significant(p.mean, 3),
        p.metric->percent ? percent(p.max) : significant(p.max, 3));
    for (const Tick& tk : x_ticks) {
      out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"minor\"/>",
                         px(sx(tk.value)), px(top), px(bottom));
    }
    // A short panel has room for three labels: zero, the middle and the top.
    for (const double v : {0.0, sy.hi / 2, sy.hi}) {
      const Tick tk{v, true, significant(v, 3, true) + unit};
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"major\"/><text x=\"{3}\" "
          "y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
          px(kLeft), px(sy(tk.value)), px(right), px(kLeft - 6), px(sy(tk.value) + 4), tk.label);
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
        p.metric->key, line, colour, p.metric->label,
        p.metric->percent ? percent(p.mean) : significant(p.mean, 3),
        p.metric->percent ? percent(p.max) : significant(p.max, 3));
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

std::string timelines_html(const json& report, const DeviceColours& colours) {
  // At most kMaxTimelines charts: the longest timeline of each device first, then the longest
  // others; shown in the runs' order.
  constexpr size_t kMaxTimelines = 6;
  const json& runs = list(report, "runs");
  std::vector<std::pair<double, size_t>> candidates;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (const double length = timeline_length(runs[i]); length > 0)
      candidates.emplace_back(length, i);
  }
  if (candidates.empty()) return "";
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<size_t> picked;
  std::vector<std::string> devices;
  for (const auto& [length, i] : candidates) {
    const std::string device = text(runs[i], "device");
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
    const std::string colour = colours(text(runs[i], "device"));
    const std::string chart = timeline_chart(runs[i], colour);
    if (chart.empty()) continue;
    out += "<h3>" + swatch(colour) + escape(run_label(runs[i])) + "</h3>\n" + chart;
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

// ---------------------------------------------------------------------------------------------
// Section: predictions, always labelled as such, with their assumptions.

std::string predictions_html(const json& report, const DeviceColours& colours) {
  const json& predictions = list(report, "predictions");
  if (predictions.empty()) return "";
  // One model for all (as `crossover advise` writes them): named once, not in every row.
  const std::string first_model = text(predictions[0], "model");
  bool one_model = !first_model.empty();
  for (const json& p : predictions) one_model &= text(p, "model") == first_model;
  std::vector<std::vector<std::string>> rows;
  for (const json& p : predictions) {
    const auto measured = number(p, "measured_step_ms"), error = number(p, "error_percent");
    // Each prediction sits beside its assumptions.
    std::string assumptions;
    for (const json& a : list(p, "assumptions")) {
      if (a.is_string()) assumptions += "<li>" + escape(a.get<std::string>()) + "</li>";
    }
    rows.push_back({device_cell(colours, text(p, "device")), text_cell(text(p, "name"))});
    if (!one_model) rows.back().push_back(text_cell(text(p, "model")));
    rows.back().insert(
        rows.back().end(),
        {cell(duration_ms(number(p, "step_ms"))) + " <span class=\"badge\">predicted</span>",
         measured ? duration_ms(measured) + " <span class=\"badge measured\">measured</span>"
                  : na(),
         cell(error ? fmt::format("{:+.1f}%", *error) : std::string(kMissing)),
         text_cell(text(p, "bound")),
         assumptions.empty() ? na() : "<ul class=\"assumptions\">" + assumptions + "</ul>"});
  }
  std::vector<Column> columns = {{"device"}, {"name"}};
  if (!one_model) columns.push_back({"model"});
  columns.insert(columns.end(), {{"predicted step", true},
                                 {"measured step", true},
                                 {"error", true},
                                 {"bound"},
                                 {"assumptions"}});
  const std::string of_model =
      one_model ? " of <strong>" + escape(first_model) + "</strong>" : std::string();
  return "<p class=\"note\">These step times" + of_model +
         " are <strong>predicted</strong> by the roofline model (FLOPs and bytes per layer at the "
         "device's rates, plus fixed costs), not measured; where the device was also measured "
         "here, the error is the prediction's against the measurement.</p>\n" +
         html_table(columns, rows, "predictions");
}

// ---------------------------------------------------------------------------------------------
// Section: cost (renting, owning, break-even).

std::string predicted_cell(const json& row) {
  const json& p = field(row, "predicted");
  if (!p.is_boolean()) return na();
  return p.get<bool>() ? "<span class=\"badge\">predicted</span>"
                       : "<span class=\"badge measured\">measured</span>";
}

std::string hours_cell(const std::optional<double>& hours) {
  return cell(hours ? duration(*hours * 3600) : std::string(kMissing));
}

// A generic value for key/value tables: strings escaped, numbers exact or to 4 digits, lists
// joined, objects as key: value pairs.
std::string value_html(const json& v) {
  if (v.is_string()) return text_cell(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number()) {
    const auto d = number(v);
    if (!d) return na();
    return *d == std::floor(*d) && std::fabs(*d) < 1e15 ? exact_count(d) : significant(*d, 4, true);
  }
  if (v.is_array()) {
    if (v.empty()) return "none";
    std::string out;
    for (const json& e : v) out += (out.empty() ? "" : ", ") + value_html(e);
    return out;
  }
  if (v.is_object()) {
    if (v.empty()) return "none";
    std::string out;
    for (const auto& [k, e] : v.items())
      out += (out.empty() ? "" : "; ") + escape(k) + ": " + value_html(e);
    return out;
  }
  return na();
}

// The ownership assumptions in words; keys this page does not know are listed as they are.
std::string cost_assumptions_html(const json& a) {
  if (!a.is_object() || a.empty()) return "";
  struct Known {
    const char *key, *label, *before, *after;
  };
  constexpr Known kKnown[] = {{"lifetime_years", "lifetime", "", " years"},
                              {"utilisation", "in use", "", " of its lifetime"},
                              {"electricity_usd_per_kwh", "electricity", "$", " per kWh"},
                              {"host_power_w", "host power", "", " W"},
                              {"hours_per_month", "use", "", " hours a month"}};
  std::string out = "<ul class=\"kv\">\n";
  for (const auto& [key, v] : a.items()) {
    const auto d = number(v);
    const Known* known = nullptr;
    for (const Known& k : kKnown) {
      if (key == k.key) known = &k;
    }
    std::string label = known ? known->label : key, shown;
    std::replace(label.begin(), label.end(), '_', ' ');
    if (!known)
      shown = value_html(v);
    else if (!d)
      shown = na();
    else if (key == "utilisation")
      shown = fraction_percent(d) + known->after;
    else
      shown = known->before + significant(*d, 3, true) + known->after;
    out += "<li><span class=\"k\">" + escape(label) + "</span> " + shown + "</li>\n";
  }
  return out + "</ul>\n";
}

std::string cost_html(const json& report, const DeviceColours& colours) {
  const json& cost = field(report, "cost");
  if (!cost.is_object()) return "";
  auto device_of = [&](const json& row) { return device_cell(colours, text(row, "device")); };
  std::string out;
  const std::string model = text(cost, "model");
  const auto epochs = number(cost, "epochs");
  if (!model.empty() || epochs) {
    out += "<p>The cost of training <strong>" + text_cell(model) + "</strong> for " +
           cell(exact_count(epochs)) + " epochs.</p>\n";
  }
  out += cost_assumptions_html(field(cost, "assumptions"));

  // Price sources are long (a page, a quote, a caveat): numbered notes under the tables.
  std::vector<std::string> sources;
  auto source_of = [&](const json& row) {
    const std::string source = text(row, "source"), date = text(row, "date");
    if (source.empty()) return text_cell(date);
    auto it = std::find(sources.begin(), sources.end(), source);
    if (it == sources.end()) it = sources.insert(sources.end(), source);
    const std::string note =
        fmt::format("<a href=\"#source-{0}\">[{0}]</a>", it - sources.begin() + 1);
    return date.empty() ? note : escape(date) + " " + note;
  };
  std::vector<std::vector<std::string>> rows;
  for (const json& i : list(cost, "instances")) {
    std::string name = text(i, "name");
    if (name.empty()) name = text(i, "id");
    rows.push_back({text_cell(text(i, "provider")), text_cell(name), device_of(i),
                    hours_cell(number(i, "run_hours")), cell(usd(number(i, "on_demand_usd"))),
                    cell(usd(number(i, "spot_usd"))), predicted_cell(i), source_of(i)});
  }
  if (!rows.empty()) {
    out += "<h3>Renting</h3>\n" + html_table({{"provider"},
                                              {"instance"},
                                              {"device"},
                                              {"run time", true},
                                              {"on demand", true},
                                              {"spot", true},
                                              {"basis"},
                                              {"price as of"}},
                                             rows, "instances");
  }
  rows.clear();
  for (const json& o : list(cost, "ownership")) {
    rows.push_back({device_of(o), text_cell(text(o, "name")), cell(usd(number(o, "price_usd"))),
                    cell(usd(number(o, "run_usd"))), cell(usd(number(o, "hourly_capital_usd"))),
                    cell(usd(number(o, "hourly_power_usd"))), predicted_cell(o), source_of(o)});
  }
  if (!rows.empty()) {
    out += "<h3>Owning</h3>\n" + html_table({{"device"},
                                             {"name"},
                                             {"price", true},
                                             {"per run", true},
                                             {"capital per hour", true},
                                             {"power per hour", true},
                                             {"basis"},
                                             {"price as of"}},
                                            rows, "ownership");
  }
  if (!sources.empty()) {
    out += "<p class=\"note\">Price sources:</p>\n<ol class=\"sources\">\n";
    for (size_t i = 0; i < sources.size(); ++i) {
      out += fmt::format("<li id=\"source-{}\">{}</li>\n", i + 1, escape(sources[i]));
    }
    out += "</ol>\n";
  }
  rows.clear();
  for (const json& b : list(cost, "break_even")) {
    const auto hours = number(b, "hours_per_month"), months = number(b, "payback_months");
    rows.push_back({device_of(b), text_cell(text(b, "instance")), cell(plain(hours)),
                    cell(plain(months)), cell(plain(number(b, "at_hours_per_month")))});
  }
  if (!rows.empty()) {
    out += "<h3>Own or rent</h3>\n" +
           html_table({{"device"},
                       {"rented instance"},
                       {"break-even hours/month", true},
                       {"payback months", true},
                       {"at hours/month", true}},
                      rows, "break-even") +
           "<p class=\"note\">Break-even: the monthly hours of use above which owning costs less "
           "than renting; payback: months until the purchase pays for itself at the given hours a "
           "month. n/a: never.</p>\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Section: the machine.

std::string machine_html(const json& report) {
  const json& machine = field(report, "machine");
  if (!machine.is_object() || machine.empty()) return "";
  // The keys people look for first, then the rest in the document's order.
  constexpr const char* kFirst[] = {
      "cpu",      "logical_cpus", "cpu_cores",     "memory_gib", "os",
      "hostname", "gpus",         "nvidia_driver", "devices",    "devices_unavailable",
      "compiler", "flags",        "libraries",     "crossover",  "date"};
  std::vector<std::string> keys(std::begin(kFirst), std::end(kFirst));
  for (const auto& [k, v] : machine.items()) {
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<std::vector<std::string>> rows;
  for (const std::string& key : keys) {
    const auto it = machine.find(key);
    if (it == machine.end()) continue;
    std::string label = key == "memory_gib" ? "memory (GiB)" : key;
    std::replace(label.begin(), label.end(), '_', ' ');
    rows.push_back({escape(label), value_html(*it)});
  }
  return html_table({{"property"}, {"value"}}, rows, "machine");
}

// ---------------------------------------------------------------------------------------------
// The page.

constexpr std::string_view kStyle = R"(
:root{--fg:#1d2330;--muted:#5b6475;--line:#dde2ea;--panel:#f5f7fa;--accent:#0b5cad}
*{box-sizing:border-box}
body{margin:0;background:#fff;color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans",sans-serif}
main{max-width:1100px;margin:0 auto;padding:28px 20px 56px}
h1{font-size:1.65em;line-height:1.25;margin:0 0 .2em}
h2{font-size:1.25em;margin:2.2em 0 .7em;padding-bottom:.3em;border-bottom:1px solid var(--line)}
h3{font-size:1.02em;margin:1.4em 0 .4em}
.meta,.note{color:var(--muted)}
.note{font-size:.88em}
nav{margin:.8em 0 0;font-size:.9em}
nav a{color:var(--accent);text-decoration:none;margin-right:1.1em;white-space:nowrap}
.banner{margin:1em 0;background:#fff4e5;border:1px solid #f0b35b;color:#7a4300;padding:.6em .9em;border-radius:6px;font-weight:600}
.advice{margin:0;background:#eef5ff;border-left:4px solid var(--accent);padding:.9em 1.2em .9em 2.4em;border-radius:4px;font-size:1.05em}
.advice li+li{margin-top:.35em}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9em;margin:.3em 0 .9em}
th,td{padding:.36em .6em;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{background:var(--panel);font-weight:600;white-space:nowrap}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tbody tr:hover{background:#fafbfd}
table.machine td:first-child{white-space:nowrap;color:var(--muted);width:12em}
table.machine td{word-break:break-word}
table.runs td,table.outcomes td{white-space:nowrap}
table.outcomes td:last-child{white-space:normal;min-width:16em}
.device{white-space:nowrap}
.na{color:#9aa3b2}
.badge{display:inline-block;font-size:.72em;font-weight:600;line-height:1.5;padding:0 .55em;border-radius:999px;background:#f1e7fb;color:#5b2a86;vertical-align:.1em}
.badge.measured{background:#e3f4ea;color:#1d6b3a}
.swatch{display:inline-block;width:.75em;height:.75em;border-radius:2px;margin-right:.45em;vertical-align:-.04em}
.share{display:inline-block;width:5em;height:.6em;margin-right:.5em;background:#e8edf5;border-radius:3px;overflow:hidden}
.share span{display:block;height:100%;background:#4C78A8}
details{margin:.3em 0}
summary{cursor:pointer;font-weight:600;padding:.2em 0}
ul.assumptions{margin:0;padding-left:1.1em;color:var(--muted);font-size:.9em;min-width:26em}
.notes{margin:.2em 0 .8em;color:var(--muted);font-size:.9em}
ol.sources{color:var(--muted);font-size:.82em;padding-left:2em;word-break:break-word}
a{color:var(--accent)}
ul.kv{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.6em;font-size:.9em}
ul.kv .k{color:var(--muted)}
svg{display:block;width:100%;height:auto;margin:.3em 0 1em;font-family:inherit;overflow:visible}
svg text{font-size:12px;fill:#3a4150}
svg .axis-label{font-size:12.5px;font-weight:600;fill:var(--fg)}
svg .panel-title{font-weight:600;fill:var(--fg)}
svg .muted{font-weight:400;fill:var(--muted)}
svg .mark-label{font-weight:600;fill:var(--fg);paint-order:stroke;stroke:#fff;stroke-width:3px}
svg text.inside{fill:#fff;font-size:11px}
svg line.major{stroke:#e3e7ee}
svg line.minor{stroke:#f1f3f7}
svg .frame{fill:none;stroke:#c8cfda}
footer{margin-top:3em;color:var(--muted);font-size:.85em;border-top:1px solid var(--line);padding-top:.8em}
)";

}  // namespace

std::string render_html_report(const nlohmann::json& report) {
  const DeviceColours colours = device_colours(report);
  std::vector<Section> sections;
  auto add = [&](const char* id, const char* title, std::string html) {
    if (!html.empty()) sections.push_back({id, title, std::move(html)});
  };
  add("advice", "Advice", advice_html(report));
  add("sweep", "Sweep", sweep_html(report, colours));
  add("results", "Results", runs_html(report, colours));
  add("peaks", "Peaks and achieved fraction", peaks_html(report, colours));
  add("time-split", "Time split", phases_html(report, colours));
  add("layers", "Per-layer profile", layers_html(report));
  add("utilisation", "Utilisation", timelines_html(report, colours));
  add("predictions", "Predictions", predictions_html(report, colours));
  add("cost", "Cost", cost_html(report, colours));
  add("machine", "Machine", machine_html(report));

  std::string title = text(report, "title");
  if (title.empty()) title = "crossover report";
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Nothing may load from anywhere: the page is complete as it is, and a string that escaped
      // escaping could still not run a script.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n<meta name=\"viewport\" content=\"width=device-width, "
      "initial-scale=1\">\n<title>" +
      escape(title) + "</title>\n<style>" + std::string(kStyle) +
      "</style>\n</head>\n<body>\n<main>\n";
  page += header_html(report, sections);
  for (const Section& s : sections) {
    page += fmt::format("<section id=\"{}\">\n<h2>{}{}</h2>\n", s.id, s.title,
                        s.id == "predictions" ? " <span class=\"badge\">predicted</span>" : "");
    page += s.html + "</section>\n";
  }
  if (sections.empty()) page += "<p class=\"note\">This report holds no results yet.</p>\n";
  std::string schema = text(report, "schema");
  page += "<footer>Written by crossover" +
          (schema.empty() ? std::string() : " · " + escape(schema)) +
          " · self-contained: this page loads nothing from "
          "elsewhere.</footer>\n</main>\n</body>\n</html>\n";
  return page;
}

void write_html_report(const std::filesystem::path& file, const nlohmann::json& report) {
  write_file_atomic(file, render_html_report(report));
}

}  // namespace xo

// The building blocks of report.html's sections: escaping, cells, tables and device colours.
#include "report/html_parts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "core/format.h"

namespace xo::html {
namespace {

// Okabe–Ito's colour-blind-safe palette first, then darker tones.
constexpr const char* kDevicePalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                          "#56B4E9", "#8C564B", "#7F7F7F", "#BCBD22", "#332288"};

}  // namespace

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
        out +=
            (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') ? ' ' : c;
    }
  }
  return out;
}

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string na() { return "<span class=\"na\">n/a</span>"; }

std::string cell(const std::string& formatted) {
  return formatted == kMissing ? na() : escape(formatted);
}

std::string text_cell(const std::string& raw) { return raw.empty() ? na() : escape(raw); }

std::string text_list(const std::vector<std::string>& items) {
  if (items.empty()) return "none";
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + text_cell(item);
  return out;
}

std::string html_table(const std::vector<Column>& columns,
                       const std::vector<std::vector<std::string>>& rows, std::string_view cls) {
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

void DeviceColours::add(const std::string& device) {
  if (!has(device)) devices_.push_back(device);
}

bool DeviceColours::has(const std::string& device) const {
  return std::find(devices_.begin(), devices_.end(), device) != devices_.end();
}

std::string DeviceColours::operator()(const std::string& device) const {
  const auto it = std::find(devices_.begin(), devices_.end(), device);
  const size_t i =
      it == devices_.end() ? devices_.size() : static_cast<size_t>(it - devices_.begin());
  return kDevicePalette[i % std::size(kDevicePalette)];
}

DeviceColours device_colours(const Report& report) {
  DeviceColours colours;
  if (report.sweep) {
    for (const SweepLine& s : report.sweep->series) colours.add(s.device);
  }
  for (const ReportRun& r : report.runs) colours.add(r.run.result.device.id);
  for (const DevicePeaks& p : report.peaks) colours.add(p.device);
  return colours;
}

std::string swatch(const std::string& colour) {
  return fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", colour);
}

std::string device_cell(const DeviceColours& colours, const std::string& device,
                        const std::string& label) {
  if (device.empty()) return na();
  return "<span class=\"device\">" +
         (colours.has(device) ? swatch(colours(device)) : std::string()) +
         escape(label.empty() ? device : label) + "</span>";
}

std::string run_label(const RunRecord& run) {
  const std::string& model = run.result.model;
  return (model.empty() ? "?" : model) + " on " +
         (run.result.device.id.empty() ? "?" : device_label(run.result));
}

}  // namespace xo::html

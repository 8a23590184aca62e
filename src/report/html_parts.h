// The building blocks of report.html's sections: escaping, table cells (a missing figure reads a
// dimmed "n/a"), tables, and the colour each device keeps in every chart and table of the page.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/document.h"

namespace xo::html {

// `s` with the characters that mean something in HTML escaped, so that it can stand in text and
// in attribute values; control characters other than tab and newlines (parse errors) as spaces.
std::string escape(std::string_view s);

// `v` when it is finite; NaN and infinities read as missing.
std::optional<double> finite(double v);

// A missing value in a table or text: "n/a", dimmed.
std::string na();
// A figure formatted by core/format.h, for a table cell or text: escaped (percent() writes
// "<0.1%"), and "n/a" dimmed.
std::string cell(const std::string& formatted);
// A string from the document, escaped, or a dimmed "n/a" when empty.
std::string text_cell(const std::string& raw);
// Strings from the document, each as text_cell, joined by commas; "none" when there are none.
std::string text_list(const std::vector<std::string>& items);

struct Column {
  std::string header;  // HTML
  bool numeric = false;
};

// Cells are HTML (escaped by the caller). Numeric columns are right-aligned.
std::string html_table(const std::vector<Column>& columns,
                       const std::vector<std::vector<std::string>>& rows,
                       std::string_view cls = "");

// The colour of each device the charts draw, in the order the page first shows them.
class DeviceColours {
 public:
  void add(const std::string& device);
  bool has(const std::string& device) const;
  // Its colour; a device never added gets the next colour of the palette.
  std::string operator()(const std::string& device) const;

 private:
  std::vector<std::string> devices_;
};

// The sweep's series first, then the runs and the peaks. The catalog's devices (predictions,
// costs) are never drawn and get no colour, so that the palette does not repeat among the devices
// that are.
DeviceColours device_colours(const Report& report);

std::string swatch(const std::string& colour);
// A device's name for a table cell: its chart colour first where it has one.
std::string device_cell(const DeviceColours& colours, const std::string& device,
                        const std::string& label = "");  // shown instead of `device`

// "disc-4 on cpu", with "?" for a missing model or device.
std::string run_label(const RunRecord& run);

// A whole page in the report's style: `header` (HTML: title, meta line, navigation) above the
// sections, each under its heading (`predicted` adds the badge), and the footer naming `schema`.
struct PageSection {
  std::string id, title, html;
  bool predicted = false;
};
std::string html_page(const std::string& title, const std::string& header,
                      const std::vector<PageSection>& sections, std::string_view schema);

}  // namespace xo::html

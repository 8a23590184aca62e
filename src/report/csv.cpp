// The cells of crossover's CSV files (results.csv of a job and of a search).
#include "report/csv.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

#include "core/format.h"

namespace xo {

// A text cell (model, device, axis), whose value comes from a spec or a results file. A cell that
// begins with = + - @ (or a tab or carriage return) is a formula to a spreadsheet, which would run
// it on opening ("CSV injection"): it gets a leading apostrophe, as OWASP recommends, so it shows
// as text. Control characters are escaped (terminal_safe: a newline is \n, so one cell stays one
// line), then the cell is quoted as RFC 4180 asks where it holds a comma or a quote.
std::string csv_text(const std::string& raw) {
  const bool formula =
      !raw.empty() && std::string_view("=+-@\t\r").find(raw[0]) != std::string_view::npos;
  std::string v = formula ? "'" : "";
  v += terminal_safe(raw);
  if (v.find_first_of(",\"") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_number(double v) {
  return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string();
}

}  // namespace xo

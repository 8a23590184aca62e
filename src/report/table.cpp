#include "report/table.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/format.h"

namespace xo {
namespace {

bool looks_numeric(const std::string& s) {
  return !s.empty() &&
         (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '.');
}

}  // namespace

// Cells are made terminal-safe as they come in: a model or device name from a file is printed
// with its control characters shown, never acted on, and a newline in one cannot break the rows.
Table::Table(std::vector<std::string> headers) {
  for (const std::string& h : headers) headers_.push_back(terminal_safe(h));
}

void Table::add_row(std::vector<std::string> cells) {
  XO_ASSERT(cells.size() == headers_.size());
  for (std::string& cell : cells) cell = terminal_safe(cell);
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    width[c] = headers_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool right = !header && looks_numeric(cells[c]);
      out += c ? "  " : "";
      out += right ? pad + cells[c] : cells[c] + (c + 1 < cells.size() ? pad : "");
    }
    return out + "\n";
  };
  std::string out = line(headers_, true);
  size_t total = 0;
  for (size_t w : width) total += w;
  out += std::string(total + 2 * (width.size() - 1), '-') + "\n";
  for (const auto& row : rows_) out += line(row, false);
  return out;
}

}  // namespace xo

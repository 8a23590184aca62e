// The CSV loader: numeric feature columns, an integer class label last, an optional header line.
// Every error names the file and line and says what was expected.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "data/dataset.h"

namespace xo {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

void split(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
}

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Dataset load_csv(const std::filesystem::path& path, int64_t classes, int64_t expected_features) {
  const std::string text = read_file(path);
  const std::string name = path.string();
  Dataset d;
  d.classes = classes;
  d.description = fmt::format("csv: {}", name);
  std::vector<std::string_view> fields;
  size_t columns = 0;
  int64_t first_data_line = 0;
  bool seen_first = false;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string_view line =
        trim(std::string_view(text).substr(pos, end == std::string::npos ? end : end - pos));
    pos = end == std::string::npos ? text.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    split(line, fields);
    if (!seen_first) {
      seen_first = true;
      double ignored;
      bool numeric = true;
      for (auto f : fields) numeric = numeric && parse_double(f, ignored);
      if (!numeric) continue;  // a header line
    }
    if (columns == 0) {
      columns = fields.size();
      first_data_line = line_no;
      if (columns < 2) {
        throw UserError(
            fmt::format("{}:{}: row has {} column, expected at least 2 (features, then the label)",
                        name, line_no, columns));
      }
      const int64_t features = static_cast<int64_t>(columns) - 1;
      if (expected_features > 0 && features != expected_features) {
        throw UserError(fmt::format("{}:{}: {} feature columns, but the model expects {} inputs",
                                    name, line_no, features, expected_features));
      }
      d.features = features;
    }
    if (fields.size() != columns) {
      throw UserError(
          fmt::format("{}:{}: row has {} columns, expected {} like the first data row "
                      "(line {})",
                      name, line_no, fields.size(), columns, first_data_line));
    }
    for (size_t c = 0; c + 1 < columns; ++c) {
      double v;
      if (!parse_double(fields[c], v) || !std::isfinite(v)) {
        throw UserError(fmt::format("{}:{}: column {} is '{}', not a finite number", name, line_no,
                                    c + 1, fields[c]));
      }
      d.x.push_back(static_cast<float>(v));
    }
    double label;
    if (!parse_double(fields.back(), label) || label != std::floor(label) ||
        !std::isfinite(label)) {
      throw UserError(fmt::format("{}:{}: label '{}' is not an integer class index", name, line_no,
                                  fields.back()));
    }
    if (label < 0 || label >= static_cast<double>(classes)) {
      throw UserError(
          fmt::format("{}:{}: label {} out of range: the model has {} classes, so "
                      "labels must be integers in [0, {}]",
                      name, line_no, label, classes, classes - 1));
    }
    d.y.push_back(static_cast<int32_t>(label));
  }
  if (d.y.empty()) throw UserError(fmt::format("{}: no data rows", name));
  d.samples = static_cast<int64_t>(d.y.size());
  d.description = fmt::format("csv: {} ({} rows, {} features)", name, d.samples, d.features);
  return d;
}

}  // namespace xo

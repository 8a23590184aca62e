// The CSV loader: numeric feature columns, an integer class label last, an optional header line;
// and the rows to predict (data/rows.h), whose label is optional and left out. Every error names
// the file and line and says what was expected.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "data/dataset.h"
#include "data/rows.h"

namespace xo {
namespace {

// Spreadsheet programs often start a UTF-8 CSV with a byte order mark. Left in place it would make
// the first field of a header-less file non-numeric, and the first data row would be taken for a
// header and silently dropped.
constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";
constexpr size_t kMinColumns = 2;  // at least one feature, then the label

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

// from_chars is locale-independent and fast, but rejects a leading '+', which other tools write;
// strip one, and only one, so "+-1" stays an error. It accepts "nan" and "inf": callers check
// finiteness so those get their own message.
bool parse_double(std::string_view s, double& out) {
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) return false;
  }
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

// A header names its columns: no field of it is a number.
bool is_header(const std::vector<std::string_view>& fields) {
  double ignored;
  return !std::any_of(fields.begin(), fields.end(),
                      [&](auto f) { return parse_double(f, ignored); });
}

// Whether a file's rows end in a label: always for training, optionally for rows to predict.
enum class Labels { Required, Optional };

// The first data row sets the columns, checked against the model's inputs; the dataset reserves
// a row per line of the file. Returns whether the rows end in a label.
bool set_columns(Dataset& d, size_t columns, int64_t expected_features, Labels labels, size_t lines,
                 const std::string& name, int64_t line_no) {
  if (labels == Labels::Optional) {
    XO_ASSERT(expected_features > 0);
    const auto features = static_cast<size_t>(expected_features);
    if (columns != features && columns != features + 1) {
      throw UserError(fmt::format(
          "{}:{}: row has {} columns, but the model expects {} inputs (expected {} feature "
          "columns, or {} then a label, which is left out)",
          name, line_no, columns, expected_features, features, features));
    }
    d.features = expected_features;
    d.y.reserve(lines);
    d.x.reserve(lines * features);
    return columns == features + 1;
  }
  if (columns < kMinColumns) {
    throw UserError(fmt::format(
        "{}:{}: row has {} column, expected at least {} (feature columns, then the label)", name,
        line_no, columns, kMinColumns));
  }
  const int64_t features = static_cast<int64_t>(columns) - 1;
  if (expected_features > 0 && features != expected_features) {
    throw UserError(fmt::format(
        "{}:{}: {} feature columns, but the model expects {} inputs (expected {} feature "
        "columns, then the label)",
        name, line_no, features, expected_features, expected_features));
  }
  d.features = features;
  d.y.reserve(lines);
  d.x.reserve(lines * static_cast<size_t>(features));
  return true;
}

// The row's feature columns, appended to d.x as float32.
void read_features(Dataset& d, const std::vector<std::string_view>& fields, bool first,
                   const std::string& name, int64_t line_no) {
  for (size_t c = 0; c < static_cast<size_t>(d.features); ++c) {
    double v;
    if (!parse_double(fields[c], v)) {
      throw UserError(fmt::format(
          "{}:{}: column {} is '{}', not a number{}", name, line_no, c + 1, fields[c],
          first ? " (the line has numbers, so it is data, not a header: a header has no "
                  "numeric field)"
                : ""));
    }
    // Features are stored as float32, so a double beyond float's range is rejected too.
    if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<float>::max()) {
      throw UserError(
          fmt::format("{}:{}: column {} is '{}', not a finite number (expected a "
                      "finite float32 value)",
                      name, line_no, c + 1, fields[c]));
    }
    d.x.push_back(static_cast<float>(v));
  }
}

// The label column: a class index, or with no classes a real target carried in the label slot as
// a float's bits.
int32_t read_label(std::string_view label_text, int64_t classes, const std::string& name,
                   int64_t line_no) {
  double label;
  if (classes == 0) {
    if (!parse_double(label_text, label) || !std::isfinite(label) ||
        std::abs(label) > std::numeric_limits<float>::max()) {
      throw UserError(fmt::format(
          "{}:{}: target '{}' is not a finite number (expected the regression target, a finite "
          "float32 value, in the last column)",
          name, line_no, label_text));
    }
    return std::bit_cast<int32_t>(static_cast<float>(label));
  }
  if (!parse_double(label_text, label) || !std::isfinite(label) || label != std::floor(label)) {
    throw UserError(fmt::format(
        "{}:{}: label '{}' is not an integer class index (expected an integer in [0, {}])", name,
        line_no, label_text, classes - 1));
  }
  if (label < 0 || label >= static_cast<double>(classes)) {
    throw UserError(
        fmt::format("{}:{}: label {} out of range: the model has {} classes, so "
                    "labels must be integers in [0, {}]",
                    name, line_no, label, classes, classes - 1));
  }
  return static_cast<int32_t>(label);
}

Dataset parse(const std::string& text, const std::string& name, int64_t classes,
              int64_t expected_features, Labels labels) {
  XO_ASSERT(classes >= 0);
  std::string_view body(text);
  if (body.substr(0, kUtf8Bom.size()) == kUtf8Bom) body.remove_prefix(kUtf8Bom.size());
  Dataset d;
  d.classes = classes;
  // One row per line at most: reserving (at the first data row) avoids regrowing the vectors on
  // files of 60k rows.
  // Lines end in LF, CRLF or a lone CR (classic Mac OS; once read as one line of 800 columns).
  size_t lines = static_cast<size_t>(std::count(body.begin(), body.end(), '\n'));
  if (lines == 0) lines = static_cast<size_t>(std::count(body.begin(), body.end(), '\r'));
  ++lines;
  std::vector<std::string_view> fields;
  size_t columns = 0;
  bool labelled = true;
  int64_t first_data_line = 0;
  bool seen_first = false;
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find_first_of("\r\n", pos);
    const std::string_view line =
        trim(body.substr(pos, end == std::string_view::npos ? end : end - pos));
    pos = end == std::string_view::npos ? body.size()
          : body.compare(end, 2, "\r\n") == 0 ? end + 2
                                              : end + 1;
    ++line_no;
    // A row of a thousand features parses in tens of microseconds: a poll every 1024 lines.
    if (line_no % 1024 == 0) throw_if_stop_requested(("reading the CSV file " + name).c_str());
    if (line.empty()) continue;
    split(line, fields);
    // Only the first line may be a header. A first line with some numbers is data, and a field
    // that is not a number there is a typo ("0.5,O.3,1") reported below; taken for a header, the
    // row was dropped without a word.
    const bool first = !seen_first;
    seen_first = true;
    if (first && is_header(fields)) continue;
    if (columns == 0) {
      columns = fields.size();
      first_data_line = line_no;
      labelled = set_columns(d, columns, expected_features, labels, lines, name, line_no);
    }
    if (fields.size() != columns) {
      throw UserError(
          fmt::format("{}:{}: row has {} columns, expected {} like the first data row "
                      "(line {})",
                      name, line_no, fields.size(), columns, first_data_line));
    }
    read_features(d, fields, first, name, line_no);
    d.y.push_back(labels == Labels::Optional ? 0
                                             : read_label(fields.back(), classes, name, line_no));
  }
  if (d.y.empty()) {
    throw UserError(fmt::format(
        "{}: no data rows (expected lines of numeric features{})", name,
        labels == Labels::Optional ? ", a label last or none" : ", then an integer label"));
  }
  d.samples = static_cast<int64_t>(d.y.size());
  d.description = fmt::format("csv: {} ({} rows, {} features{})", name, d.samples, d.features,
                              labels == Labels::Required ? ""
                              : labelled                 ? ", the label column left out"
                                                         : ", no label");
  return d;
}

}  // namespace

Dataset load_csv(const std::filesystem::path& path, int64_t classes, int64_t expected_features) {
  return parse_csv(read_file(path), path.string(), classes, expected_features);
}

Dataset parse_csv(const std::string& text, const std::string& name, int64_t classes,
                  int64_t expected_features) {
  return parse(text, name, classes, expected_features, Labels::Required);
}

Dataset parse_csv_rows(const std::string& text, const std::string& name, int64_t features) {
  return parse(text, name, 0, features, Labels::Optional);
}

}  // namespace xo

#include "tune/space.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "core/error.h"
#include "core/random.h"

namespace xo {
namespace {

// As the sweep: more grid points than this is a typo (a range with a zero too many).
constexpr size_t kMaxGrid = 10000;
constexpr size_t kMaxIntegerRange = 1000;

// Items split at commas outside brackets and quotes ("[3, 3],[5, 5]" is two items).
std::vector<std::string> split_items(const std::string& list) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  bool quoted = false;
  for (char c : list) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '{')) ++depth;
    if (!quoted && (c == ']' || c == '}')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  items.push_back(item);
  return items;
}

bool parse_integer(const std::string& s, int64_t& v) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool parse_real(const std::string& s, double& v) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && ptr == s.data() + s.size() && std::isfinite(v);
}

// A real value as TOML reads it back as a float and a person reads it: 4 significant digits.
std::string real_text(double v) {
  std::string t = fmt::format("{:.4g}", v);
  if (t.find_first_of(".en") == std::string::npos) t += ".0";
  return t;
}

std::string draw(const Dimension& d, Rng& rng) {
  if (!d.range) return d.values[rng.below(d.values.size())];
  if (d.integer) {
    if (d.log) {
      const double x = std::exp(rng.uniform(std::log(d.low), std::log(d.high + 1)));
      return std::to_string(
          std::min(static_cast<int64_t>(std::floor(x)), static_cast<int64_t>(d.high)));
    }
    const auto span = static_cast<uint64_t>(d.high - d.low) + 1;
    return std::to_string(static_cast<int64_t>(d.low) + static_cast<int64_t>(rng.below(span)));
  }
  if (d.log) return real_text(std::exp(rng.uniform(std::log(d.low), std::log(d.high))));
  return real_text(rng.uniform(d.low, d.high));
}

}  // namespace

Dimension parse_dimension(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw UserError(fmt::format(
        "--vary '{}': expected KEY=V1,V2,... or KEY=A..B[:log] (e.g. lr=1e-4..1e-1:log, "
        "train.batch=32,64,128, optimizer=sgd,adam)",
        text));
  }
  Dimension d;
  d.text = text;
  d.key = parse_spec_key(text.substr(0, eq));
  std::string rest = text.substr(eq + 1);
  const bool log = rest.size() > 4 && rest.compare(rest.size() - 4, 4, ":log") == 0;
  if (log) rest.resize(rest.size() - 4);
  const auto dots = rest.find("..");
  if (dots != std::string::npos && rest.find(',') == std::string::npos) {
    const std::string a = rest.substr(0, dots), b = rest.substr(dots + 2);
    int64_t ia = 0, ib = 0;
    d.integer = parse_integer(a, ia) && parse_integer(b, ib);
    if (!parse_real(a, d.low) || !parse_real(b, d.high)) {
      throw UserError(
          fmt::format("--vary '{}': the range '{}' needs two numbers A..B", text, rest));
    }
    // Integers a double holds exactly: draws compute in doubles.
    constexpr int64_t kExact = int64_t{1} << 53;
    if (d.integer && (ia > kExact || ia < -kExact || ib > kExact || ib < -kExact)) {
      throw UserError(fmt::format("--vary '{}': integers beyond 2^53 are not taken", text));
    }
    if (d.high <= d.low) {
      throw UserError(fmt::format("--vary '{}': the range must go up (A < B)", text));
    }
    if (log && d.low <= 0) {
      throw UserError(fmt::format("--vary '{}': a log range needs A > 0", text));
    }
    if (d.key.axis && !d.integer) {
      throw UserError(fmt::format("--vary '{}': the axis {} takes integers", text, d.key.text));
    }
    d.range = true;
    d.log = log;
    // An integer range without :log is a list too, as the sweep reads it (grids take it). The
    // count, not `v <= ib`, ends the loop (which would not end at INT64_MAX).
    if (d.integer && !log && d.high - d.low < static_cast<double>(kMaxIntegerRange)) {
      const int64_t n = ib - ia + 1;
      for (int64_t i = 0; i < n; ++i) d.values.push_back(std::to_string(ia + i));
    }
    return d;
  }
  if (log) {
    throw UserError(fmt::format("--vary '{}': ':log' follows a range A..B", text));
  }
  for (std::string& item : split_items(rest)) {
    if (item.empty()) {
      throw UserError(
          fmt::format("--vary '{}': an empty value (two commas, or one at an end)", text));
    }
    d.values.push_back(std::move(item));
  }
  return d;
}

std::vector<Assignment> grid(const std::vector<Dimension>& dims) {
  size_t total = 1;
  for (const Dimension& d : dims) {
    if (d.values.empty() && d.integer && !d.log) {
      throw UserError(fmt::format(
          "--vary '{}': the range holds over {} integers: give --samples N to draw from it", d.text,
          kMaxIntegerRange));
    }
    if (d.values.empty()) {
      throw UserError(fmt::format(
          "--vary '{}': a range of {} is sampled, not a grid: give --samples N (or list the "
          "values)",
          d.text, d.log ? "a logarithm" : "real numbers"));
    }
    total *= d.values.size();
    if (total > kMaxGrid) {
      throw UserError(
          fmt::format("the grid of --vary has over {} points: give --samples N", kMaxGrid));
    }
  }
  std::vector<Assignment> out;
  std::vector<size_t> at(dims.size(), 0);
  for (size_t n = 0; n < total; ++n) {
    Assignment a;
    for (size_t i = 0; i < dims.size(); ++i)
      a.emplace_back(dims[i].key.text, dims[i].values[at[i]]);
    out.push_back(std::move(a));
    for (size_t i = dims.size(); i-- > 0;) {
      if (++at[i] < dims[i].values.size()) break;
      at[i] = 0;
    }
  }
  return out;
}

std::vector<Assignment> sample(const std::vector<Dimension>& dims, int64_t n, uint64_t seed) {
  // Refused before a draw: a billion samples once took gigabytes and half a minute, deaf to
  // Ctrl-C.
  if (n > static_cast<int64_t>(kMaxGrid)) {
    throw UserError(
        fmt::format("--samples {}: a search takes at most {} trials (as a grid does); draw fewer",
                    n, kMaxGrid));
  }
  Rng rng(seed);
  std::vector<Assignment> out;
  std::set<Assignment> seen;
  // Redraws of points already drawn end the search for more after this many in a row.
  constexpr int kMaxRedraws = 1000;
  int redraws = 0;
  while (static_cast<int64_t>(out.size()) < n && redraws < kMaxRedraws) {
    Assignment a;
    for (const Dimension& d : dims) a.emplace_back(d.key.text, draw(d, rng));
    if (seen.insert(a).second) {
      out.push_back(std::move(a));
      redraws = 0;
    } else {
      ++redraws;
    }
  }
  return out;
}

ModelSpec trial_spec(const ModelSpec& base, const std::vector<Dimension>& dims,
                     const Assignment& a) {
  std::vector<SpecSetting> settings;
  for (size_t i = 0; i < dims.size(); ++i) settings.emplace_back(dims[i].key, a[i].second);
  return with_spec_values(base, settings);
}

void check_dimensions(const ModelSpec& base, const std::vector<Dimension>& dims) {
  for (const Dimension& d : dims) {
    if (!d.values.empty()) {
      for (const std::string& v : d.values) with_spec_value(base, d.key, v);
    } else {
      with_spec_value(base, d.key,
                      d.integer ? std::to_string(static_cast<int64_t>(d.low)) : real_text(d.low));
      with_spec_value(base, d.key,
                      d.integer ? std::to_string(static_cast<int64_t>(d.high)) : real_text(d.high));
    }
  }
}

std::string fusion_key(ModelSpec spec) {
  spec.name.clear();
  spec.init.clear();
  spec.init_weights.reset();
  const int64_t batch = spec.train.batch;
  spec.train = TrainSpec{};
  spec.train.batch = batch;
  for (LayerSpec& l : spec.layers) {
    if (l.type == LayerType::Dropout) l.p = 0.5;
  }
  return to_toml(spec);
}

}  // namespace xo

// The TOML reader over toml++: typed, checked access that names the file, the line and the dotted
// key in every error; and the TOML text helpers the spec writer shares with it.
#include "io/toml.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "core/error.h"

namespace xo {
namespace {

constexpr int kTopLine = 1;            // where a key missing from the root is reported
constexpr size_t kMaxQuotedList = 40;  // longer lists are summarised by their size
constexpr std::string_view kDateExpected = "a date YYYY-MM-DD with a valid month and day";

// TomlNode is only a name for toml::node outside this file: the pointers are converted back and
// forth, never dereferenced as TomlNode.
const toml::node& node_of(const TomlNode* n) { return *reinterpret_cast<const toml::node*>(n); }
const TomlNode* handle(const toml::node& n) { return reinterpret_cast<const TomlNode*>(&n); }

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

bool is_bare_key(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// A value as it would be written in TOML (tables abbreviated), for quoting in messages.
std::string value_text(const toml::node& n) {
  if (const auto* s = n.as_string()) return toml_string(**s);
  if (const auto* f = n.as_floating_point()) return toml_float(**f);
  if (const auto* a = n.as_array()) {
    std::vector<std::string> items;
    for (const toml::node& item : *a) items.push_back(value_text(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  if (n.is_table()) return "{...}";
  std::ostringstream text;
  n.visit([&](auto&& v) { text << v; });
  return text.str();
}

bool valid_date(std::string_view s) {
  constexpr size_t kLength = 10;  // YYYY-MM-DD
  if (s.size() != kLength || s[4] != '-' || s[7] != '-') return false;
  auto digits = [&](size_t from, size_t count, int& out) {
    const char* first = s.data() + from;
    const auto [end, ec] = std::from_chars(first, first + count, out);
    return ec == std::errc() && end == first + count &&
           std::all_of(first, first + count, [](char c) { return c >= '0' && c <= '9'; });
  };
  int year = 0, month = 0, day = 0;
  if (!digits(0, 4, year) || !digits(5, 2, month) || !digits(8, 2, day)) return false;
  constexpr int kMonths = 12;
  if (month < 1 || month > kMonths) return false;
  constexpr int kDays[kMonths] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int last = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
  return day >= 1 && day <= last;
}

}  // namespace

void fail_at(std::string_view origin, int line, std::string_view key, std::string_view what) {
  if (line > kNoLine) throw UserError(fmt::format("{}:{}: {}: {}", origin, line, key, what));
  throw UserError(fmt::format("{}: {}: {}", origin, key, what));
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string toml_float(double v) {
  std::string text = fmt::format("{}", v);
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

std::string toml_path(std::string_view parent, std::string_view key) {
  const std::string k = is_bare_key(key) ? std::string(key) : toml_string(key);
  return parent.empty() ? k : fmt::format("{}.{}", parent, k);
}

bool Range::contains(double v) const {
  return (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
}

std::string Range::text() const {
  if (std::isinf(high)) return fmt::format("{} {}", low_open ? ">" : ">=", low);
  return fmt::format("in {}{}, {}{}", low_open ? '(' : '[', low, high, high_open ? ')' : ']');
}

// --- TomlValue -----------------------------------------------------------------------------------

bool TomlValue::is_integer() const { return node_ && node_of(node_).is_integer(); }

bool TomlValue::is_number() const {
  if (!node_) return false;
  const toml::node& n = node_of(node_);
  if (n.is_integer()) return true;
  const auto* f = n.as_floating_point();
  return f && std::isfinite(f->get());
}

bool TomlValue::is_string() const { return node_ && node_of(node_).is_string(); }

bool TomlValue::is_list() const { return node_ && node_of(node_).is_array(); }

int64_t TomlValue::integer() const {
  if (!is_integer()) expected("an integer");
  return node_of(node_).as_integer()->get();
}

int64_t TomlValue::integer_at_least(int64_t min, std::string_view noun) const {
  const int64_t v = integer();
  if (v < min) {
    const std::string bound =
        min == 1 ? std::string("a positive integer") : fmt::format("an integer >= {}", min);
    fail(fmt::format("{}{}{} must be {}", noun, noun.empty() ? "" : " ", v, bound));
  }
  return v;
}

int64_t TomlValue::integer_in(int64_t min, int64_t max, std::string_view noun) const {
  const int64_t v = integer_at_least(min, noun);
  if (v > max) {
    fail(fmt::format("{}{}{} is too large (expected an integer <= {})", noun,
                     noun.empty() ? "" : " ", v, max));
  }
  return v;
}

double TomlValue::number() const {
  if (!is_number()) expected("a finite number");
  const toml::node& n = node_of(node_);
  if (const auto* i = n.as_integer()) return static_cast<double>(i->get());
  return n.as_floating_point()->get();
}

double TomlValue::number(const Range& range, std::string_view why) const {
  const double v = number();
  if (!range.contains(v)) {
    fail(fmt::format("{} must be {}{}{}{}", toml_float(v), range.text(), why.empty() ? "" : " (",
                     why, why.empty() ? "" : ")"));
  }
  return v;
}

bool TomlValue::boolean() const {
  if (!node_ || !node_of(node_).is_boolean()) expected("true or false");
  return node_of(node_).as_boolean()->get();
}

std::string TomlValue::string(std::string_view what) const {
  if (!is_string()) expected(what.empty() ? "a string" : what);
  return node_of(node_).as_string()->get();
}

std::string TomlValue::non_empty_string() const {
  if (!is_string() || node_of(node_).as_string()->get().empty()) expected("a non-empty string");
  return node_of(node_).as_string()->get();
}

std::string TomlValue::date() const {
  if (node_ && node_of(node_).is_date()) {
    const toml::date d = node_of(node_).as_date()->get();
    return fmt::format("{:04}-{:02}-{:02}", d.year, d.month, d.day);
  }
  if (!is_string() || !valid_date(node_of(node_).as_string()->get())) expected(kDateExpected);
  return node_of(node_).as_string()->get();
}

size_t TomlValue::choice(std::string_view noun, const std::vector<std::string_view>& names) const {
  const std::string list = fmt::format("{}", fmt::join(names, ", "));
  if (!is_string()) expected(fmt::format("the {}, one of: {}", noun, list));
  const std::string& v = node_of(node_).as_string()->get();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == v) return i;
  }
  fail(fmt::format("unknown {} '{}' (expected one of: {})", noun, v, list));
}

std::vector<TomlValue> TomlValue::list(std::string_view what) const {
  if (!is_list()) expected(what);
  std::vector<TomlValue> items;
  const toml::array& a = *node_of(node_).as_array();
  for (size_t i = 0; i < a.size(); ++i) {
    items.push_back(
        TomlValue(handle(a[i]), origin_, fmt::format("{}[{}]", path_, i), line_of(a[i])));
  }
  return items;
}

TomlTable TomlValue::table(std::string_view what) const {
  if (!node_ || !node_of(node_).is_table()) expected(what);
  return TomlTable(node_, origin_, path_, line_);
}

void TomlValue::fail(std::string_view what) const { fail_at(origin_, line_, path_, what); }

void TomlValue::expected(std::string_view what) const {
  if (!node_) fail(fmt::format("missing (expected {})", what));
  fail(fmt::format("got {} (expected {})", describe(), what));
}

std::string TomlValue::describe() const {
  if (!node_) return "nothing";
  const toml::node& n = node_of(node_);
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array: {
      const toml::array& a = *n.as_array();
      if (a.empty()) return "an empty list";
      const std::string text = value_text(n);
      return text.size() <= kMaxQuotedList ? "the list " + text
                                           : fmt::format("a list of {} items", a.size());
    }
    case toml::node_type::string:
      return "the string " + value_text(n);
    case toml::node_type::integer:
      return "the integer " + value_text(n);
    case toml::node_type::floating_point:
      return "the float " + value_text(n);
    case toml::node_type::boolean:
      return "the boolean " + value_text(n);
    default:
      return "the date/time " + value_text(n);
  }
}

// --- TomlTable -----------------------------------------------------------------------------------

TomlValue TomlTable::get(std::string_view key) const {
  const toml::node* n = node_of(node_).as_table()->get(key);
  std::string path = toml_path(path_, key);
  if (!n) return TomlValue(nullptr, origin_, std::move(path), line_);
  return TomlValue(handle(*n), origin_, std::move(path), line_of(*n));
}

std::vector<std::string> TomlTable::keys() const {
  // toml++ keeps keys sorted by name; messages follow the file.
  std::vector<const toml::key*> keys;
  for (auto&& [key, value] : *node_of(node_).as_table()) keys.push_back(&key);
  std::stable_sort(keys.begin(), keys.end(), [](const toml::key* a, const toml::key* b) {
    return a->source().begin < b->source().begin;
  });
  std::vector<std::string> names;
  for (const toml::key* key : keys) names.emplace_back(key->str());
  return names;
}

void TomlTable::only_keys(const std::vector<std::string_view>& allowed) const {
  for (const std::string& key : keys()) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    get(key).fail(fmt::format("unknown key (expected one of: {})", fmt::join(allowed, ", ")));
  }
}

TomlTable TomlTable::renamed(std::string path) const {
  return TomlTable(node_, origin_, std::move(path), line_);
}

// --- TomlDocument --------------------------------------------------------------------------------

struct TomlDocument::Tree {
  toml::table root;
};

TomlDocument::TomlDocument(std::string_view text, std::string origin)
    : origin_(std::move(origin)), tree_(std::make_unique<Tree>()) {
  try {
    tree_->root = toml::parse(text, origin_);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}: TOML syntax error (column {}): {}", origin_,
                                e.source().begin.line, e.source().begin.column, e.description()));
  }
}

TomlDocument::~TomlDocument() = default;

TomlTable TomlDocument::root() const {
  return TomlTable(handle(tree_->root), origin_, "", kTopLine);
}

namespace {

// toml++ writes some quoted keys back bare (one holding a tab or a '), which then do not read:
// every key toml_with_value writes is a bare key, as every key of a spec is.
void check_bare_key(std::string_view key, std::string_view what) {
  if (!is_bare_key(key)) {
    throw UserError(fmt::format(
        "{}: '{}' is not a key of a spec (expected letters, digits, '_' and '-' only)", what, key));
  }
}

// The same for every key of the tables in `node` (an inline table of a --vary value).
void check_bare_keys(const toml::node& node, std::string_view what) {
  if (const auto* table = node.as_table()) {
    for (const auto& [key, value] : *table) {
      check_bare_key(key.str(), what);
      check_bare_keys(value, what);
    }
  } else if (const auto* list = node.as_array()) {
    for (const auto& item : *list) check_bare_keys(item, what);
  }
}

// `value` set at `path` in `root` (toml_with_value).
void set_value(toml::table& root, const std::vector<std::string>& path, std::string_view value,
               std::string_view what) {
  XO_ASSERT(!path.empty());
  // The value: TOML where it reads as TOML, else the text as a string.
  toml::table holder;
  try {
    holder = toml::parse(fmt::format("v = {}", value));
  } catch (const toml::parse_error&) {
    holder = toml::table{{"v", std::string(value)}};
  }
  if (holder.size() != 1 || !holder.contains("v")) holder = toml::table{{"v", std::string(value)}};
  for (const std::string& key : path) check_bare_key(key, what);
  check_bare_keys(*holder.get("v"), what);
  toml::node* at = &root;
  std::string walked;
  for (size_t i = 0; i < path.size(); ++i) {
    const std::string& key = path[i];
    const bool last = i + 1 == path.size();
    if (auto* list = at->as_array()) {
      size_t index = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size()) {
        throw UserError(
            fmt::format("{}: {} is a list: expected an index (0 to {}) after it, not "
                        "'{}'",
                        what, walked, list->size() - 1, key));
      }
      if (index >= list->size()) {
        throw UserError(fmt::format("{}: {} has {} items: index {} is past its end (0 to {})", what,
                                    walked, list->size(), index, list->size() - 1));
      }
      if (last) {
        list->replace(list->begin() + static_cast<std::ptrdiff_t>(index), *holder.get("v"));
      } else {
        at = list->get(index);
      }
    } else if (auto* table = at->as_table()) {
      if (last) {
        table->insert_or_assign(key, *holder.get("v"));
      } else {
        if (!table->contains(key)) table->insert(key, toml::table{});
        at = table->get(key);
      }
    } else {
      throw UserError(
          fmt::format("{}: {} is a single value, not a table or a list: '{}' cannot "
                      "follow it",
                      what, walked, key));
    }
    walked = walked.empty() ? key : fmt::format("{}.{}", walked, key);
  }
}

}  // namespace

std::string toml_with_value(std::string_view text, const std::vector<std::string>& path,
                            std::string_view value, std::string_view what) {
  return toml_with_values(text, {{path, std::string(value), std::string(what)}});
}

std::string toml_with_values(std::string_view text, const std::vector<TomlSetting>& settings) {
  toml::table root = toml::parse(text);
  for (const TomlSetting& s : settings) set_value(root, s.path, s.value, s.what);
  std::ostringstream out;
  out << toml::toml_formatter(root);
  return out.str();
}

}  // namespace xo

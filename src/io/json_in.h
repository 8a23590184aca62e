// A checked reader of JSON documents: every field read names the file, the place in the document
// and the field when it is missing, of the wrong type or out of its range (strict), or reads as
// missing (lenient, to show whatever a damaged file still holds). Never operator[] on a const
// document. An enum written by name (`named<E>`) is read through three functions declared beside
// the enum and found by argument-dependent lookup: `json_name(E)`, `json_name_parse(string_view,
// E)` (nullopt when no value has that name) and `json_names_expected(E)` ("\"cpu\" or \"gpu\"").
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace xo {

enum class ReadMode { Strict, Lenient };

inline const char* json_type_name(const nlohmann::json& v) {
  using json = nlohmann::json;
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::discarded:
      return "nothing";
    default:
      return "a number";
  }
}

// A figure as the documents write it: null where it was not measured (JSON has no NaN).
inline nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json();
}

// A double as it was, for a document read back to go on bit for bit (a checkpoint): a finite one
// as a JSON number (nlohmann-json dumps the shortest digits that read back to the same bits), NaN
// and the infinities, which JSON lacks, as the strings "nan", "inf" and "-inf".
inline nlohmann::json exact_number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}
// The double `exact_number` wrote; nullopt where `v` is not one.
inline std::optional<double> exact_number_value(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}
inline constexpr const char* kExactExpected = "a number, \"nan\", \"inf\" or \"-inf\"";

struct JsonSource {
  std::string origin;
  ReadMode mode;
};

// One object of a document, named for errors by where it sits ("run 'disc-4' on cpu",
// "cost.instances[2]"); its origin (the file) left out of them where empty, for a caller that
// names the file itself. Strict: the first wrong field throws a UserError naming the file, the
// place and the field. Lenient: a wrong field reads as missing (NaN, 0, "", false, empty).
class JsonIn {
  using json = nlohmann::json;
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

 public:
  JsonIn(const json& j, std::string where, const JsonSource& source)
      : j_(j), where_(std::move(where)), source_(source) {
    if (!j_.is_object()) fail("", "an object", &j_);
  }

  const std::string& where() const { return where_; }
  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }

  std::string text(const char* key) const {
    const json* v = find(key, "a string");
    if (!v) return {};
    if (!v->is_string()) return fail(key, "a string", v), std::string();
    return v->get<std::string>();
  }
  std::optional<std::string> optional_text(const char* key) const {
    const json* v = find(key, "a string or null");
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_string()) return fail(key, "a string or null", v), std::nullopt;
    return v->get<std::string>();
  }
  // An enum's value by its name (see the top of this file); E{} where lenient.
  template <class E>
  E named(const char* key) const {
    const char* expected = json_names_expected(E{});
    const json* v = find(key, expected);
    if (!v) return E{};
    const std::optional<E> e =
        v->is_string() ? json_name_parse(v->get<std::string>(), E{}) : std::nullopt;
    if (!e) return fail(key, expected, v), E{};
    return *e;
  }
  bool flag(const char* key) const {
    const json* v = find(key, "true or false");
    if (!v) return false;
    if (!v->is_boolean()) return fail(key, "true or false", v), false;
    return v->get<bool>();
  }
  double number(const char* key) const {
    const json* v = find(key, "a number");
    if (!v) return kNaN;
    if (!v->is_number()) return fail(key, "a number", v), kNaN;
    return v->get<double>();
  }
  // A number at least `min` (a time, a rate: `min` 0 or just above).
  double number_at_least(const char* key, double min) const {
    const double x = number(key);
    if (!std::isfinite(x) || x < min)
      fail(key, fmt::format("a number >= {}", min).c_str(), find(key, ""));
    return x;
  }
  // A number written by `exact_number` (NaN and the infinities as strings).
  double exact(const char* key) const {
    const json* v = find(key, kExactExpected);
    if (!v) return kNaN;
    const std::optional<double> x = exact_number_value(*v);
    if (!x) return fail(key, kExactExpected, v), kNaN;
    return *x;
  }
  std::vector<double> exact_numbers(const char* key) const {
    std::vector<double> out;
    const json* v = find(key, "an array");
    if (!v) return out;
    if (!v->is_array()) return fail(key, "an array", v), out;
    out.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const std::optional<double> x = exact_number_value((*v)[i]);
      if (!x) fail(fmt::format("{}[{}]", key, i), kExactExpected, &(*v)[i]);
      out.push_back(x.value_or(kNaN));
    }
    return out;
  }
  // A number that the writer writes as null when it is not finite (NaN when null).
  double nullable(const char* key) const { return optional_number(key).value_or(kNaN); }
  std::optional<double> optional_number(const char* key) const {
    const json* v = find(key, "a number or null");
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_number()) return fail(key, "a number or null", v), std::nullopt;
    return v->get<double>();
  }
  int64_t integer(const char* key) const {
    const json* v = find(key, "an integer");
    if (!v) return 0;
    if (v->is_number_unsigned() && v->get<uint64_t>() <= uint64_t{INT64_MAX})
      return static_cast<int64_t>(v->get<uint64_t>());
    if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
    return fail(key, "an integer", v), 0;
  }
  // An integer that fits an int (a count of threads, shards or devices): a larger one was cast
  // to a wrong count.
  int int_integer(const char* key) const {
    const int64_t v = integer(key);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      const json* found = find(key, "an integer");
      return fail(key, "an integer that fits 32 bits", found), 0;
    }
    return static_cast<int>(v);
  }
  // An integer from `min` to `max`.
  int64_t integer_between(const char* key, int64_t min, int64_t max) const {
    const int64_t v = integer(key);
    if (v < min || v > max) {
      fail(key, fmt::format("an integer from {} to {}", min, max).c_str(), find(key, ""));
      return std::clamp(v, min, max);
    }
    return v;
  }
  // An array of integers, each from `min` to `max`.
  std::vector<int64_t> integers(const char* key, int64_t min, int64_t max) const {
    std::vector<int64_t> out;
    const json* v = find(key, "an array of integers");
    if (!v) return out;
    if (!v->is_array()) return fail(key, "an array of integers", v), out;
    out.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) {
      const json& x = (*v)[i];
      const bool whole = x.is_number_unsigned() ? x.get<uint64_t>() <= uint64_t{INT64_MAX}
                                                : x.is_number_integer();
      const int64_t n = whole ? x.get<int64_t>() : 0;
      if (!whole || n < min || n > max) {
        fail(fmt::format("{}[{}]", key, i),
             fmt::format("an integer from {} to {}", min, max).c_str(), &x);
      }
      out.push_back(std::clamp(n, min, max));
    }
    return out;
  }
  // Whether `key` holds an array (a field written in one of two shapes).
  bool holds_array(const char* key) const { return has(key) && j_.at(key).is_array(); }
  // An integer, or null (nullopt).
  std::optional<int64_t> optional_integer(const char* key) const {
    const json* v = find(key, "an integer or null");
    if (!v || v->is_null()) return std::nullopt;
    return integer(key);
  }
  std::vector<std::string> texts(const char* key) const {
    std::vector<std::string> out;
    const json* v = find(key, "an array of strings");
    if (!v) return out;
    if (!v->is_array()) return fail(key, "an array of strings", v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i].is_string()) {
        out.push_back((*v)[i].get<std::string>());
      } else {
        fail(fmt::format("{}[{}]", key, i), "a string", &(*v)[i]);
      }
    }
    return out;
  }
  std::vector<double> numbers(const char* key) const {
    std::vector<double> out;
    const json* v = find(key, "an array of numbers");
    if (!v) return out;
    if (!v->is_array()) return fail(key, "an array of numbers", v), out;
    for (size_t i = 0; i < v->size(); ++i) out.push_back(number_at(*v, key, i));
    return out;
  }
  // An array of numbers and nulls; null (the whole array) reads as empty.
  std::vector<std::optional<double>> optional_numbers(const char* key) const {
    std::vector<std::optional<double>> out;
    const json* v = find(key, "an array of numbers or null");
    if (!v || v->is_null()) return out;
    if (!v->is_array()) return fail(key, "an array of numbers or null", v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& x = (*v)[i];
      if (x.is_null()) {
        out.push_back(std::nullopt);
      } else if (x.is_number()) {
        out.push_back(x.get<double>());
      } else {
        fail(fmt::format("{}[{}]", key, i), "a number or null", &x);
        out.push_back(std::nullopt);
      }
    }
    return out;
  }
  std::vector<std::vector<double>> number_rows(const char* key) const {
    std::vector<std::vector<double>> out;
    const json* v = find(key, "an array of arrays of numbers");
    if (!v) return out;
    if (!v->is_array()) return fail(key, "an array of arrays of numbers", v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& row = (*v)[i];
      std::vector<double> values;
      if (!row.is_array()) {
        fail(fmt::format("{}[{}]", key, i), "an array of numbers", &row);
      } else {
        for (size_t k = 0; k < row.size(); ++k)
          values.push_back(number_at(row, fmt::format("{}[{}]", key, i), k));
      }
      out.push_back(std::move(values));
    }
    return out;
  }

  // A nested object; null or absent where `optional` (then nullopt).
  std::optional<JsonIn> object(const char* key, bool optional = false) const {
    const json* v = find(key, optional ? "an object or null" : "an object");
    if (!v || (optional && v->is_null())) return std::nullopt;
    if (!v->is_object()) return fail(key, "an object", v), std::nullopt;
    return JsonIn(*v, path(key), source_);
  }
  // Each element of an array of objects, named `name(i, element)` for errors; null reads as
  // empty where `optional`.
  template <typename Name>
  std::vector<JsonIn> objects(const char* key, Name name, bool optional = false) const {
    std::vector<JsonIn> out;
    const json* v = find(key, "an array");
    if (!v || (optional && v->is_null())) return out;
    if (!v->is_array()) return fail(key, "an array", v), out;
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_object()) {
        fail(fmt::format("{}[{}]", key, i), "an object", &e);
        continue;
      }
      out.emplace_back(e, name(i, e), source_);
    }
    return out;
  }
  std::vector<JsonIn> objects(const char* key, bool optional = false) const {
    return objects(
        key, [&](size_t i, const json&) { return fmt::format("{}[{}]", path(key), i); }, optional);
  }
  // The object's own keys other than `known`, with string values (device details).
  std::vector<std::pair<std::string, std::string>> other_texts(
      std::initializer_list<const char*> known) const {
    std::vector<std::pair<std::string, std::string>> out;
    if (!j_.is_object()) return out;
    for (const auto& [k, v] : j_.items()) {
      bool is_known = false;
      for (const char* name : known) is_known |= k == name;
      if (is_known) continue;
      if (v.is_string()) {
        out.emplace_back(k, v.get<std::string>());
      } else {
        fail(k, "a string", &v);
      }
    }
    return out;
  }

  // Refuses a value that breaks a rule across fields (`expected` says the rule).
  template <class T>
  void refuse(const char* key, const std::string& expected, const T& found) const {
    const json value = found;
    fail(key, expected.c_str(), &value);
  }
  // Reports a wrong field; returns normally only in lenient mode. A number, a flag or a short
  // string found is quoted after its type: `found a number (-1)`.
  void fail(const std::string& key, const char* expected, const json* found) const {
    if (source_.mode == ReadMode::Lenient) return;
    const std::string place = where_.empty() ? "" : where_ + ": ";
    const std::string field = key.empty() ? "" : key + ": ";
    throw UserError(fmt::format("{}{}{}expected {}, found {}{}", origin(), place, field, expected,
                                found ? json_type_name(*found) : "nothing",
                                found ? quoted_value(*found) : ""));
  }

 private:
  std::string origin() const { return source_.origin.empty() ? "" : source_.origin + ": "; }
  static std::string quoted_value(const json& v) {
    if (v.is_number() || v.is_boolean()) return fmt::format(" ({})", v.dump());
    if (v.is_string() && v.get_ref<const std::string&>().size() <= 40)
      return fmt::format(" ({})", v.dump());
    return "";
  }
  const json* find(const char* key, const char* expected) const {
    if (!j_.is_object()) return nullptr;
    const auto it = j_.find(key);
    if (it != j_.end()) return &*it;
    if (source_.mode == ReadMode::Strict) {
      const std::string place = where_.empty() ? "" : where_ + ": ";
      throw UserError(fmt::format("{}{}{}: missing (expected {})", origin(), place, key, expected));
    }
    return nullptr;
  }
  double number_at(const json& array, const std::string& key, size_t i) const {
    const json& x = array[i];
    if (x.is_number()) return x.get<double>();
    fail(fmt::format("{}[{}]", key, i), "a number", &x);
    return kNaN;
  }
  std::string path(const std::string& key) const {
    return where_.empty() ? key : where_ + "." + key;
  }

  const json& j_;
  std::string where_;
  const JsonSource& source_;
};

}  // namespace xo

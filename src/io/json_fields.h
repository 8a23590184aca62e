// A record's fields listed once, for writing and for reading back. A record has one function
// template, `template <class Io, class R> void fields(Io& io, R& r)`, that names each field:
// `io.number("median", r.median); io.nullable("mean", r.mean); ...`. FieldsOut (R const) puts
// each into a JSON object; FieldsIn (R mutable) reads each through JsonIn's checks, so an error
// still names the file, the place and the field. Reads only a reader needs (an older file's key,
// a figure checked but not kept) sit beside the list under `if constexpr (Io::kReading)`. A
// field's range (`AtLeast`, `Between`) is checked where it is read; the writer ignores it. A
// document read back to go on bit for bit (a checkpoint) lists its doubles as `exact`: NaN and
// the infinities kept, which `nullable` writes as null.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "io/json_in.h"

namespace xo {

// The range a figure read back must be in (the writer writes what it has).
struct AtLeast {
  double min;
};
struct Between {
  int64_t min, max;
};

// Whether `Io` reads (for the reader-only lines of a field list written as a generic lambda:
// `if constexpr (kReads<decltype(io)>)`).
template <class Io>
constexpr bool kReads = std::remove_cvref_t<Io>::kReading;

// Writes into a `Json`: nlohmann::json (keys sorted), or nlohmann::ordered_json where the keys
// stay in the order the list names them (a checkpoint, read by people and signed over its dump).
template <class Json>
class BasicFieldsOut {
  using json = Json;

 public:
  static constexpr bool kReading = false;

  // Every number, integer, text and flag as it is (a NaN number dumps as null).
  template <class T>
  void number(const char* key, const T& v) {
    j[key] = v;
  }
  template <class T>
  void integer(const char* key, const T& v) {
    j[key] = v;
  }
  void text(const char* key, const std::string& v) { j[key] = v; }
  void flag(const char* key, bool v) { j[key] = v; }
  // Not finite: null (JSON has no NaN).
  void nullable(const char* key, double v) { j[key] = number_or_null(v); }
  void optional_number(const char* key, const std::optional<double>& v) {
    j[key] = v ? json(number_or_null(*v)) : json();
  }
  void optional_integer(const char* key, const std::optional<int64_t>& v) {
    j[key] = v ? json(*v) : json();
  }
  void optional_text(const char* key, const std::optional<std::string>& v) {
    j[key] = v ? json(*v) : json();
  }
  void optional_integer(const char* key, const std::optional<int64_t>& v, Between) {
    optional_integer(key, v);
  }
  // Absent from older files (NaN there); written like nullable.
  void nullable_or_absent(const char* key, double v) { nullable(key, v); }
  // As it was (io/json_in.h's exact_number); absent reads as NaN.
  void exact(const char* key, double v) { j[key] = exact_number(v); }
  void exact_or_absent(const char* key, double v) { exact(key, v); }
  void exact_numbers(const char* key, const std::vector<double>& v) {
    j[key] = json::array();
    for (double x : v) j[key].push_back(json(exact_number(x)));
  }
  template <class Int>
  void integers(const char* key, const std::vector<Int>& v, Between) {
    j[key] = v;
  }
  template <class T>
  void number(const char* key, const T& v, AtLeast) {
    j[key] = v;
  }
  template <class T>
  void integer(const char* key, const T& v, Between) {
    j[key] = v;
  }
  // Written always; 0 when an older file lacks it.
  void number_or_zero(const char* key, double v, AtLeast) { j[key] = v; }
  void integer_or_zero(const char* key, int v, Between) { j[key] = v; }
  // Left out when 0 or empty (then 0 or empty when read).
  void number_unless_zero(const char* key, double v, AtLeast) {
    if (v != 0) j[key] = v;
  }
  void integer_unless_zero(const char* key, int v, Between) {
    if (v != 0) j[key] = v;
  }
  void text_unless_empty(const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  }
  // False when an older file lacks it.
  void flag_or_absent(const char* key, bool v) { j[key] = v; }
  // The document's one possible value (its schema): checked when read.
  void constant(const char* key, const char* v) { j[key] = v; }
  // An enum by its name (io/json_in.h's `named`).
  template <class E>
  void named(const char* key, E v) {
    j[key] = json_name(v);
  }
  void texts(const char* key, const std::vector<std::string>& v) { j[key] = v; }
  // Name/value pairs as an object's keys (libraries and their versions).
  void pairs(const char* key, const std::vector<std::pair<std::string, std::string>>& v) {
    j[key] = json::object();
    for (const auto& [k, x] : v) j[key][k] = x;
  }
  void numbers(const char* key, const std::vector<double>& v) { j[key] = v; }
  void optional_numbers(const char* key, const std::vector<std::optional<double>>& v) {
    j[key] = json::array();
    for (const auto& x : v) j[key].push_back(x ? json(number_or_null(*x)) : json());
  }
  void number_rows(const char* key, const std::vector<std::vector<double>>& v) { j[key] = v; }
  // Whether a file has `key`: every file this writer writes has.
  bool present(const char*) const { return true; }
  // A nested record and an array of records, each through its own field list.
  template <class R, class Fields>
  void object(const char* key, const R& r, Fields fields) {
    j[key] = write(r, fields);
  }
  // A nested record, or null where `written` is false; returns `written`.
  template <class R, class Fields>
  bool object_or_null(const char* key, bool written, const R& r, Fields fields) {
    j[key] = written ? write(r, fields) : json();
    return written;
  }
  template <class R, class Fields>
  void objects(const char* key, const std::vector<R>& rows, Fields fields) {
    j[key] = json::array();
    for (const R& r : rows) j[key].push_back(write(r, fields));
  }

  template <class R, class Fields>
  static json write(const R& r, Fields fields) {
    BasicFieldsOut out;
    fields(out, r);
    return std::move(out.j);
  }

  json j = json::object();
};
using FieldsOut = BasicFieldsOut<nlohmann::json>;

class FieldsIn {
 public:
  static constexpr bool kReading = true;

  explicit FieldsIn(const JsonIn& source) : in(source) {}

  void number(const char* key, double& v) const { v = in.number(key); }
  void integer(const char* key, int64_t& v) const { v = in.integer(key); }
  void integer(const char* key, int& v) const { v = in.int_integer(key); }
  void text(const char* key, std::string& v) const { v = in.text(key); }
  void flag(const char* key, bool& v) const { v = in.flag(key); }
  void nullable(const char* key, double& v) const { v = in.nullable(key); }
  void optional_number(const char* key, std::optional<double>& v) const {
    v = in.optional_number(key);
  }
  void optional_integer(const char* key, std::optional<int64_t>& v) const {
    v = in.optional_integer(key);
  }
  void optional_text(const char* key, std::optional<std::string>& v) const {
    v = in.optional_text(key);
  }
  void optional_integer(const char* key, std::optional<int64_t>& v, Between b) const {
    v = in.optional_integer(key);
    if (v) v = in.integer_between(key, b.min, b.max);
  }
  void nullable_or_absent(const char* key, double& v) const {
    v = in.has(key) ? in.nullable(key) : std::numeric_limits<double>::quiet_NaN();
  }
  void exact(const char* key, double& v) const { v = in.exact(key); }
  void exact_or_absent(const char* key, double& v) const {
    v = in.has(key) ? in.exact(key) : std::numeric_limits<double>::quiet_NaN();
  }
  void exact_numbers(const char* key, std::vector<double>& v) const { v = in.exact_numbers(key); }
  template <class Int>
  void integers(const char* key, std::vector<Int>& v, Between b) const {
    v.clear();
    for (int64_t x : in.integers(key, b.min, b.max)) v.push_back(static_cast<Int>(x));
  }
  void number(const char* key, double& v, AtLeast a) const { v = in.number_at_least(key, a.min); }
  template <class Int>
  void integer(const char* key, Int& v, Between b) const {
    v = static_cast<Int>(in.integer_between(key, b.min, b.max));
  }
  void number_or_zero(const char* key, double& v, AtLeast a) const {
    v = in.has(key) ? in.number_at_least(key, a.min) : 0;
  }
  void integer_or_zero(const char* key, int& v, Between b) const {
    v = in.has(key) ? static_cast<int>(in.integer_between(key, b.min, b.max)) : 0;
  }
  // A rule across fields broken (reader-only lines): `io.refuse("slowest_ms", "at least ...", x)`.
  template <class T>
  void refuse(const char* key, const std::string& expected, const T& found) const {
    in.refuse(key, expected, found);
  }
  void number_unless_zero(const char* key, double& v, AtLeast a) const {
    number_or_zero(key, v, a);
  }
  void integer_unless_zero(const char* key, int& v, Between b) const { integer_or_zero(key, v, b); }
  void text_unless_empty(const char* key, std::string& v) const {
    v = in.has(key) ? in.text(key) : std::string();
  }
  void flag_or_absent(const char* key, bool& v) const { v = in.has(key) && in.flag(key); }
  void constant(const char* key, const char* v) const {
    const std::string found = in.text(key);
    if (found != v) {
      const nlohmann::json value = found;
      in.fail(key, fmt::format("'{}'", v).c_str(), &value);
    }
  }
  template <class E>
  void named(const char* key, E& v) const {
    v = in.template named<E>(key);
  }
  void texts(const char* key, std::vector<std::string>& v) const { v = in.texts(key); }
  void pairs(const char* key, std::vector<std::pair<std::string, std::string>>& v) const {
    if (const auto o = in.object(key)) v = o->other_texts({});
  }
  void numbers(const char* key, std::vector<double>& v) const { v = in.numbers(key); }
  void optional_numbers(const char* key, std::vector<std::optional<double>>& v) const {
    v = in.optional_numbers(key);
  }
  void number_rows(const char* key, std::vector<std::vector<double>>& v) const {
    v = in.number_rows(key);
  }
  bool present(const char* key) const { return in.has(key); }
  template <class R, class Fields>
  void object(const char* key, R& r, Fields fields) const {
    if (const auto o = in.object(key)) read(*o, r, fields);
  }
  // Reads the record where it is there and not null; returns whether it did.
  template <class R, class Fields>
  bool object_or_null(const char* key, bool, R& r, Fields fields) const {
    const auto o = in.object(key, /*optional=*/true);
    if (o) read(*o, r, fields);
    return o.has_value();
  }
  template <class R, class Fields>
  void objects(const char* key, std::vector<R>& rows, Fields fields) const {
    for (const JsonIn& o : in.objects(key)) read(o, rows.emplace_back(), fields);
  }

  template <class R, class Fields>
  static void read(const JsonIn& source, R& r, Fields fields) {
    FieldsIn io(source);
    fields(io, r);
  }

  const JsonIn& in;
};

// Writes `r` through its field list.
template <class R, class Fields>
nlohmann::json fields_json(const R& r, Fields fields) {
  return FieldsOut::write(r, fields);
}
// A field list that depends on the file's schema (an older schema's keys), as a list for one
// schema: `with_schema(sweep_fields, 2)`.
template <class Fields>
auto with_schema(Fields fields, int schema) {
  return [fields, schema](auto& io, auto& r) { fields(io, r, schema); };
}
// Reads a record through its field list.
template <class R, class Fields>
R read_fields(const JsonIn& in, Fields fields) {
  R r;
  FieldsIn::read(in, r, fields);
  return r;
}

}  // namespace xo

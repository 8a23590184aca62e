// A record's field list (io/json_fields.h) run to and from a flat byte string instead of JSON:
// each field in the list's order, without its key (numbers as their 8 bytes, integers as int64,
// texts and arrays after their length, enums by name). For data read far more often than it is
// written and checked once where it is written: the shipped device profiles are read from their
// JSON, every field checked, when crossover is built (src/tools/pack_profiles.cpp), and carried
// in the binary packed, which unpacks far faster than its JSON parses (docs/benchmarks.md,
// "Profiles packed at build time, and what a search writes"). The reader
// trusts the packer's checks but not its bytes: a pack cut short, or one with bytes left over,
// throws a UserError naming its origin, never reads past the end.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "io/json_fields.h"

namespace xo {

class FieldsPack {
 public:
  static constexpr bool kReading = false;

  void number(const char*, double v) { put(v); }
  void number(const char*, double v, AtLeast) { put(v); }
  void number_or_zero(const char*, double v, AtLeast) { put(v); }
  void number_unless_zero(const char*, double v, AtLeast) { put(v); }
  template <class Int>
  void integer(const char*, Int v, Between) {
    put(static_cast<int64_t>(v));
  }
  void integer_or_zero(const char*, int v, Between) { put(static_cast<int64_t>(v)); }
  void integer_unless_zero(const char*, int v, Between) { put(static_cast<int64_t>(v)); }
  void flag_or_absent(const char*, bool v) { put(static_cast<int64_t>(v)); }
  void text(const char*, const std::string& v) { put_text(v); }
  void text_unless_empty(const char*, const std::string& v) { put_text(v); }
  void constant(const char*, const char* v) { put_text(v); }
  template <class E>
  void named(const char*, E v) {
    put_text(json_name(v));
  }
  template <class R, class Fields>
  void object(const char*, const R& r, Fields fields) {
    fields(*this, r);
  }
  template <class R, class Fields>
  void objects(const char*, const std::vector<R>& rows, Fields fields) {
    put(static_cast<int64_t>(rows.size()));
    for (const R& r : rows) fields(*this, r);
  }

  template <class R, class Fields>
  static std::string write(const R& r, Fields fields) {
    FieldsPack out;
    fields(out, r);
    return std::move(out.bytes);
  }

  std::string bytes;

 private:
  template <class T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_text(std::string_view v) {
    put(static_cast<int64_t>(v.size()));
    bytes.append(v);
  }
};

class FieldsUnpack {
 public:
  static constexpr bool kReading = true;

  FieldsUnpack(std::string_view bytes, const std::string& origin) : rest_(bytes), origin_(origin) {}

  void number(const char* key, double& v) { v = take<double>(key); }
  void number(const char* key, double& v, AtLeast) { number(key, v); }
  void number_or_zero(const char* key, double& v, AtLeast) { number(key, v); }
  void number_unless_zero(const char* key, double& v, AtLeast) { number(key, v); }
  template <class Int>
  void integer(const char* key, Int& v, Between) {
    v = static_cast<Int>(take<int64_t>(key));
  }
  void integer_or_zero(const char* key, int& v, Between b) { integer(key, v, b); }
  void integer_unless_zero(const char* key, int& v, Between b) { integer(key, v, b); }
  void flag_or_absent(const char* key, bool& v) { v = take<int64_t>(key) != 0; }
  void text(const char* key, std::string& v) { v = take_text(key); }
  void text_unless_empty(const char* key, std::string& v) { v = take_text(key); }
  void constant(const char* key, const char* v) {
    if (take_text(key) != v) broken(key, fmt::format("'{}'", v));
  }
  template <class E>
  void named(const char* key, E& v) {
    const auto parsed = json_name_parse(take_text(key), E{});
    if (!parsed) broken(key, json_names_expected(E{}));
    v = *parsed;
  }
  // The packer's checks hold for what it packed: a rule broken here is a pack that is not one.
  template <class T>
  void refuse(const char* key, const std::string& expected, const T&) {
    broken(key, expected);
  }
  template <class R, class Fields>
  void object(const char*, R& r, Fields fields) {
    fields(*this, r);
  }
  template <class R, class Fields>
  void objects(const char* key, std::vector<R>& rows, Fields fields) {
    const auto n = take<int64_t>(key);
    // Each record takes at least a byte: a count larger than what is left is not one.
    if (n < 0 || static_cast<uint64_t>(n) > rest_.size()) broken(key, "a count of records");
    rows.clear();
    rows.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) fields(*this, rows.emplace_back());
  }

  // `bytes` unpacked through `fields`, every byte of them.
  template <class R, class Fields>
  static R read(std::string_view bytes, const std::string& origin, Fields fields) {
    FieldsUnpack in(bytes, origin);
    R r;
    fields(in, r);
    if (!in.rest_.empty()) in.broken("the end", "no bytes after the last field");
    return r;
  }

 private:
  template <class T>
  T take(const char* key) {
    if (rest_.size() < sizeof(T)) broken(key, "a field, not the end of the pack");
    T v;
    std::memcpy(&v, rest_.data(), sizeof v);
    rest_.remove_prefix(sizeof v);
    return v;
  }
  std::string take_text(const char* key) {
    const auto n = take<int64_t>(key);
    if (n < 0 || static_cast<uint64_t>(n) > rest_.size()) broken(key, "a text's length");
    std::string v(rest_.substr(0, static_cast<size_t>(n)));
    rest_.remove_prefix(static_cast<size_t>(n));
    return v;
  }
  [[noreturn]] void broken(const char* key, const std::string& expected) const {
    throw UserError(fmt::format("{} (packed): field '{}': expected {}; the pack is damaged",
                                origin_, key, expected));
  }

  std::string_view rest_;
  const std::string& origin_;
};

}  // namespace xo

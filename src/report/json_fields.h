// One field list per record, run both ways: a record's fields are listed once, in a function
// template `fields(io, record)`, and a JsonWriter (the record to JSON) or a JsonReader (JSON to the
// record, through JsonIn's checks: a wrong field names the file, the place and the field) runs it.
// Writing, the record is const; reading, it is filled. What only one direction does stays beside
// the list and says so: a figure derived for readers of the file (written only), an older
// schema's key or a key that older files lack (read where present).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/json_in.h"

namespace xo {

class JsonWriter {
 public:
  static constexpr bool kReading = false;
  explicit JsonWriter(nlohmann::json& j) : j_(j) {}

  // A number, an integer, a text or a flag, as it is.
  template <typename T>
  void value(const char* key, const T& v) {
    j_[key] = v;
  }
  // Written as every file since it: read only where present (older files lack it).
  template <typename T>
  void since(const char* key, const T& v) {
    j_[key] = v;
  }
  // A figure that may not have been measured: null for NaN (JSON has no NaN).
  void nullable(const char* key, const double& v) { j_[key] = number_or_null(v); }
  // A figure that may be absent from the record: null then.
  void optional_number(const char* key, const std::optional<double>& v) {
    j_[key] = v ? number_or_null(*v) : nlohmann::json();
  }
  void optional_number_since(const char* key, const std::optional<double>& v) {
    optional_number(key, v);
  }
  void texts(const char* key, const std::vector<std::string>& v) { j_[key] = v; }
  void nullable_since(const char* key, const double& v) { j_[key] = number_or_null(v); }
  // For the file's readers only (derived from other fields): not read back.
  template <typename T>
  void derived(const char* key, const T& v) {
    j_[key] = v;
  }
  // A nested object, its own fields listed by `f(io)`.
  template <typename F>
  void object(const char* key, F&& f) {
    nlohmann::json sub = nlohmann::json::object();
    JsonWriter w(sub);
    f(w);
    j_[key] = std::move(sub);
  }
  // A nested object that older files lack (read where present), or that may be null (read where
  // it is an object).
  template <typename F>
  void object_since(const char* key, F&& f) {
    object(key, f);
  }
  template <typename F>
  void nullable_object(const char* key, F&& f) {
    object(key, f);
  }
  // A nested object that is null where `present` is false (a run without early stopping, say);
  // reading, `f` runs only where it is an object.
  template <typename F>
  bool optional_object(const char* key, bool present, F&& f) {
    if (!present) {
      j_[key] = nullptr;
      return false;
    }
    object(key, f);
    return true;
  }
  // An array of records, each listed by `f(io, element)`.
  template <typename T, typename F>
  void array(const char* key, const std::vector<T>& items, F&& f) {
    nlohmann::json a = nlohmann::json::array();
    for (const T& item : items) {
      nlohmann::json e = nlohmann::json::object();
      JsonWriter w(e);
      f(w, item);
      a.push_back(std::move(e));
    }
    j_[key] = std::move(a);
  }
  nlohmann::json& json() { return j_; }

 private:
  nlohmann::json& j_;
};

class JsonReader {
 public:
  static constexpr bool kReading = true;
  explicit JsonReader(const JsonIn& in) : in_(in) {}

  void value(const char* key, std::string& v) { v = in_.text(key); }
  void value(const char* key, int64_t& v) { v = in_.integer(key); }
  void value(const char* key, int& v) { v = in_.int_integer(key); }
  void value(const char* key, bool& v) { v = in_.flag(key); }
  void value(const char* key, double& v) { v = in_.number(key); }
  template <typename T>
  void since(const char* key, T& v) {
    if (in_.has(key)) value(key, v);
  }
  void nullable(const char* key, double& v) { v = in_.nullable(key); }
  void optional_number(const char* key, std::optional<double>& v) { v = in_.optional_number(key); }
  void optional_number_since(const char* key, std::optional<double>& v) {
    if (in_.has(key)) v = in_.optional_number(key);
  }
  void texts(const char* key, std::vector<std::string>& v) { v = in_.texts(key); }
  void nullable_since(const char* key, double& v) {
    if (in_.has(key)) v = in_.nullable(key);
  }
  template <typename T>
  void derived(const char*, const T&) {}
  template <typename F>
  void object(const char* key, F&& f) {
    if (const auto sub = in_.object(key)) {
      JsonReader r(*sub);
      f(r);
    }
  }
  template <typename F>
  void object_since(const char* key, F&& f) {
    if (!in_.has(key)) return;
    if (const auto sub = in_.object(key)) {
      JsonReader r(*sub);
      f(r);
    }
  }
  template <typename F>
  void nullable_object(const char* key, F&& f) {
    if (const auto sub = in_.object(key, /*optional=*/true)) {
      JsonReader r(*sub);
      f(r);
    }
  }
  // Read where the key is there and holds an object; false where it is absent or null.
  template <typename F>
  bool optional_object(const char* key, bool, F&& f) {
    const auto sub = in_.has(key) ? in_.object(key, /*optional=*/true) : std::nullopt;
    if (!sub) return false;
    JsonReader r(*sub);
    f(r);
    return true;
  }
  template <typename T, typename F>
  void array(const char* key, std::vector<T>& items, F&& f) {
    for (const JsonIn& e : in_.objects(key)) {
      JsonReader r(e);
      items.emplace_back();
      f(r, items.back());
    }
  }
  const JsonIn& in() const { return in_; }

 private:
  const JsonIn& in_;
};

}  // namespace xo

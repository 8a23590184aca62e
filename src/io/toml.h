// The one reader of crossover's TOML files (model specs, the hardware catalog), and the few helpers
// that write TOML text. Every error it raises reads "FILE:LINE: dotted.key: what was expected (and
// what was found)", e.g. "m.toml:5: model.layers[1].type: unknown layer type 'relux' (expected one
// of: linear, relu, ...)". toml++ stays inside toml.cpp.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace xo {

// Line 0 stands for "no line": values that were not read from a file (built-in specs, merged
// catalogs). Such messages read "FILE: dotted.key: what".
inline constexpr int kNoLine = 0;

// Throws the UserError "ORIGIN:LINE: KEY: WHAT" ("ORIGIN: KEY: WHAT" when line is kNoLine). The
// reader's errors all come from here; code that checks values after reading them (shape
// inference, catalog merges) uses it too, so that every message has the same form.
[[noreturn]] void fail_at(std::string_view origin, int line, std::string_view key,
                          std::string_view what);

// TOML text. A basic string with quotes, backslashes and control characters escaped (UTF-8 kept).
std::string toml_string(std::string_view s);
// The shortest text that reads back as the same double, always as a float ("0.0", not "0"), so a
// reader sees a real-valued setting.
std::string toml_float(double v);
// `parent.key` as a dotted key; `key` is quoted where it is not a bare key ("aws-g5.xlarge").
std::string toml_path(std::string_view parent, std::string_view key);

// `text` (a TOML document that reads) with the value at `path` set. Path items are keys, or
// indices ("3", from 0) into a list; tables missing on the way are made. `value` is read as TOML
// ("0.01", "true", "[3, 3]", "\"adam\"") or, where it does not read as a TOML value, taken as a
// string ("adam"). Throws UserError "WHAT: why" when the path runs into a value that is neither a
// table nor a list, or past the end of a list.
std::string toml_with_value(std::string_view text, const std::vector<std::string>& path,
                            std::string_view value, std::string_view what);
// The same for several values, set in order on one reading of `text` (each error says its WHAT).
struct TomlSetting {
  std::vector<std::string> path;
  std::string value;
  std::string what;
};
std::string toml_with_values(std::string_view text, const std::vector<TomlSetting>& settings);

// An interval a number must lie in. Its text follows "VALUE must be": "> 0", ">= 0", "in [0, 1)".
struct Range {
  double low = 0;
  bool low_open = false;
  double high = std::numeric_limits<double>::infinity();
  bool high_open = true;

  bool contains(double v) const;
  std::string text() const;
};
inline constexpr Range kPositive{0, true};
inline constexpr Range kNonNegative{0, false};
inline constexpr Range kUnitOpen{0, false, 1, true};     // a decay factor: 1 would never forget
inline constexpr Range kUnitClosed{0, false, 1, false};  // a weight or a fraction

struct TomlNode;  // a toml++ node, opaque outside toml.cpp
class TomlTable;

// One value of a document, or the absence of one: where it is (file and line, or the line of the
// table that lacks it) and the dotted key that leads to it. The typed getters check the type and
// fail with "missing (expected ...)" or "got the string \"4\" (expected an integer)".
class TomlValue {
 public:
  explicit operator bool() const { return node_ != nullptr; }
  const std::string& path() const { return path_; }
  int line() const { return line_; }

  // Whether the getter of the same name would accept the value.
  bool is_integer() const;
  bool is_number() const;  // an integer or a finite float
  bool is_string() const;
  bool is_list() const;

  int64_t integer() const;
  // An integer >= `min`; a value below reads "[NOUN ]-4 must be a positive integer" (min 1) or
  // "... must be an integer >= MIN".
  int64_t integer_at_least(int64_t min, std::string_view noun = {}) const;
  // An integer in [min, max], for fields narrower than int64: below `min` as integer_at_least,
  // above `max` "[NOUN ]4294967296 is too large (expected an integer <= 2147483647)", never a
  // silent cast.
  int64_t integer_in(int64_t min, int64_t max, std::string_view noun = {}) const;
  // A finite number; integers are accepted ("lr = 1" means 1.0). inf and nan, which TOML allows,
  // are refused: no setting crossover reads is meaningful with them.
  double number() const;
  // A number in `range`; `why` (optional) ends the message in parentheses.
  double number(const Range& range, std::string_view why = {}) const;
  bool boolean() const;
  // `expected` describes the string sought in messages ("a string" when not given).
  std::string string(std::string_view expected = {}) const;
  std::string non_empty_string() const;
  // A date YYYY-MM-DD with a valid month and day, written as a string or as a bare TOML date.
  std::string date() const;
  // The index of the value in `names` (a string, compared exactly). Messages name the `noun`:
  // "unknown loss 'mse' (expected one of: cross_entropy, bce)".
  size_t choice(std::string_view noun, const std::vector<std::string_view>& names) const;
  // The items of a list, each at the path "key[i]".
  std::vector<TomlValue> list(std::string_view expected) const;
  TomlTable table(std::string_view expected) const;

  // "FILE:LINE: path: what".
  [[noreturn]] void fail(std::string_view what) const;
  // "got DESCRIPTION (expected WHAT)", or "missing (expected WHAT)" when the value is absent.
  [[noreturn]] void expected(std::string_view what) const;
  // How the value reads in a message: "the string \"4\"", "the float 4.5", "the list [0.9, 1.0]".
  std::string describe() const;

 private:
  friend class TomlTable;
  friend class TomlDocument;
  TomlValue(const TomlNode* node, std::string_view origin, std::string path, int line)
      : node_(node), origin_(origin), path_(std::move(path)), line_(line) {}

  const TomlNode* node_;  // null when absent
  std::string_view origin_;
  std::string path_;
  int line_;
};

// A table of a document at its dotted path ("" for the root, "model", "device.h100-sxm").
class TomlTable {
 public:
  const std::string& path() const { return path_; }
  int line() const { return line_; }

  // The value under `key`; when absent, a TomlValue that is false and whose errors point at this
  // table's line.
  TomlValue get(std::string_view key) const;
  // The keys in the order of the file.
  std::vector<std::string> keys() const;
  // Every key must be one of `allowed`; the first other key in the file fails with "unknown key
  // (expected one of: ...)". Call it before reading values, so a typo is named as such.
  void only_keys(const std::vector<std::string_view>& allowed) const;
  // The same table under another path, e.g. an array entry named by its id.
  TomlTable renamed(std::string path) const;

 private:
  friend class TomlValue;
  friend class TomlDocument;
  TomlTable(const TomlNode* node, std::string_view origin, std::string path, int line)
      : node_(node), origin_(origin), path_(std::move(path)), line_(line) {}

  const TomlNode* node_;
  std::string_view origin_;
  std::string path_;
  int line_;
};

// A parsed TOML text. Tables and values point into it, so it must outlive them; it neither copies
// nor moves.
class TomlDocument {
 public:
  // `origin` names the file in every message. A syntax error throws UserError
  // "ORIGIN:LINE: TOML syntax error (column C): what".
  TomlDocument(std::string_view text, std::string origin);
  ~TomlDocument();
  TomlDocument(const TomlDocument&) = delete;
  TomlDocument& operator=(const TomlDocument&) = delete;

  const std::string& origin() const { return origin_; }
  TomlTable root() const;

 private:
  struct Tree;
  std::string origin_;
  std::unique_ptr<Tree> tree_;
};

}  // namespace xo

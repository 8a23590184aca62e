// Numbers as people read them, one way for the terminal, the HTML report and the advice: durations
// with a unit that suits them, prices in dollars, counts exact or short, percentages. Every
// formatter answers "n/a" (kMissing) for a missing or non-finite value, never "nan" or "inf".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace xo {

inline constexpr std::string_view kMissing = "n/a";

// `v` rounded to `digits` significant digits (subnormal and non-finite values as they are).
double round_significant(double v, int digits);
// `v` with `digits` significant digits in fixed notation (scientific far from 1); `trim` drops
// trailing zeros ("2 ms", not "2.00 ms", for axis labels).
std::string significant(double v, int digits = 3, bool trim = false);
// A duration with a unit that suits it: µs, ms, s, then min (from 10 min) and h (from 10 h).
std::string duration(double seconds, bool trim = false);
std::string duration(const std::optional<double>& seconds);
std::string duration_ms(const std::optional<double>& ms);
// Counts in charts: 701k, 1.5M, 2B.
std::string short_count(double v);
// 1234567 -> "1,234,567".
std::string group_digits(int64_t v);
// Counts in tables, exact: 1,234,567 (non-integers with 6 significant digits).
std::string exact_count(const std::optional<double>& v);
// A value already in percent, with one decimal ("<0.1%" for tiny positive values).
std::string percent(const std::optional<double>& p);
// A fraction (0.031) as a percent (3.1%).
std::string fraction_percent(const std::optional<double>& f);
// Dollars: $1,800 from $100, $1.25 from $1, cents with two decimals ($0.10), smaller amounts with
// three significant digits ($0.00213), and below a tenth of a cent in scientific ($2.89e-08).
std::string usd(const std::optional<double>& v);
// A size in bytes with a binary unit that keeps it below 1000 of it, three significant digits:
// "512 B", "1.50 KiB", "41.3 GiB", "3.64 TiB".
std::string byte_size(double bytes);
// A measured quantity to `digits` significant digits; thousands and up as whole numbers, grouped.
std::string plain(const std::optional<double>& v, int digits = 3);

// `text` safe to print on a terminal: a name from a file (a spec's model name, a file name, a
// device id) may carry escape sequences that would move the cursor, retitle the window or hide
// what follows. NUL, tab, newline and carriage return are written as C escapes, \0 \t \n \r (a
// newline would break a table's row); the other C0 controls, DEL, bytes that are not UTF-8 and
// the C1 controls as \xNN, byte by byte; the bidirectional overrides and isolates, which reorder
// what is shown, as \u202e and the like. Everything else (printable UTF-8) is kept; a backslash
// is kept as it is, so the escapes are for reading, not for decoding back.
std::string terminal_safe(std::string_view text);
// The two-character C escape (backslash and a letter or 0) of NUL, tab, newline and carriage
// return; null for any other byte.
const char* c_escape(unsigned char c);
// A message's text safe to print: terminal_safe line by line, its own line breaks kept (what
// every UserError holds, whatever it quotes from a file: a NUL no longer cuts it short).
std::string message_safe(std::string_view text);

// The width a terminal answer keeps to (one screen: 120 columns).
inline constexpr size_t kScreenColumns = 120;

// `text` with each of its lines broken at spaces to at most `width` columns (counted in bytes, as
// the terminal's text is English), the lines after a break indented by `indent`; a word longer
// than the width stays whole on a line of its own.
std::string wrap(std::string_view text, size_t width = kScreenColumns,
                 std::string_view indent = "  ");

}  // namespace xo

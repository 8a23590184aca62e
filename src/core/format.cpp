#include "core/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace xo {

double round_significant(double v, int digits) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, digits - 1 - std::floor(std::log10(std::fabs(v))));
  const double rounded = std::round(v * scale) / scale;
  return std::isfinite(rounded) ? rounded : v;  // subnormal v: the scale overflows
}

std::string significant(double v, int digits, bool trim) {
  if (!std::isfinite(v)) return std::string(kMissing);
  // Fixed notation would print hundreds of digits (or only zeros) out here.
  constexpr double kFixedMax = 1e15, kFixedMin = 1e-9;
  if (std::fabs(v) >= kFixedMax || (v != 0 && std::fabs(v) < kFixedMin))
    return fmt::format("{:.{}e}", v, digits - 1);
  v = round_significant(v, digits);
  if (v == 0) v = 0;  // no "-0"
  const int magnitude = v == 0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(v))));
  const int decimals = std::clamp(digits - 1 - magnitude, 0, 15);
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (trim && s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string duration(double seconds, bool trim) {
  if (!std::isfinite(seconds)) return std::string(kMissing);
  const double s = round_significant(seconds, 3), a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-3) return significant(s * 1e6, 3, trim) + " µs";
  if (a < 1) return significant(s * 1e3, 3, trim) + " ms";
  if (a < 600) return significant(s, 3, trim) + " s";
  if (a < 36000) return significant(s / 60, 3, trim) + " min";
  return significant(s / 3600, 3, trim) + " h";
}

std::string duration(const std::optional<double>& seconds) {
  return seconds ? duration(*seconds) : std::string(kMissing);
}

std::string duration_ms(const std::optional<double>& ms) {
  return ms ? duration(*ms / 1e3) : std::string(kMissing);
}

std::string short_count(double v) {
  if (!std::isfinite(v)) return std::string(kMissing);
  const double r = round_significant(v, 3), a = std::fabs(r);
  if (a >= 1e9) return significant(r / 1e9, 3, true) + "B";
  if (a >= 1e6) return significant(r / 1e6, 3, true) + "M";
  if (a >= 1e3) return significant(r / 1e3, 3, true) + "k";
  return significant(r, 3, true);
}

std::string group_digits(int64_t v) {
  // The magnitude as unsigned, so that INT64_MIN has one too.
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const std::string digits = std::to_string(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string exact_count(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return std::string(kMissing);
  if (*v != std::floor(*v) || std::fabs(*v) >= 9e15) return significant(*v, 6);
  return group_digits(static_cast<int64_t>(*v));
}

std::string percent(const std::optional<double>& p) {
  if (!p || !std::isfinite(*p)) return std::string(kMissing);
  if (*p > 0 && *p < 0.05) return "<0.1%";
  return fmt::format("{:.1f}%", *p == 0 ? 0.0 : *p);
}

std::string fraction_percent(const std::optional<double>& f) {
  return f ? percent(*f * 100) : std::string(kMissing);
}

std::string usd(const std::optional<double>& v) {
  if (!v || !std::isfinite(*v)) return std::string(kMissing);
  const std::string sign = *v < 0 ? "-" : "";
  const double a = std::fabs(*v);
  if (a >= 1e15) return sign + "$" + significant(a, 3);
  if (a >= 100) return sign + "$" + group_digits(static_cast<int64_t>(std::llround(a)));
  if (a >= 1) return sign + fmt::format("${:.2f}", a);
  // Below a tenth of a cent, zeros would outnumber the digits: three significant in scientific.
  if (a > 0 && a < 1e-3) return sign + "$" + fmt::format("{:.2e}", a);
  // Cents keep two decimals ($0.10); smaller amounts three significant digits ($0.00213).
  std::string cents = significant(a, 3, /*trim=*/true);
  const size_t dot = cents.find('.');
  if (dot == std::string::npos)
    cents += ".00";
  else if (cents.size() - dot < 3)
    cents.append(3 - (cents.size() - dot), '0');
  return sign + "$" + cents;
}

std::string byte_size(double bytes) {
  if (!std::isfinite(bytes)) return std::string(kMissing);
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLastUnit = sizeof(kUnits) / sizeof(kUnits[0]) - 1;
  // Rounded first, so that 1023.9 MiB reads "1.00 GiB", not "1020 MiB".
  double v = std::fabs(bytes);
  int unit = 0;
  while (unit < kLastUnit && round_significant(v, 3) >= 1000) {
    v /= 1024;
    ++unit;
  }
  const std::string sign = bytes < 0 ? "-" : "";
  // Whole bytes are exact: "512 B", never "512.0 B".
  if (unit == 0) return sign + fmt::format("{} B", static_cast<int64_t>(std::llround(v)));
  return sign + significant(v, 3) + " " + kUnits[unit];
}

std::string plain(const std::optional<double>& v, int digits) {
  if (!v || !std::isfinite(*v)) return std::string(kMissing);
  if (std::fabs(*v) >= 1000 && std::fabs(*v) < 9e15)
    return group_digits(static_cast<int64_t>(std::llround(*v)));
  return significant(*v, digits);
}

namespace {

// The length of the UTF-8 sequence at `s[i]` and its code point; 0 when the bytes there are not
// one (a stray continuation byte, a truncated sequence, an overlong form, a surrogate).
size_t utf8_sequence(std::string_view s, size_t i, char32_t& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  size_t n = 0;
  char32_t min = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2, cp = lead & 0x1f, min = 0x80;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3, cp = lead & 0x0f, min = 0x800;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Characters that reorder or hide the text around them (Unicode's bidirectional embeddings,
// overrides and isolates): "Trojan Source" names that read as something else.
bool reorders_text(char32_t cp) {
  return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

const char* c_escape(unsigned char c) {
  switch (c) {
    case '\0': return "\\0";
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\r': return "\\r";
    default: return nullptr;
  }
}

std::string wrap(std::string_view text, size_t width, std::string_view indent) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool newline = end != std::string_view::npos;
    if (!newline) end = text.size();
    std::string_view line = text.substr(start, end - start);
    std::string_view lead;  // "" on a line's first row, then the indent
    while (lead.size() + line.size() > width) {
      const size_t room = width > lead.size() ? width - lead.size() : 0;
      size_t cut = line.rfind(' ', room);
      if (cut == std::string_view::npos || cut == 0) cut = line.find(' ', room);
      if (cut == std::string_view::npos) break;  // one word longer than the width
      out.append(lead).append(line.substr(0, cut)).push_back('\n');
      line.remove_prefix(cut + 1);
      lead = indent;
    }
    out.append(lead).append(line);
    if (newline) out.push_back('\n');
    start = end + 1;
  }
  return out;
}

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    char32_t cp = 0;
    const size_t n = c >= 0x80 ? utf8_sequence(text, i, cp) : 0;
    if (const char* named = c_escape(c); named && n == 0) {
      out += named;
      ++i;
    } else if (n == 0 || (cp >= 0x80 && cp <= 0x9f)) {
      // A control, or bytes a terminal would read in its own way: each byte shown as a number.
      for (size_t k = 0; k < std::max<size_t>(n, 1); ++k) {
        out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
      }
      i += std::max<size_t>(n, 1);
    } else if (reorders_text(cp)) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(cp));
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string message_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0;;) {
    const size_t end = text.find('\n', at);
    out += terminal_safe(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return out;
    out += '\n';
    at = end + 1;
  }
}

}  // namespace xo

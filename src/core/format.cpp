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

}  // namespace xo

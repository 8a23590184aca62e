#include "train/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace xo {
namespace {

// Linear interpolation between order statistics (numpy's default percentile method).
double percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

double relative_spread(const TimingStats& s) {
  if (s.count == 0 || !(s.median > 0)) return std::numeric_limits<double>::quiet_NaN();
  return (s.p90 - s.p10) / s.median;
}

TimingStats summarize(std::vector<double> samples) {
  TimingStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.count = static_cast<int64_t>(samples.size());
  s.min = samples.front();
  s.max = samples.back();
  s.median = percentile(samples, 0.5);
  s.p10 = percentile(samples, 0.1);
  s.p90 = percentile(samples, 0.9);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.count);
  double var = 0;
  for (double x : samples) var += (x - s.mean) * (x - s.mean);
  var /= static_cast<double>(s.count);
  s.cv = s.mean > 0 ? std::sqrt(var) / s.mean : 0.0;
  return s;
}

}  // namespace xo

#include "train/timing_series.h"

#include <algorithm>
#include <cmath>

namespace xo {
namespace {

// The bins cover 10^-9 ms to 10^15 ms (a clock's nanosecond to decades): a time outside is counted
// in the bin at that end (its exact value still sets min, max and the moments).
constexpr double kLowestMs = 1e-9, kHighestMs = 1e15;

// The natural logarithm of one bin's width ratio, 1 + kBinWidth.
const double kLogRatio = std::log1p(TimingSeries::kBinWidth);

int32_t bin_of(double ms) {
  const double clamped = std::isnan(ms) ? kLowestMs : std::clamp(ms, kLowestMs, kHighestMs);
  return static_cast<int32_t>(std::floor(std::log(clamped) / kLogRatio));
}

// The middle of a bin (geometric: within kBinWidth / 2 of any time in it, relatively).
double middle_of(int32_t bin) { return std::exp((static_cast<double>(bin) + 0.5) * kLogRatio); }

// The k-th smallest folded sample (0-based): the exact min and max at the ends, elsewhere its
// bin's middle, kept within them.
double order_statistic(const TimingSeries::Folded& f, int64_t k) {
  if (k <= 0) return f.min;
  if (k >= f.count - 1) return f.max;
  int64_t seen = 0;
  for (const auto& [bin, n] : f.bins) {
    seen += n;
    if (k < seen) return std::clamp(middle_of(bin), f.min, f.max);
  }
  return f.max;
}

// As summarize's percentile: linear interpolation between the order statistics around q (n - 1).
double percentile(const TimingSeries::Folded& f, double q) {
  const double pos = q * static_cast<double>(f.count - 1);
  const auto lo = static_cast<int64_t>(std::floor(pos));
  const double a = order_statistic(f, lo), b = order_statistic(f, lo + 1);
  return a + (b - a) * (pos - static_cast<double>(lo));
}

}  // namespace

void TimingSeries::add(double ms) {
  if (!has_warmup_) {
    has_warmup_ = true;
    warmup_ = ms;
    return;
  }
  if (!folded_) {
    exact_.push_back(ms);
    if (exact_.size() > kExactSamples) fold();
    return;
  }
  count_in_bin(ms);
}

void TimingSeries::count_in_bin(double ms) {
  Folded& f = f_;
  f.min = f.count == 0 ? ms : std::min(f.min, ms);
  f.max = f.count == 0 ? ms : std::max(f.max, ms);
  ++f.count;
  const double d = ms - f.mean;  // Welford's update
  f.mean += d / static_cast<double>(f.count);
  f.m2 += d * (ms - f.mean);
  const int32_t bin = bin_of(ms);
  const auto at = std::lower_bound(f.bins.begin(), f.bins.end(), bin,
                                   [](const auto& entry, int32_t b) { return entry.first < b; });
  if (at != f.bins.end() && at->first == bin) {
    ++at->second;
  } else {
    f.bins.insert(at, {bin, 1});
    if (f.bins.size() > kMaxBins) merge_farther_tail();
  }
}

void TimingSeries::merge_farther_tail() {
  auto& bins = f_.bins;
  int64_t seen = 0;
  int32_t median_bin = bins.back().first;
  for (const auto& [bin, n] : bins) {
    seen += n;
    if (2 * seen >= f_.count) {
      median_bin = bin;
      break;
    }
  }
  const bool high =
      int64_t{bins.back().first} - median_bin >= median_bin - int64_t{bins.front().first};
  if (high) {
    bins[bins.size() - 2].second += bins.back().second;
    bins.pop_back();
  } else {
    bins[1].second += bins.front().second;
    bins.erase(bins.begin());
  }
}

void TimingSeries::fold() {
  folded_ = true;
  f_ = Folded{};
  for (double ms : exact_) count_in_bin(ms);
  exact_.clear();
  exact_.shrink_to_fit();
}

int64_t TimingSeries::size() const {
  if (!has_warmup_) return 0;
  return 1 + (folded_ ? f_.count : static_cast<int64_t>(exact_.size()));
}

TimingStats TimingSeries::summary() const {
  if (!has_warmup_) return {};
  if (!folded_) return summarize(exact_.empty() ? std::vector<double>{warmup_} : exact_);
  TimingStats s;
  s.count = f_.count;
  s.min = f_.min;
  s.max = f_.max;
  s.mean = f_.mean;
  s.median = percentile(f_, 0.5);
  s.p10 = percentile(f_, 0.1);
  s.p90 = percentile(f_, 0.9);
  s.cv = f_.mean > 0 ? std::sqrt(f_.m2 / static_cast<double>(f_.count)) / f_.mean : 0.0;
  return s;
}

std::vector<double> TimingSeries::samples() const {
  std::vector<double> all;
  if (!has_warmup_) return all;
  all.reserve(1 + exact_.size());
  all.push_back(warmup_);
  all.insert(all.end(), exact_.begin(), exact_.end());
  return all;
}

TimingSeries TimingSeries::from_samples(const std::vector<double>& samples) {
  TimingSeries s;
  for (double ms : samples) s.add(ms);
  return s;
}

TimingSeries TimingSeries::from_folded(double warmup, Folded folded) {
  TimingSeries s;
  s.has_warmup_ = true;
  s.warmup_ = warmup;
  s.folded_ = true;
  s.f_ = std::move(folded);
  return s;
}

}  // namespace xo

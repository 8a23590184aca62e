// Step times in bounded space (train/timing_series.h): exact up to kExactSamples, the same summary
// summarize() gives; past them, count, min, max and mean exact and the median, p10 and p90 within
// half a bin of the exact ones; memory that stays flat from 10^5 to 10^6 samples.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "train/stats.h"
#include "train/timing_series.h"

namespace xo {
namespace {

// Step times as a loaded machine gives them: a lognormal body around 2.7 ms and one step in a
// hundred slowed up to 50-fold (a page fault, another process).
std::vector<double> step_times(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> body(std::log(2.7), 0.12);
  std::uniform_real_distribution<double> slowdown(2, 50);
  std::bernoulli_distribution stalled(0.01);
  std::vector<double> v(n);
  for (double& x : v) x = body(rng) * (stalled(rng) ? slowdown(rng) : 1.0);
  return v;
}

TimingSeries series_of(const std::vector<double>& v) {
  TimingSeries s;
  for (double x : v) s.add(x);
  return s;
}

// What the run reported before the series were bounded: the warm-up dropped, the rest summarised.
TimingStats exact_after_warmup(std::vector<double> v) {
  if (v.size() > 1) v.erase(v.begin());
  return summarize(std::move(v));
}

TEST(TimingSeries, UpToItsExactSamplesItSummarisesAsSummarizeDoes) {
  for (const size_t n :
       {size_t{0}, size_t{1}, size_t{2}, size_t{100}, TimingSeries::kExactSamples + 1}) {
    SCOPED_TRACE(n);
    const std::vector<double> v = step_times(n, 1);
    const TimingSeries s = series_of(v);
    EXPECT_FALSE(s.folded());
    EXPECT_EQ(s.size(), static_cast<int64_t>(n));
    const TimingStats a = s.summary(), b = exact_after_warmup(v);
    EXPECT_EQ(a.count, b.count);
    for (auto field : {&TimingStats::median, &TimingStats::mean, &TimingStats::min,
                       &TimingStats::max, &TimingStats::p10, &TimingStats::p90, &TimingStats::cv}) {
      EXPECT_EQ(a.*field, b.*field);  // the same bits
    }
    EXPECT_EQ(s.samples(), v);
  }
}

TEST(TimingSeries, PastThemItsQuantilesAreWithinHalfABinAndItsMomentsExact) {
  const std::vector<double> v = step_times(200'000, 2);
  const TimingSeries s = series_of(v);
  ASSERT_TRUE(s.folded());
  EXPECT_EQ(s.size(), 200'000);
  const TimingStats a = s.summary(), b = exact_after_warmup(v);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_NEAR(a.mean, b.mean, 1e-12 * b.mean);
  EXPECT_NEAR(a.cv, b.cv, 1e-9 * b.cv);
  const double half_bin = TimingSeries::kBinWidth / 2;  // the stalled tail merged past kMaxBins
  for (auto field : {&TimingStats::median, &TimingStats::p10, &TimingStats::p90}) {
    EXPECT_NEAR(a.*field, b.*field, half_bin * b.*field) << a.*field << " against " << b.*field;
  }
  // A checkpoint's copy of it summarises the same.
  const TimingSeries back = TimingSeries::from_folded(s.warmup(), s.folded_state());
  EXPECT_EQ(back.summary().median, a.median);
  EXPECT_EQ(back.summary().p90, a.p90);
}

// What a long run keeps does not grow with its steps: from 10^5 steps on it holds at most kMaxBins
// bins, and 10^6 steps' quantiles are as close as 10^5 steps' were.
TEST(TimingSeries, ItsSizeStaysFlatFromATenthOfAMillionStepsToAMillion) {
  const std::vector<double> v = step_times(1'000'000, 3);
  TimingSeries s;
  for (size_t i = 0; i < v.size(); ++i) {
    s.add(v[i]);
    if ((i + 1) % 100'000 == 0) {
      SCOPED_TRACE(i + 1);
      EXPECT_LE(s.folded_state().bins.size(), TimingSeries::kMaxBins);
      EXPECT_EQ(s.samples().size(), 1u);  // the warm-up alone: the rest are counted, not kept
      const TimingStats a = s.summary();
      const TimingStats b = exact_after_warmup({v.begin(), v.begin() + static_cast<long>(i + 1)});
      for (auto field : {&TimingStats::median, &TimingStats::p10, &TimingStats::p90})
        EXPECT_NEAR(a.*field, b.*field, TimingSeries::kBinWidth / 2 * b.*field);
    }
  }
  EXPECT_EQ(s.folded_state().bins.size(), TimingSeries::kMaxBins);  // its tail merged
}

// Times a clock cannot give (zero, denormal, huge) are counted in the end bins; min and max stay
// exact.
TEST(TimingSeries, TimesOutsideTheBinsAreCountedAtTheirEnds) {
  TimingSeries s;
  s.add(1.0);  // the warm-up
  for (size_t i = 0; i < TimingSeries::kExactSamples; ++i) s.add(2.0);
  s.add(0.0);
  s.add(1e300);
  ASSERT_TRUE(s.folded());
  const TimingStats t = s.summary();
  EXPECT_EQ(t.min, 0.0);
  EXPECT_EQ(t.max, 1e300);
  EXPECT_NEAR(t.median, 2.0, 2.0 * TimingSeries::kBinWidth);
}

}  // namespace
}  // namespace xo

// Step-time statistics: the median and percentiles of a run's steps, and the spread reported beside
// the median, which one outlier must not blow up as it does the coefficient of variation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "train/stats.h"

namespace xo {
namespace {

TEST(TimingStats, SummarizeGivesMedianPercentilesAndCv) {
  const TimingStats s = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_LE(s.p10, 2);
  EXPECT_GE(s.p90, 4);
  EXPECT_NEAR(s.cv, std::sqrt(2.0) / 3, 1e-12);  // population standard deviation / mean
}

// A thousand steps of 6.5 us and one of 80 ms (a page fault, another process): the CV is in the
// thousands of percent, the spread stays that of the steady steps.
TEST(TimingStats, OneOutlierBlowsUpTheCvButNotTheSpread) {
  std::vector<double> steps;
  for (int i = 0; i < 1000; ++i) steps.push_back(0.0064 + 0.0002 * (i % 3));
  steps.push_back(80.0);
  const TimingStats s = summarize(steps);
  EXPECT_GT(s.cv, 10.0);
  EXPECT_NEAR(relative_spread(s), 0.0004 / 0.0066, 1e-9);
}

TEST(TimingStats, SpreadOfNothingIsNotANumber) {
  EXPECT_TRUE(std::isnan(relative_spread(summarize({}))));
  EXPECT_DOUBLE_EQ(relative_spread(summarize({2, 2, 2})), 0.0);
}

}  // namespace
}  // namespace xo

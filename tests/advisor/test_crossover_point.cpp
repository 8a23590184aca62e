// The crossover interpolation on synthetic curves: one crossing, none, several, ties, points that
// only one device has, and bad times skipped.
#include <gtest/gtest.h>

#include <cmath>

#include "advisor/crossover_point.h"

namespace xo {
namespace {

// A series whose time at axis value v is f(v); params = 10^v.
template <typename F>
SweepSeries curve(const std::string& device, const std::vector<double>& axis, F f) {
  SweepSeries s{device, {}};
  for (double v : axis) s.points.push_back({v, std::pow(10.0, v), f(v)});
  return s;
}

TEST(Crossover, OneCrossingInterpolatedInTheLogRatio) {
  const std::vector<double> axis = {1, 2, 3, 4, 5};
  // cpu grows 10x per step, gpu is flat at 100: equal at v = 3 exactly... shift to 3.5:
  // cpu(v) = 10^(v - 1.5), gpu = 100 -> log ratio = (v - 3.5) ln 10, zero at 3.5.
  const auto cpu = curve("cpu", axis, [](double v) { return std::pow(10.0, v - 1.5); });
  const auto gpu = curve("gpu", axis, [](double) { return 100.0; });
  const auto c = find_crossovers({cpu, gpu});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].faster, "gpu");
  EXPECT_EQ(c[0].slower, "cpu");
  EXPECT_NEAR(c[0].axis_value, 3.5, 1e-12);
  EXPECT_NEAR(c[0].params, std::pow(10.0, 3.5), 1e-6);  // geometric between 1e3 and 1e4
  EXPECT_EQ(c[0].below_axis, 3);
  EXPECT_EQ(c[0].above_axis, 4);
  // The order of the series does not change the answer.
  const auto d = find_crossovers({gpu, cpu});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].faster, "gpu");
  EXPECT_NEAR(d[0].axis_value, 3.5, 1e-12);
}

TEST(Crossover, NoneWhenOneDeviceIsAlwaysFaster) {
  const std::vector<double> axis = {1, 2, 3};
  const auto a = curve("a", axis, [](double v) { return v; });
  const auto b = curve("b", axis, [](double v) { return 2 * v; });
  EXPECT_TRUE(find_crossovers({a, b}).empty());
  EXPECT_TRUE(find_crossovers({a}).empty());
  EXPECT_TRUE(find_crossovers({}).empty());
}

TEST(Crossover, SeveralCrossingsInAxisOrder) {
  const std::vector<double> axis = {0, 1, 2, 3, 4};
  // a is faster at 0, slower at 1-2, faster at 3-4: crossings in (0,1) and (2,3).
  const auto a = curve("a", axis, [](double v) { return v == 1 || v == 2 ? 4.0 : 1.0; });
  const auto b = curve("b", axis, [](double) { return 2.0; });
  const auto c = find_crossovers({a, b});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].faster, "b");
  EXPECT_NEAR(c[0].axis_value, 0.5, 1e-12);  // log 1/2 and log 4/2 are symmetric
  EXPECT_EQ(c[1].faster, "a");
  EXPECT_NEAR(c[1].axis_value, 2.5, 1e-12);
  // Three devices: every pair is compared.
  const auto third = curve("c", axis, [](double) { return 100.0; });
  EXPECT_EQ(find_crossovers({a, b, third}).size(), 2u);
}

TEST(Crossover, TiesAtAPointCountOnceAndTouchesDoNot) {
  const std::vector<double> axis = {1, 2, 3};
  const auto a = curve("a", axis, [](double v) { return v; });  // 1 2 3
  const auto b = curve("b", axis, [](double) { return 2.0; });  // 2 2 2: tie at 2
  const auto c = find_crossovers({a, b});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].axis_value, 2);
  EXPECT_EQ(c[0].faster, "b");
  // Touching without crossing: a = 1 2 1 against b = 2.
  const auto touch = curve("t", axis, [](double v) { return v == 2 ? 2.0 : 1.0; });
  EXPECT_TRUE(find_crossovers({touch, b}).empty());
}

TEST(Crossover, OnlySharedAxisValuesAndValidTimesCount) {
  SweepSeries a{"a", {{1, 10, 1.0}, {2, 20, 1.0}, {3, 30, 1.0}, {4, 40, 1.0}}};
  // b lacks 2 and has a NaN at 3: the comparison is between 1 and 4 only.
  SweepSeries b{"b", {{4, 40, 0.5}, {1, 10, 2.0}, {3, 30, std::nan("")}}};
  const auto c = find_crossovers({a, b});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].below_axis, 1);
  EXPECT_EQ(c[0].above_axis, 4);
  EXPECT_NEAR(c[0].axis_value, 2.5, 1e-12);
  EXPECT_EQ(c[0].faster, "b");
}

}  // namespace
}  // namespace xo

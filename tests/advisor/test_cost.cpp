// Cost arithmetic against numbers worked by hand (the working is in the comments), break-even
// including the "never" case, and the assumption checks that name the command-line option.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "advisor/cost.h"
#include "core/error.h"
#include "support/expect_error.h"

namespace xo {
namespace {

using testing::expect_user_error;

constexpr double kTolerance = 1e-12;

CatalogDevice gpu(double price_usd = 3000, double power_w = 250) {
  CatalogDevice d;
  d.id = "gpu-a";
  d.kind = DeviceKind::Gpu;
  d.name = "Test GPU";
  d.f32_tflops = 10;
  d.memory_bandwidth_gbs = 500;
  d.power_w = power_w;
  d.price_usd = price_usd;
  return d;
}

CatalogInstance rented(double on_demand, std::optional<double> spot = std::nullopt) {
  CatalogInstance in;
  in.id = "cloud-a";
  in.device = "gpu-a";
  in.on_demand_usd_per_hour = on_demand;
  in.spot_usd_per_hour = spot;
  return in;
}

// --- Renting -------------------------------------------------------------------------------------

TEST(CostInstance, HoursTimesHourlyPrices) {
  // 3 h x 2.00 = 6.00 on demand; 3 h x 0.60 = 1.80 spot.
  const InstanceCost c = instance_cost(rented(2.0, 0.6), 3);
  EXPECT_EQ(c.instance, "cloud-a");
  EXPECT_DOUBLE_EQ(c.run_hours, 3);
  EXPECT_NEAR(c.on_demand_usd, 6.0, kTolerance);
  ASSERT_TRUE(c.spot_usd.has_value());
  EXPECT_NEAR(*c.spot_usd, 1.8, kTolerance);
}

TEST(CostInstance, NoSpotPriceNoSpotCost) {
  const InstanceCost c = instance_cost(rented(2.0), 0.5);
  EXPECT_NEAR(c.on_demand_usd, 1.0, kTolerance);
  EXPECT_FALSE(c.spot_usd.has_value());
}

TEST(CostInstance, RejectsNegativeHours) {
  expect_user_error([] { instance_cost(rented(2.0), -1); }, {"hours", ">= 0"});
}

// --- Owning --------------------------------------------------------------------------------------

TEST(CostOwnership, GpuCapitalAndPowerWithHost) {
  // Defaults: 3 years, utilisation 0.5, 0.15 USD/kWh, host 150 W.
  // lifetime hours = 3 x 365.25 x 24 = 26298; capital = 3000 / (26298 x 0.5) = 0.228154232261008
  // power = (250 + 150) W / 1000 x 0.15 = 0.06 USD/h; 10 h: 10 x (0.228154... + 0.06) = 2.881542...
  const OwnershipCost c = ownership_cost(gpu(), 10, OwnershipAssumptions{});
  EXPECT_EQ(c.device, "gpu-a");
  EXPECT_NEAR(c.hourly_capital_usd, 0.22815423226100845, kTolerance);
  EXPECT_NEAR(c.hourly_power_usd, 0.06, kTolerance);
  EXPECT_NEAR(c.run_usd, 2.8815423226100845, kTolerance);
}

TEST(CostOwnership, CpuPowerLeavesOutTheHost) {
  // A CPU's TDP stands for its box: 100 W / 1000 x 0.20 = 0.02 USD/h, host power ignored.
  // 2 years at full use: capital = 1000 / (2 x 365.25 x 24 x 1.0) = 1000 / 17532 = 0.0570385580...
  // 5 h: 5 x (0.05703855806525211 + 0.02) = 0.3851927903262606.
  CatalogDevice cpu = gpu(1000, 100);
  cpu.kind = DeviceKind::Cpu;
  cpu.cores = 16;
  OwnershipAssumptions a;
  a.lifetime_years = 2;
  a.utilisation = 1.0;
  a.electricity_usd_per_kwh = 0.2;
  a.host_power_w = 500;
  const OwnershipCost c = ownership_cost(cpu, 5, a);
  EXPECT_NEAR(c.hourly_capital_usd, 0.05703855806525211, kTolerance);
  EXPECT_NEAR(c.hourly_power_usd, 0.02, kTolerance);
  EXPECT_NEAR(c.run_usd, 0.3851927903262606, kTolerance);
}

TEST(CostOwnership, FreeElectricityLeavesOnlyCapital) {
  OwnershipAssumptions a;
  a.electricity_usd_per_kwh = 0;
  const OwnershipCost c = ownership_cost(gpu(), 1, a);
  EXPECT_DOUBLE_EQ(c.hourly_power_usd, 0);
  EXPECT_NEAR(c.run_usd, 0.22815423226100845, kTolerance);
}

TEST(CostOwnership, DeviceNotSoldSeparatelyHasNoOwnershipCost) {
  const CatalogDevice a10g = gpu(0);
  expect_user_error([&] { ownership_cost(a10g, 1, OwnershipAssumptions{}); },
                    {"gpu-a", "not sold separately", "--price gpu-a=USD"});
  expect_user_error([&] { break_even(a10g, rented(1.0), OwnershipAssumptions{}, 100); },
                    {"gpu-a", "not sold separately"});
}

// --- Break-even ----------------------------------------------------------------------------------

TEST(CostBreakEven, HoursPerMonthAndPayback) {
  // Monthly capital = 3000 / (3 x 12) = 83.333 USD. Renting costs 1.06 USD/h, electricity
  // 0.06 USD/h, so each hour owned saves 1.00: break-even at 83.333 h/month. At 200 h/month the
  // 3000 USD are paid back after 3000 / (200 x 1.00) = 15 months.
  const BreakEven b = break_even(gpu(), rented(1.06), OwnershipAssumptions{}, 200);
  EXPECT_EQ(b.device, "gpu-a");
  EXPECT_EQ(b.instance, "cloud-a");
  EXPECT_DOUBLE_EQ(b.at_hours_per_month, 200);
  ASSERT_TRUE(b.hours_per_month.has_value());
  EXPECT_NEAR(*b.hours_per_month, 3000.0 / 36.0, 1e-9);
  ASSERT_TRUE(b.payback_months.has_value());
  EXPECT_NEAR(*b.payback_months, 15.0, 1e-9);
}

TEST(CostBreakEven, NeverWhenRentingCostsNoMoreThanElectricity) {
  // Electricity alone is 0.06 USD/h; renting at 0.05 or exactly 0.06 saves nothing per hour.
  for (double hourly : {0.05, 0.06}) {
    const BreakEven b = break_even(gpu(), rented(hourly), OwnershipAssumptions{}, 200);
    EXPECT_FALSE(b.hours_per_month.has_value()) << hourly;
    EXPECT_FALSE(b.payback_months.has_value()) << hourly;
  }
}

TEST(CostBreakEven, NoPaybackWithoutUse) {
  const BreakEven b = break_even(gpu(), rented(1.06), OwnershipAssumptions{}, 0);
  ASSERT_TRUE(b.hours_per_month.has_value());
  EXPECT_NEAR(*b.hours_per_month, 3000.0 / 36.0, 1e-9);
  EXPECT_FALSE(b.payback_months.has_value());
}

TEST(CostBreakEven, LongerLifetimeLowersTheThreshold) {
  // Same saving per hour (electricity does not depend on the lifetime): 3000 / (6 x 12) / 1.00.
  OwnershipAssumptions a;
  a.lifetime_years = 6;
  const BreakEven b = break_even(gpu(), rented(1.06), a, 100);
  ASSERT_TRUE(b.hours_per_month.has_value());
  EXPECT_NEAR(*b.hours_per_month, 3000.0 / 72.0, 1e-9);
  EXPECT_NEAR(*b.payback_months, 30.0, 1e-9);  // 3000 / (100 x 1.00)
}

// --- Assumptions ---------------------------------------------------------------------------------

struct AssumptionCase {
  std::string name;
  OwnershipAssumptions a;
  std::string option;
};

std::ostream& operator<<(std::ostream& out, const AssumptionCase& c) { return out << c.name; }

OwnershipAssumptions with(double years, double utilisation, double electricity, double host) {
  OwnershipAssumptions a;
  a.lifetime_years = years;
  a.utilisation = utilisation;
  a.electricity_usd_per_kwh = electricity;
  a.host_power_w = host;
  return a;
}

class CostAssumptionError : public ::testing::TestWithParam<AssumptionCase> {};

TEST_P(CostAssumptionError, NamesTheOption) {
  const AssumptionCase& c = GetParam();
  expect_user_error([&] { check_assumptions(c.a); }, {c.option});
  // The cost functions check them too.
  expect_user_error([&] { ownership_cost(gpu(), 1, c.a); }, {c.option});
  expect_user_error([&] { break_even(gpu(), rented(1.0), c.a, 10); }, {c.option});
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

INSTANTIATE_TEST_SUITE_P(CostAssumptions, CostAssumptionError,
                         ::testing::ValuesIn(std::vector<AssumptionCase>{
                             {"zero_lifetime", with(0, 0.5, 0.15, 150), "--lifetime-years"},
                             {"negative_lifetime", with(-1, 0.5, 0.15, 150), "--lifetime-years"},
                             {"nan_lifetime", with(kNaN, 0.5, 0.15, 150), "--lifetime-years"},
                             {"zero_utilisation", with(3, 0, 0.15, 150), "--utilisation"},
                             {"utilisation_above_one", with(3, 1.5, 0.15, 150), "--utilisation"},
                             {"nan_utilisation", with(3, kNaN, 0.15, 150), "--utilisation"},
                             {"negative_electricity", with(3, 0.5, -0.1, 150),
                              "--electricity-price"},
                             {"negative_host_power", with(3, 0.5, 0.15, -1), "--host-power"},
                         }),
                         [](const auto& test) { return test.param.name; });

TEST(CostAssumptions, DefaultsAndEdgesPass) {
  EXPECT_NO_THROW(check_assumptions(OwnershipAssumptions{}));
  EXPECT_NO_THROW(check_assumptions(with(0.5, 1.0, 0, 0)));  // utilisation 1, free power, no host
}

}  // namespace
}  // namespace xo

// What a run costs rented and owned, and when owning pays: plain arithmetic over catalog entries,
// kept apart from the catalog so the formulas can be read (and tested) on their own.
#include "advisor/cost.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"

namespace xo {
namespace {

constexpr double kDaysPerYear = 365.25;  // the Julian year: leap years included on average
constexpr double kHoursPerDay = 24;
constexpr double kMonthsPerYear = 12;
constexpr double kWattsPerKilowatt = 1000;

double lifetime_hours(const OwnershipAssumptions& a) {
  return a.lifetime_years * kDaysPerYear * kHoursPerDay;
}

// A GPU draws its board power plus the host it sits in; a CPU's TDP stands for its whole box.
double hourly_power_usd(const CatalogDevice& device, const OwnershipAssumptions& a) {
  const double watts = device.power_w + (device.kind == DeviceKind::Gpu ? a.host_power_w : 0);
  return watts / kWattsPerKilowatt * a.electricity_usd_per_kwh;
}

void check_sold(const CatalogDevice& device) {
  if (device.price_usd > 0) return;
  throw UserError(fmt::format(
      "device '{}' ({}) is not sold separately (price_usd = 0 in the catalog), so it has no "
      "ownership cost; give it a purchase price with --price {}=USD",
      device.id, device.name, device.id));
}

void check_hours(double hours, const char* what) {
  if (!std::isfinite(hours) || hours < 0) {
    throw UserError(fmt::format("{} must be a finite number >= 0, got {}", what, hours));
  }
}

}  // namespace

void check_assumptions(const OwnershipAssumptions& a) {
  // Written as !(x > 0) so that NaN fails too.
  if (!(a.lifetime_years > 0) || !std::isfinite(a.lifetime_years)) {
    throw UserError(fmt::format("--lifetime-years must be > 0, got {}", a.lifetime_years));
  }
  if (!(a.utilisation > 0 && a.utilisation <= 1)) {
    throw UserError(fmt::format(
        "--utilisation must be in (0, 1] (the fraction of the lifetime the hardware is busy), got "
        "{}",
        a.utilisation));
  }
  if (!(a.electricity_usd_per_kwh >= 0) || !std::isfinite(a.electricity_usd_per_kwh)) {
    throw UserError(fmt::format("--electricity-price must be >= 0 (USD per kWh), got {}",
                                a.electricity_usd_per_kwh));
  }
  if (!(a.host_power_w >= 0) || !std::isfinite(a.host_power_w)) {
    throw UserError(fmt::format("--host-power must be >= 0 (watts), got {}", a.host_power_w));
  }
}

InstanceCost instance_cost(const CatalogInstance& instance, double run_hours) {
  check_hours(run_hours, "the run's hours");
  // The whole instance is billed even when the run uses only one of its device_count devices.
  InstanceCost c;
  c.instance = instance.id;
  c.run_hours = run_hours;
  c.on_demand_usd = run_hours * instance.on_demand_usd_per_hour;
  if (instance.spot_usd_per_hour) c.spot_usd = run_hours * *instance.spot_usd_per_hour;
  return c;
}

OwnershipCost ownership_cost(const CatalogDevice& device, double run_hours,
                             const OwnershipAssumptions& a) {
  check_assumptions(a);
  check_sold(device);
  check_hours(run_hours, "the run's hours");
  OwnershipCost c;
  c.device = device.id;
  c.hourly_capital_usd = device.price_usd / (lifetime_hours(a) * a.utilisation);
  c.hourly_power_usd = hourly_power_usd(device, a);
  c.run_usd = run_hours * (c.hourly_capital_usd + c.hourly_power_usd);
  return c;
}

BreakEven break_even(const CatalogDevice& device, const CatalogInstance& instance,
                     const OwnershipAssumptions& a, double hours_per_month) {
  check_assumptions(a);
  check_sold(device);
  check_hours(hours_per_month, "the hours of use per month");
  BreakEven b;
  b.device = device.id;
  b.instance = instance.id;
  b.at_hours_per_month = hours_per_month;
  const double monthly_capital = device.price_usd / (a.lifetime_years * kMonthsPerYear);
  // What each hour of owning saves over renting, once the capital is spent: the rent minus the
  // electricity. When that is not positive, owning never catches up.
  const double saving_per_hour = instance.on_demand_usd_per_hour - hourly_power_usd(device, a);
  if (saving_per_hour > 0) {
    b.hours_per_month = monthly_capital / saving_per_hour;
    if (hours_per_month > 0)
      b.payback_months = device.price_usd / (hours_per_month * saving_per_hour);
  }
  return b;
}

std::string pairing_text(const CostTable::BuyOrRent& b) {
  if (b.same_device) return "the same device, rented";
  return "no instance in the catalog rents a " + b.name +
         " alone: the single-device instance of its kind with the cheapest run, priced for the "
         "same work";
}

}  // namespace xo

// What a training run costs: on each cloud instance (hours times the hourly price), and on owned
// hardware (the purchase price amortised over its lifetime at a chosen utilisation, plus
// electricity), and how many hours of use per month make buying cheaper than renting.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/catalog.h"

namespace xo {

// The assumptions of ownership, each overridable from the command line.
struct OwnershipAssumptions {
  double lifetime_years = 3;  // the hardware is written off over this time
  double utilisation = 0.5;   // fraction of the lifetime's hours it is in use
  double electricity_usd_per_kwh = 0.15;
  double host_power_w = 150;  // the rest of the machine a GPU sits in (0 for a CPU box)
};

// Cost of one run on a cloud instance.
struct InstanceCost {
  std::string instance;  // CatalogInstance id
  double run_hours = 0;
  double on_demand_usd = 0;
  std::optional<double> spot_usd;
};

// Cost of one run on owned hardware.
struct OwnershipCost {
  std::string device;             // CatalogDevice id
  double hourly_capital_usd = 0;  // price / (lifetime hours * utilisation)
  double hourly_power_usd = 0;    // (device + host power) in kW * electricity price
  double run_usd = 0;             // run_hours * (capital + power)
};

// Hours of use per month above which buying `device` costs less than renting `instance`:
// (price / lifetime months) / (instance hourly - power hourly). Never (nullopt) when renting costs
// no more per hour than the electricity alone.
struct BreakEven {
  std::string device, instance;
  std::optional<double> hours_per_month;
  // Months until the purchase price is paid back by not renting, at `at_hours_per_month` of use.
  std::optional<double> payback_months;
  double at_hours_per_month = 0;
};

InstanceCost instance_cost(const CatalogInstance& instance, double run_hours);
OwnershipCost ownership_cost(const CatalogDevice& device, double run_hours,
                             const OwnershipAssumptions& a);
BreakEven break_even(const CatalogDevice& device, const CatalogInstance& instance,
                     const OwnershipAssumptions& a, double hours_per_month);

// The cost of one training run (epochs x steps) everywhere it could run, as the report shows it:
// here (measured), on every cloud instance and owned device the catalog prices, and when buying
// beats renting. Each figure says whether its run time was measured or predicted.
struct CostTable {
  std::string model;
  int64_t epochs = 0, steps_per_epoch = 0;
  OwnershipAssumptions assumptions;
  double hours_per_month = 0;        // the use at which payback times are given
  std::vector<std::string> catalog;  // the catalog files the prices came from

  struct Local {  // a device of this machine, measured
    std::string device, name;
    double run_hours = 0;
  };
  struct Instance {
    std::string id, provider, name, device;
    int device_count = 1;
    std::string region;
    double on_demand_usd_per_hour = 0;
    double run_hours = 0, on_demand_usd = 0;
    std::optional<double> spot_usd;
    bool predicted = true;
    std::string source, date;
    // A multi-device instance with its link in the catalog: the run data-parallel on all its
    // devices (predicted: each device's slice of the batch, plus the ring all-reduce of the
    // gradients over the link, less what backward hides). run_hours above is on one device.
    struct ScaleOut {
      int devices = 0;    // in all
      int instances = 1;  // how many of the instance they are in
      std::string link;   // between the devices of one instance ("" for one device)
      double link_gbs = 0;
      std::string network;  // between the instances (several only)
      double network_gbit = 0;
      double step_s = 0, compute_s = 0, allreduce_s = 0, exposed_s = 0;
      double efficiency = 0;  // throughput against `devices` times one device's
      double run_hours = 0, on_demand_usd = 0;
    };
    std::optional<ScaleOut> scale_out;
    // The run data-parallel on every device of 2 and 4 of these instances, where the catalog
    // gives their network.
    std::vector<ScaleOut> across;
  };
  struct Owned {
    std::string device, name;
    double price_usd = 0, run_hours = 0, run_usd = 0;
    double hourly_capital_usd = 0, hourly_power_usd = 0;
    bool predicted = true;
    std::string source, date;
  };
  struct BuyOrRent {
    std::string device, name, instance;
    // The instance rents this device alone; else, where no instance does, it is the single-device
    // instance of the same kind with the cheapest run, priced for the same work (pairing_text).
    bool same_device = false;
    double rent_usd_per_owned_hour = 0;  // renting the work of one hour on the owned device
    std::optional<double> hours_per_month, payback_months;  // none: never
    double at_hours_per_month = 0;
  };
  std::vector<Local> local;
  std::vector<Instance> instances;
  std::vector<Owned> ownership;
  std::vector<BuyOrRent> break_even;
};

// Why a break-even compares with its instance: "the same device, rented" or the reason another.
std::string pairing_text(const CostTable::BuyOrRent& b);

// Checks the assumptions (positive lifetime, utilisation in (0, 1], non-negative prices); errors
// name the option.
void check_assumptions(const OwnershipAssumptions& a);

}  // namespace xo

// The price table: a run of the model on each catalog instance, on several of its devices or
// instances where it has what that is priced with, and on owned hardware against renting
// (advice.h: cost_table).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "advisor/advice.h"
#include "advisor/scale_out.h"
#include "core/format.h"
#include "train/data_parallel.h"

namespace xo {
namespace {

// The instance counts a run across several instances is priced on, where an instance's network
// is given.
constexpr int kAcrossInstances[] = {2, 4};

// Whether `i` has what a run across several of it is priced with: its network, and the link
// between its devices where it has several.
bool priced_across(const CatalogInstance& i) {
  return i.network_gbit > 0 && (i.device_count == 1 || i.interconnect_gbs > 0);
}

}  // namespace

std::vector<int> scale_out_counts(const Catalog& catalog, const std::string& device) {
  std::vector<int> counts;
  const auto add = [&counts](int n) {
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  };
  for (const CatalogInstance& i : catalog.instances) {
    if (i.device != device) continue;
    if (i.device_count > 1 && i.interconnect_gbs > 0) add(i.device_count);
    if (priced_across(i)) {
      for (const int m : kAcrossInstances) add(m * i.device_count);
    }
  }
  return counts;
}

namespace {

// A data-parallel step over NVLink-class links with crossover's own engine (--reduce nccl): NCCL's
// ring, its per-step latency a few microseconds, the reduction fused into the copy; the buckets
// summed once backward has finished (nothing hidden: across simulated hosts disc-12 scaled as this
// model predicts, not as one with DDP's overlap; docs/benchmarks.md, "Across simulated hosts").
constexpr double kCollectiveLatencyS = 5e-6;
// A step of NCCL's ring that crosses from one machine to another: NCCL's own tuning model's
// network latency for its ring (Simple protocol), 9.6 µs (src/graph/tuning.cc, hwLat NET).
constexpr double kNetworkLatencyS = 9.6e-6;

// The run of `p`'s model on all the devices of `instances` of `instance`, data-parallel.
CostTable::Instance::ScaleOut scale_out_on(const CatalogInstance& instance,
                                           const DevicePrediction& p, int64_t parameters,
                                           double steps, int instances = 1) {
  const int n = instance.device_count * instances;
  const double whole = step_seconds(p);
  // Each device's slice: predicted at its batch where the profile could, else the step's work
  // divided among the devices and its fixed costs not.
  const auto found = p.slice_seconds.find(n);
  const double slice =
      found != p.slice_seconds.end()
          ? found->second
          : p.step.overhead_seconds + std::max(0.0, whole - p.step.overhead_seconds) / n;
  const Ring ring{
      instances, instance.device_count,
      Link{instance.interconnect, instance.interconnect_gbs * 1e9, kCollectiveLatencyS, 0, {}},
      Link{instance.network, instance.network_gbit * 1e9 / 8, kNetworkLatencyS, 0, {}}};
  const DataParallelStep dp =
      predict_data_parallel(whole, slice, 4.0 * static_cast<double>(parameters), ring,
                            DataParallel::kDefaultBucketBytes, /*overlapped=*/false);
  CostTable::Instance::ScaleOut out;
  out.devices = n;
  out.instances = instances;
  out.link = instance.interconnect;
  out.link_gbs = instance.interconnect_gbs;
  if (instances > 1) {
    out.network = instance.network;
    out.network_gbit = instance.network_gbit;
  }
  out.step_s = dp.step_s;
  out.compute_s = dp.compute_s;
  out.allreduce_s = dp.allreduce_s;
  out.exposed_s = dp.exposed_s;
  out.efficiency = dp.efficiency;
  out.run_hours = dp.step_s * steps / 3600.0;
  out.on_demand_usd = out.run_hours * instance.on_demand_usd_per_hour * instances;
  return out;
}

}  // namespace

namespace {

// Hours of the run on a catalog device, from its prediction; on a CPU instance with fewer vCPUs
// than the whole CPU has hardware threads, the predicted work (not the fixed costs) takes
// proportionally longer.
struct RunHours {
  const std::vector<DevicePrediction>& ps;
  const Catalog& catalog;
  int64_t epochs;
  int64_t steps_per_epoch;

  std::optional<double> operator()(const std::string& device, bool* predicted,
                                   const CatalogInstance* instance = nullptr) const {
    const double steps = static_cast<double>(steps_per_epoch * epochs);
    for (const DevicePrediction& p : ps) {
      if (p.device != device || p.local) continue;
      *predicted = !p.measured_s;
      double s = run_seconds(p, epochs, steps_per_epoch);
      const CatalogDevice* d = catalog.find_device(device);
      if (!p.measured_s && instance && d && d->kind == DeviceKind::Cpu && d->threads > 0 &&
          instance->vcpus > 0) {
        const double share = std::min(1.0, static_cast<double>(instance->vcpus) / d->threads);
        s = (p.step.overhead_seconds + (p.step.flops_seconds + p.step.bytes_seconds) / share) *
            steps;
      }
      return s / 3600.0;
    }
    return std::nullopt;
  }
};

// Each catalog instance with a prediction for its device, priced, and with a data-parallel run
// over its devices where it has several and a link between them.
void price_instances(CostTable& t, const RunHours& hours_on, int64_t parameters, double steps) {
  for (const CatalogInstance& i : hours_on.catalog.instances) {
    bool predicted = true;
    const auto hours = hours_on(i.device, &predicted, &i);
    if (!hours) continue;
    const InstanceCost c = instance_cost(i, *hours);
    t.instances.push_back({i.id, i.provider, i.name, i.device, i.device_count, i.region,
                           i.on_demand_usd_per_hour, c.run_hours, c.on_demand_usd, c.spot_usd,
                           predicted, i.source, i.date, std::nullopt});
    if (parameters <= 0) continue;
    for (const DevicePrediction& p : hours_on.ps) {
      if (p.device != i.device || p.local) continue;
      CostTable::Instance& row = t.instances.back();
      if (i.device_count > 1 && i.interconnect_gbs > 0) {
        row.scale_out = scale_out_on(i, p, parameters, steps);
      }
      if (priced_across(i)) {
        for (const int m : kAcrossInstances) {
          row.across.push_back(scale_out_on(i, p, parameters, steps, m));
        }
      }
      break;
    }
  }
}

// The rental a device to buy is weighed against: the same device where an instance offers it
// alone; else the cheapest single-device instance of the same kind per run.
const CatalogInstance* rental_for(const CatalogDevice& d, const RunHours& hours_on) {
  const Catalog& catalog = hours_on.catalog;
  const CatalogInstance* rent = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const CatalogInstance& i : catalog.instances) {
    if (i.device == d.id && i.device_count == 1) {
      rent = &i;
      break;
    }
  }
  if (!rent) {
    for (const CatalogInstance& i : catalog.instances) {
      const CatalogDevice* id = catalog.find_device(i.device);
      bool p2 = true;
      const auto h = hours_on(i.device, &p2);
      if (!id || id->kind != d.kind || i.device_count != 1 || !h) continue;
      const double run = *h * i.on_demand_usd_per_hour;
      if (run < best) {
        best = run;
        rent = &i;
      }
    }
  }
  return rent;
}

// Buying `d` (the run takes `hours` on it) against renting `rent`; none where the rental has no
// prediction or the run takes no time.
std::optional<CostTable::BuyOrRent> buy_or_rent(const CatalogDevice& d, double hours,
                                                const CatalogInstance& rent,
                                                const RunHours& hours_on, const AdviceOptions& o) {
  // What renting the work of one hour on the owned device costs: the instance's hourly price
  // times how much longer (or shorter) the run takes there (another device, or a CPU instance
  // with a share of the chip).
  CatalogInstance equivalent = rent;
  bool rent_predicted = true;
  const auto rent_hours = hours_on(rent.device, &rent_predicted, &rent);
  if (!rent_hours || hours <= 0) return std::nullopt;
  equivalent.on_demand_usd_per_hour = rent.on_demand_usd_per_hour * *rent_hours / hours;
  BreakEven b = break_even(d, equivalent, o.ownership, o.hours_per_month);
  // A month has 730.5 hours: a break-even beyond that is never reached.
  constexpr double kHoursPerMonth = 365.25 * 24 / 12;
  if (b.hours_per_month && *b.hours_per_month > kHoursPerMonth) b.hours_per_month.reset();
  // Paid back only after the hardware is written off: not paid back.
  if (b.payback_months && *b.payback_months > o.ownership.lifetime_years * 12) {
    b.payback_months.reset();
  }
  return CostTable::BuyOrRent{d.id,
                              d.name,
                              rent.id,
                              rent.device == d.id,
                              equivalent.on_demand_usd_per_hour,
                              b.hours_per_month,
                              b.payback_months,
                              b.at_hours_per_month};
}

// Each catalog device with a price and a prediction: what owning it costs a run, and the
// break-even against renting.
void price_ownership(CostTable& t, const RunHours& hours_on, const AdviceOptions& o) {
  for (const CatalogDevice& d : hours_on.catalog.devices) {
    if (d.price_usd <= 0) continue;
    bool predicted = true;
    const auto hours = hours_on(d.id, &predicted);
    if (!hours) continue;
    const OwnershipCost c = ownership_cost(d, *hours, o.ownership);
    // Named as predicted ("... at bf16" where a CPU is weighed at bf16).
    std::string name = d.name;
    for (const DevicePrediction& p : hours_on.ps) {
      if (p.device == d.id && !p.local) name = p.name;
    }
    t.ownership.push_back({d.id, name, d.price_usd, *hours, c.run_usd, c.hourly_capital_usd,
                           c.hourly_power_usd, predicted, d.source, d.date});
    const CatalogInstance* rent = rental_for(d, hours_on);
    if (!rent) continue;
    if (auto b = buy_or_rent(d, *hours, *rent, hours_on, o)) {
      b->name = name;
      t.break_even.push_back(*b);
    }
  }
}

}  // namespace

CostTable cost_table(const std::string& model, int64_t parameters, int64_t epochs,
                     int64_t steps_per_epoch, const std::vector<DevicePrediction>& ps,
                     const Catalog& catalog, const AdviceOptions& o) {
  check_assumptions(o.ownership);
  const double steps = static_cast<double>(steps_per_epoch * epochs);
  const RunHours hours_on{ps, catalog, epochs, steps_per_epoch};
  CostTable t;
  t.model = model;
  t.epochs = epochs;
  t.steps_per_epoch = steps_per_epoch;
  t.assumptions = o.ownership;
  t.hours_per_month = o.hours_per_month;
  t.catalog = catalog.origins;
  for (const DevicePrediction& p : ps) {
    if (!p.local || !p.measured_s) continue;
    t.local.push_back({p.device, p.name, run_seconds(p, epochs, steps_per_epoch) / 3600.0});
  }
  // Fused trials are not split data-parallel over an instance's devices (a trial per device
  // would be): no scale-out is priced for them.
  price_instances(t, hours_on, o.trials > 0 ? 0 : parameters, steps);
  price_ownership(t, hours_on, o);
  return t;
}

}  // namespace xo

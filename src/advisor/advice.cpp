// The recommendation: the advice's lines, each from the predictions and the price table
// (advice.h: advice_lines).
#include "advisor/advice.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "advisor/scale_out.h"
#include "core/format.h"
#include "train/data_parallel.h"

namespace xo {

namespace {

// The hourly price of the cheapest instance that rents `device` alone (infinity where none does).
double cheapest_rate(const CostTable& cost, const std::string& device) {
  double rate = std::numeric_limits<double>::infinity();
  for (const CostTable::Instance& i : cost.instances) {
    if (i.device == device && i.device_count == 1) rate = std::min(rate, i.on_demand_usd_per_hour);
  }
  return rate;
}

// The fastest device measured here, and the fastest catalog device that is faster than it (a tie
// going to the cheaper to rent), or that none is.
void fastest_lines(std::vector<std::string>& lines, const std::string& model,
                   const std::vector<DevicePrediction>& ps, const CostTable& cost) {
  const DevicePrediction* here = nullptr;
  for (const DevicePrediction& p : ps) {
    if (p.local && p.measured_s && (!here || *p.measured_s < *here->measured_s)) here = &p;
  }
  const double here_s = here ? *here->measured_s : std::numeric_limits<double>::infinity();
  const DevicePrediction* anywhere = nullptr;  // the fastest faster than here
  const DevicePrediction* fastest = nullptr;   // the fastest, faster or not
  for (const DevicePrediction& p : ps) {
    if (p.local) continue;
    if (!fastest || step_seconds(p) < step_seconds(*fastest)) fastest = &p;
    if (step_seconds(p) >= here_s) continue;
    const bool tie = anywhere && std::abs(step_seconds(p) - step_seconds(*anywhere)) <=
                                     kTieFraction * step_seconds(*anywhere);
    if (!anywhere || (tie ? cheapest_rate(cost, p.device) < cheapest_rate(cost, anywhere->device)
                          : step_seconds(p) < step_seconds(*anywhere))) {
      anywhere = &p;
    }
  }
  if (here) {
    lines.push_back(fmt::format(
        "Fastest here: {} at {} per step, {} for {} epochs of {} (measured).", here->device,
        duration(*here->measured_s),
        duration(run_seconds(*here, cost.epochs, cost.steps_per_epoch)), cost.epochs, model));
  }
  if (anywhere) {
    lines.push_back(fmt::format(
        "Fastest in the catalog: {} at {} per step ({}; {}-bound){}.", anywhere->name,
        duration(step_seconds(*anywhere)),
        anywhere->measured_s ? "measured" : prediction_kind(*anywhere), anywhere->step.bound,
        here ? fmt::format(", {:.1f}x here's", here_s / step_seconds(*anywhere)) : std::string()));
  } else if (here && fastest) {
    lines.push_back(fmt::format(
        "Nothing in the catalog is faster than {} here: the fastest, {}, takes {} per step ({}; "
        "{}-bound).",
        here->device, fastest->name, duration(step_seconds(*fastest)),
        fastest->measured_s ? "measured" : prediction_kind(*fastest), fastest->step.bound));
  }
}

// A scaled-out run against the cheapest instance that rents one of its devices alone.
std::string scale_out_against(const CostTable::Instance* alone,
                              const CostTable::Instance::ScaleOut& x) {
  if (!alone) return "";
  const double ratio = x.on_demand_usd / alone->on_demand_usd;
  return fmt::format(
      "; against {} {} with one {} ({} for {}): {}", alone->provider, alone->name, alone->device,
      usd(alone->on_demand_usd), duration(alone->run_hours * 3600),
      ratio <= 1
          ? fmt::format("going from 1 to {} devices pays ({:.2f}x the dollars)", x.devices, ratio)
      : alone->run_hours > x.run_hours
          ? fmt::format("going from 1 to {} devices finishes {:.1f}x sooner for "
                        "{:.1f}x the dollars",
                        x.devices, alone->run_hours / x.run_hours, ratio)
          : fmt::format("going from 1 to {} devices does not pay (slower, and "
                        "{:.1f}x the dollars): the gradients' all-reduce ({} per "
                        "step, {} of it after backward) outweighs each device's share of the "
                        "batch ({})",
                        x.devices, ratio, duration(x.allreduce_s), duration(x.exposed_s),
                        duration(x.compute_s)));
}

// Whether a scaled-out run of `run_hours` for `usd` could pay against `alone_hours` for
// `alone_usd`: no dearer, or saving at least `min_saving_s`, and faster in any case.
bool scaling_pays(double run_hours, double usd_spent, double alone_hours, double alone_usd,
                  double min_saving_s) {
  const double saved_s = (alone_hours - run_hours) * 3600;
  return saved_s > 0 && (usd_spent <= alone_usd || saved_s >= min_saving_s);
}

// The cheapest instance that rents `device` alone.
const CostTable::Instance* cheapest_alone(const CostTable& cost, const std::string& device) {
  const CostTable::Instance* alone = nullptr;
  for (const CostTable::Instance& i : cost.instances) {
    if (i.device == device && i.device_count == 1 &&
        (!alone || i.on_demand_usd < alone->on_demand_usd)) {
      alone = &i;
    }
  }
  return alone;
}

// Scaling out: of the multi-device instances whose data-parallel run pays against one of their
// devices, the fastest, against one of its devices and against the cheapest instance that rents
// that device alone. None where no such run pays.
std::optional<std::string> scale_out_line(const CostTable& cost, double min_saving_s) {
  const CostTable::Instance* scaled = nullptr;
  for (const CostTable::Instance& i : cost.instances) {
    if (!i.scale_out) continue;
    const CostTable::Instance* alone = cheapest_alone(cost, i.device);
    const double one_usd = alone ? alone->on_demand_usd : i.on_demand_usd;
    if (!scaling_pays(i.scale_out->run_hours, i.scale_out->on_demand_usd, i.run_hours, one_usd,
                      min_saving_s)) {
      continue;
    }
    if (!scaled || i.scale_out->run_hours < scaled->scale_out->run_hours) scaled = &i;
  }
  if (!scaled) return std::nullopt;
  const CostTable::Instance::ScaleOut& x = *scaled->scale_out;
  const CostTable::Instance* alone = cheapest_alone(cost, scaled->device);
  const double faster = scaled->run_hours / x.run_hours;
  return fmt::format(
      "Scaling out: {} {}'s {}x {} data-parallel over {} (--reduce nccl): {} per step "
      "(predicted, scaling efficiency {:.0f}%), {} one of them; the run in {} for {}{}.",
      scaled->provider, scaled->name, x.devices, scaled->device, x.link, duration(x.step_s),
      100 * x.efficiency,
      faster >= 1 ? fmt::format("{:.1f}x faster than", faster)
                  : fmt::format("{:.1f}x slower than", 1 / faster),
      duration(x.run_hours * 3600), usd(x.on_demand_usd), scale_out_against(alone, x));
}

// Across instances: of the runs across several instances that pay against the same instance
// alone (on all its devices where it has several), the one that finishes first. None where none
// pays.
std::optional<std::string> across_line(const CostTable& cost, double min_saving_s) {
  const CostTable::Instance* on = nullptr;
  const CostTable::Instance::ScaleOut* fastest = nullptr;
  for (const CostTable::Instance& i : cost.instances) {
    const double alone_hours = i.scale_out ? i.scale_out->run_hours : i.run_hours;
    const double alone_usd = i.scale_out ? i.scale_out->on_demand_usd : i.on_demand_usd;
    for (const CostTable::Instance::ScaleOut& x : i.across) {
      if (!scaling_pays(x.run_hours, x.on_demand_usd, alone_hours, alone_usd, min_saving_s))
        continue;
      if (!fastest || x.run_hours < fastest->run_hours) fastest = &x, on = &i;
    }
  }
  if (!fastest) return std::nullopt;
  const CostTable::Instance::ScaleOut& x = *fastest;
  const double alone_hours = on->scale_out ? on->scale_out->run_hours : on->run_hours;
  const double alone_usd = on->scale_out ? on->scale_out->on_demand_usd : on->on_demand_usd;
  const double ratio = x.on_demand_usd / alone_usd;
  const std::string verdict =
      ratio <= 1 ? fmt::format("going from 1 to {} instances pays ({:.2f}x the dollars)",
                               x.instances, ratio)
                 : fmt::format(
                       "going from 1 to {} instances finishes {:.1f}x sooner for {:.1f}x the "
                       "dollars",
                       x.instances, alone_hours / x.run_hours, ratio);
  return fmt::format(
      "Across instances: {}x {} {} ({}x {}) data-parallel over {} at {:.0f} Gbit/s: {} per step "
      "(predicted, the network at its rated speed; scaling efficiency {:.0f}%), the run in {} "
      "for {}; against one {} ({} for {}): {}.",
      x.instances, on->provider, on->name, x.devices, on->device, x.network, x.network_gbit,
      duration(x.step_s), 100 * x.efficiency, duration(x.run_hours * 3600), usd(x.on_demand_usd),
      on->name, duration(alone_hours * 3600), usd(alone_usd), verdict);
}

std::optional<std::string> cheapest_line(const CostTable& cost) {
  const CostTable::Instance* cheapest = nullptr;
  for (const CostTable::Instance& i : cost.instances) {
    if (!cheapest || i.on_demand_usd < cheapest->on_demand_usd) cheapest = &i;
  }
  if (!cheapest) return std::nullopt;
  const CostTable::Instance& c = *cheapest;
  return fmt::format("Cheapest cloud run: {} {} at {} on demand{} for {} ({} time).", c.provider,
                     c.name, usd(c.on_demand_usd),
                     c.spot_usd ? fmt::format(", {} spot", usd(c.spot_usd)) : "",
                     duration(c.run_hours * 3600), c.predicted ? "predicted" : "measured");
}

// Buying against renting, for the device the verdict finds worth it (none: nothing to say).
std::optional<std::string> buy_or_rent_line(const CostTable& cost,
                                            const std::string& verdict_device) {
  if (verdict_device.empty()) return std::nullopt;
  const CostTable::BuyOrRent* shown = nullptr;
  for (const CostTable::BuyOrRent& b : cost.break_even) {
    if (b.device == verdict_device) shown = &b;
  }
  if (!shown) return std::nullopt;
  const CostTable::BuyOrRent& b = *shown;
  const std::string pairing = b.same_device
                                  ? fmt::format("renting one on {}", b.instance)
                                  : fmt::format("renting {} ({})", b.instance, pairing_text(b));
  return b.hours_per_month
             ? fmt::format("Buying the {} beats {} above {:.0f} hours of use a month{}.", b.name,
                           pairing, *b.hours_per_month,
                           b.payback_months
                               ? fmt::format("; at {:.0f} h/month it pays back in {:.1f} months",
                                             b.at_hours_per_month, *b.payback_months)
                               : "")
             : fmt::format("Buying the {} never beats {} at these prices.", b.name, pairing);
}

}  // namespace

std::vector<std::string> advice_lines(const std::string& model,
                                      const std::vector<DevicePrediction>& ps,
                                      const CostTable& cost, const std::string& crossover,
                                      const std::string& verdict_device,
                                      double min_saving_seconds) {
  std::vector<std::string> lines;
  fastest_lines(lines, model, ps, cost);
  if (auto line = scale_out_line(cost, min_saving_seconds)) lines.push_back(*line);
  if (auto line = across_line(cost, min_saving_seconds)) lines.push_back(*line);
  if (auto line = cheapest_line(cost)) lines.push_back(*line);
  if (!crossover.empty()) lines.push_back(crossover);
  if (auto line = buy_or_rent_line(cost, verdict_device)) lines.push_back(*line);
  return lines;
}

}  // namespace xo

// The verdict (see verdict.h): the fastest GPU option against the fastest device here, judged by
// the speed-up and the time saved a run.
#include "advisor/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/format.h"

namespace xo {

std::optional<SweepLeader> fastest_throughout(const std::vector<SweepSeries>& series) {
  // Per axis value, the fastest series there and how many series have a point there.
  struct At {
    int count = 0;
    const SweepSeries* fastest = nullptr;
    double seconds = 0;
  };
  std::map<double, At> at;
  for (const SweepSeries& s : series) {
    for (const SweepPoint& p : s.points) {
      if (!(p.seconds > 0 && std::isfinite(p.seconds))) continue;
      At& a = at[p.axis_value];
      ++a.count;
      if (!a.fastest || p.seconds < a.seconds) {
        a.fastest = &s;
        a.seconds = p.seconds;
      }
    }
  }
  std::optional<SweepLeader> leader;
  for (const auto& [axis, a] : at) {
    if (a.count < 2) continue;
    if (!leader) {
      leader = SweepLeader{a.fastest->device, axis, axis};
    } else if (a.fastest->device != leader->device) {
      return std::nullopt;  // the lead changes: there is a crossover
    }
    leader->to = axis;
  }
  return leader;
}

std::string crossover_sentence(const std::vector<SweepSeries>& series,
                               const std::vector<Crossover>& crossovers, const std::string& axis,
                               bool predicted) {
  const char* kind = predicted ? "predicted" : "measured";
  if (crossovers.empty()) {
    const auto leader = fastest_throughout(series);
    if (!leader) return "";
    return fmt::format("{} is faster over the whole range of {} ({} to {}, {}): no crossover.",
                       leader->device, axis, significant(leader->from, 4, true),
                       significant(leader->to, 4, true), kind);
  }
  std::vector<std::string> parts;
  for (const Crossover& c : crossovers) {
    // Between two neighbouring whole values (depth 7 and 8: no model lies between them) the
    // crossing is said as that, not as an interpolated depth of 7.97.
    const bool neighbours =
        c.above_axis - c.below_axis == 1 && c.below_axis == std::floor(c.below_axis);
    const std::string where =
        neighbours ? fmt::format("between {} {} and {}", axis, significant(c.below_axis, 4, true),
                                 significant(c.above_axis, 4, true))
                   : fmt::format("at {} {}", axis, significant(c.axis_value, 3, true));
    parts.push_back(fmt::format("{} overtakes {} {}, about {} parameters", c.faster, c.slower,
                                where, significant(c.params, 2, true)));
  }
  return fmt::format("Crossover ({}): {}.", kind, fmt::join(parts, "; "));
}

namespace {

// "1.8x faster" or "4.0x slower".
std::string speed_ratio(double here, double there) {
  return here >= there ? fmt::format("{:.1f}x faster", here / there)
                       : fmt::format("{:.1f}x slower", there / here);
}

std::string option_time(const GpuOption& o) {
  return (o.lower_bound ? "at least " : "") + duration(o.seconds);
}

std::string option_cost(const GpuOption& o) {
  if (!o.usd) return "";
  return o.how == "rent" ? fmt::format(" for {} on demand", usd(*o.usd))
                         : fmt::format(" for {} of its purchase and power", usd(*o.usd));
}

// The fastest CPU measured here: the device a GPU option is weighed against; none when only a GPU
// was measured.
const DevicePrediction* fastest_cpu_here(const std::vector<DevicePrediction>& ps,
                                         const CostTable& cost) {
  const DevicePrediction* here = nullptr;
  for (const DevicePrediction& p : ps) {
    if (!p.local || !p.measured_s) continue;
    if (p.kind == DeviceKind::Cpu &&
        (!here || run_seconds(p, cost.epochs, cost.steps_per_epoch) <
                      run_seconds(*here, cost.epochs, cost.steps_per_epoch))) {
      here = &p;
    }
  }
  return here;
}

bool gpu_measured_here(const std::vector<DevicePrediction>& ps) {
  bool gpu_measured = false;
  for (const DevicePrediction& p : ps) {
    if (!p.local || !p.measured_s) continue;
    gpu_measured |= p.kind == DeviceKind::Gpu;
  }
  return gpu_measured;
}

// The options: this machine's GPUs, each GPU instance, each GPU to buy, in that order.
std::vector<GpuOption> gpu_options(const std::vector<DevicePrediction>& ps, const CostTable& cost,
                                   const Catalog& catalog) {
  const bool gpu_measured = gpu_measured_here(ps);
  std::vector<GpuOption> options;
  for (const DevicePrediction& p : ps) {
    if (p.local && p.measured_s && p.kind == DeviceKind::Gpu) {
      options.push_back({"here", p.device, p.name, p.device,
                         run_seconds(p, cost.epochs, cost.steps_per_epoch), std::nullopt, false,
                         false});
    }
  }
  // The prediction a catalog GPU's times come from: a lower bound (the roofline with no GPU
  // measured here), or a profile's with its expected error.
  auto prediction_of = [&](const std::string& device) -> const DevicePrediction* {
    for (const DevicePrediction& p : ps) {
      if (!p.local && p.device == device) return &p;
    }
    return nullptr;
  };
  auto lower_bound = [&](const std::string& device, bool predicted) {
    const DevicePrediction* p = prediction_of(device);
    return predicted && !gpu_measured && (!p || p->lower_bound);
  };
  auto expected = [&](const std::string& device) -> std::optional<double> {
    const DevicePrediction* p = prediction_of(device);
    return p ? p->expected_error : std::nullopt;
  };
  auto worst = [&](const std::string& device) -> std::optional<double> {
    const DevicePrediction* p = prediction_of(device);
    return p ? p->expected_worst : std::nullopt;
  };
  auto at_least = [&](const std::string& device) {
    const DevicePrediction* p = prediction_of(device);
    return p && p->expected_at_least;
  };
  auto is_gpu = [&](const std::string& id) {
    const CatalogDevice* d = catalog.find_device(id);
    return d && d->kind == DeviceKind::Gpu;
  };
  for (const CostTable::Instance& i : cost.instances) {
    if (!is_gpu(i.device)) continue;
    options.push_back(
        {"rent", i.id,
         fmt::format("{} {} ({}{})", i.provider, i.name,
                     i.device_count > 1 ? fmt::format("{}x ", i.device_count) : "", i.device),
         i.device, i.run_hours * 3600, i.on_demand_usd, i.predicted,
         lower_bound(i.device, i.predicted), i.predicted ? expected(i.device) : std::nullopt,
         i.predicted ? worst(i.device) : std::nullopt, i.predicted && at_least(i.device)});
  }
  for (const CostTable::Owned& o : cost.ownership) {
    if (!is_gpu(o.device)) continue;
    options.push_back(
        {"buy", o.device, fmt::format("your own {}", o.name), o.device, o.run_hours * 3600,
         o.run_usd, o.predicted, lower_bound(o.device, o.predicted),
         o.predicted ? expected(o.device) : std::nullopt,
         o.predicted ? worst(o.device) : std::nullopt, o.predicted && at_least(o.device)});
  }
  return options;
}

// A GPU here is the answer where there is one. Else renting: the cheapest rental that is faster
// than here (the price of the speed-up, with nothing to buy), or the fastest where none is. Buying
// is weighed against renting the same GPU by the break-even advice; it is the answer only where the
// catalog rents no GPU (the fastest to buy).
const GpuOption* choose_gpu(const std::vector<GpuOption>& options, const DevicePrediction* here,
                            double here_s) {
  const GpuOption* best = nullptr;
  for (const char* how : {"here", "rent", "buy"}) {
    for (const GpuOption& o : options) {
      if (o.how != how) continue;
      const bool faster = here && o.seconds < here_s;
      const bool best_faster = best && here && best->seconds < here_s;
      // Among options faster than here, the cheaper (then the faster); else the faster, a tie
      // (kTieFraction) going to the cheaper.
      const bool tie = best && std::abs(o.seconds - best->seconds) <= kTieFraction * best->seconds;
      const bool cheaper = best && o.usd.value_or(0) < best->usd.value_or(0);
      const bool better = !best || (faster && !best_faster) ||
                          (faster && best_faster &&
                           (cheaper || (o.usd.value_or(0) == best->usd.value_or(0) &&
                                        o.seconds < best->seconds))) ||
                          (!faster && !best_faster && (tie ? cheaper : o.seconds < best->seconds));
      if (better) best = &o;
    }
    if (best) break;
  }
  return best;
}

// How the GPU's time is known: "measured", "predicted, a lower bound", or with its expected error.
std::string time_kind(const GpuOption& g) {
  return !g.predicted    ? "measured"
         : g.lower_bound ? "predicted, a lower bound"
         : g.expected_error
             ? fmt::format(
                   "predicted, {}: median {:.0f}%{}",
                   g.expected_at_least ? "not validated, expected error at least"
                                       : "expected error",
                   100 * *g.expected_error,
                   g.expected_worst ? fmt::format(", worst {:.0f}%", 100 * *g.expected_worst) : "")
             : "predicted";
}

// The sentence when every GPU option is slower than here, with what bounds the GPU's step: fixed
// costs ("overhead") say the model is too small for it.
std::string slower_sentence(const std::vector<DevicePrediction>& ps, const GpuOption& g,
                            const DevicePrediction& here, const std::string& kind,
                            const std::string& here_time, const std::string& model) {
  std::string bound;
  for (const DevicePrediction& p : ps) {
    if (p.device == g.device && p.local == (g.how == "here")) bound = p.step.bound;
  }
  return fmt::format(
      "A GPU is not worth it for this run: {} is faster than every GPU option. The fastest, {}, "
      "would take {} ({}) against {}{}.",
      here.device, g.name, option_time(g), kind, here_time,
      bound == "overhead" ? fmt::format(": {} is too small to keep a GPU busy (its predicted "
                                        "GPU step is bound by fixed costs, not arithmetic)",
                                        model)
      : bound.empty()     ? ""
                          : fmt::format(" (its predicted GPU step is {}-bound)", bound));
}

// Judges the chosen GPU against here by the speed-up and the time saved a run; sets the verdict's
// worth_it and sentence.
void judge_gpu(GpuVerdict& v, const std::vector<DevicePrediction>& ps, const GpuOption& g,
               const DevicePrediction& here, const std::string& here_time,
               const GpuVerdictThresholds& t) {
  const double saved = v.here_seconds - g.seconds;
  const std::string kind = time_kind(g);
  if (g.seconds >= v.here_seconds) {
    v.sentence = slower_sentence(ps, g, here, kind, here_time, v.model);
  } else if (v.here_seconds / g.seconds < t.min_speedup) {
    v.sentence = fmt::format(
        "A GPU is not worth it for this run: {} would take {} ({}) against {}, only {} (saving {} "
        "a run{}); below {:.1f}x, moving the work to a GPU gains too little.",
        g.name, option_time(g), kind, here_time, speed_ratio(v.here_seconds, g.seconds),
        duration(saved), option_cost(g), t.min_speedup);
  } else if (saved < t.min_saving_seconds) {
    v.sentence = fmt::format(
        "A GPU is not worth it for this run: {} would take {} ({}) against {}, {}, but that saves "
        "only {} a run{}; under {} saved a run, setting up a GPU (starting an instance and copying "
        "the data to it, or buying a card) takes longer than it saves.",
        g.name, option_time(g), kind, here_time, speed_ratio(v.here_seconds, g.seconds),
        duration(saved), option_cost(g), duration(t.min_saving_seconds));
  } else {
    v.worth_it = true;
    v.sentence = fmt::format(
        "A GPU is worth it for this run: {} would take {} ({}) against {}, {}, saving {} a "
        "run{}.",
        g.name, option_time(g), kind, here_time, speed_ratio(v.here_seconds, g.seconds),
        duration(saved), option_cost(g));
  }
}

}  // namespace

std::optional<GpuVerdict> make_verdict(const std::vector<DevicePrediction>& ps,
                                       const CostTable& cost, const Catalog& catalog,
                                       std::string crossover, const GpuVerdictThresholds& t) {
  const DevicePrediction* here = fastest_cpu_here(ps, cost);
  GpuVerdict v;
  v.model = cost.model;
  v.epochs = cost.epochs;
  v.crossover = std::move(crossover);
  const std::vector<GpuOption> options = gpu_options(ps, cost, catalog);
  const double here_s = here ? run_seconds(*here, cost.epochs, cost.steps_per_epoch) : 0;
  const GpuOption* best = choose_gpu(options, here, here_s);
  if (best) v.gpu = *best;
  if (!here) {
    // Only a GPU was measured here: the verdict is about it against nothing; say what it takes.
    if (!best || best->how != "here") return std::nullopt;
    v.here = best->id;
    v.here_seconds = best->seconds;
    v.worth_it = true;
    v.sentence = fmt::format("This machine's GPU ({}) trains {} epochs of {} in {} (measured).",
                             best->name, cost.epochs, cost.model, duration(best->seconds));
    return v;
  }
  v.here = here->device;
  v.here_seconds = run_seconds(*here, cost.epochs, cost.steps_per_epoch);
  v.here_estimated = !here->measured_epoch_s;
  // The CPU at bf16 against a GPU predicted from f32 profiles: the sentence says so.
  const bool bf16_against_f32 = here->device == kCpuBf16 && best && best->predicted;
  const std::string here_time =
      fmt::format("{} on this machine's {}{}", duration(v.here_seconds), here->device,
                  bf16_against_f32 ? " (the CPU at bf16; GPUs are predicted at f32)" : "");
  if (!best) {
    v.sentence = fmt::format(
        "No GPU to compare: none was measured here and the catalog prices none. {} epochs of {} "
        "take {}.",
        cost.epochs, cost.model, here_time);
    return v;
  }
  judge_gpu(v, ps, *best, *here, here_time, t);
  return v;
}

const CatalogDevice* chart_gpu(const Catalog& catalog, const std::optional<GpuVerdict>& verdict) {
  if (verdict && verdict->gpu && verdict->gpu->how != "here") {
    if (const CatalogDevice* d = catalog.find_device(verdict->gpu->device)) return d;
  }
  return reference_gpu(catalog);
}

}  // namespace xo

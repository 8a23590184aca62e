#include "tune/search_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "optim/optimizer.h"
#include "tune/space.h"

namespace xo {

std::string step_key(const ModelSpec& spec) {
  const OptimizerSettings& opt = spec.train.optimizer;
  return fmt::format("{}optimizer {} {} shuffle {}", fusion_key(spec),
                     optimizer_type_name(opt.type), optimizer_bytes_per_param(opt),
                     spec.train.shuffle);
}

Placement place_jobs(const std::vector<double>& jobs, int instances, int per_instance) {
  XO_ASSERT(instances > 0 && per_instance > 0);
  std::vector<double> free_at(static_cast<size_t>(instances) * per_instance, 0.0);
  for (double job : jobs) {
    auto first = std::min_element(free_at.begin(), free_at.end());
    *first += job;
  }
  Placement p;
  for (int i = 0; i < instances; ++i) {
    const auto begin = free_at.begin() + static_cast<std::ptrdiff_t>(i) * per_instance;
    const double last = *std::max_element(begin, begin + per_instance);
    p.wall_seconds = std::max(p.wall_seconds, last);
    p.instance_seconds += last;
  }
  return p;
}

namespace {

// The trial's step on `device` from the nearest device profile, as `advise` predicts a catalog
// device: a fused trial as its share of a group as large as its group here (advise --trials).
// None where no profile predicts it.
std::optional<double> profiled_step_seconds(const TrialCostInput& t, const CatalogDevice& device,
                                            const std::vector<DevicePeaks>& peaks,
                                            const AdviceOptions& o) {
  // Copied (profiles and all) only where `o` is not already as this trial needs it: a caller
  // pricing many trials passes it without expected errors, at its trials' group size.
  const int trials = t.fused > 1 ? t.fused : 0;
  std::optional<AdviceOptions> copy;
  if (o.trials != trials || o.expected_errors) {
    copy = o;
    copy->trials = trials;
    copy->expected_errors = false;  // the seconds only
  }
  const AdviceOptions& at = copy ? *copy : o;
  const auto ps = profiled_step(*t.spec, t.batch, catalog_target(device, peaks, at), at);
  if (!ps) return std::nullopt;
  return ps->step.seconds / std::max(1, t.fused);
}

}  // namespace

double predicted_trial_seconds(const TrialCostInput& t, const CatalogDevice& device,
                               const std::vector<DevicePeaks>& peaks, const AdviceOptions& o,
                               bool& lower_bound, StepMemo* memo) {
  const bool gpu = device.cores == 0;
  const DeviceKind kind = gpu ? DeviceKind::Gpu : DeviceKind::Cpu;
  const double outside_steps = std::max(0.0, t.process_seconds - t.train_seconds);
  lower_bound = false;
  if (t.spec && !o.profiles.empty()) {
    std::optional<double> step;
    if (memo && !t.step_key.empty()) {
      const std::string key = device.id + '\n' + t.step_key + '\n' + std::to_string(t.fused);
      const auto [at, fresh] = memo->try_emplace(key);
      if (fresh) at->second = profiled_step_seconds(t, device, peaks, o);
      step = at->second;
    } else {
      step = profiled_step_seconds(t, device, peaks, o);
    }
    if (step) return *step * static_cast<double>(t.steps) + outside_steps;
  }
  const DeviceRates rates = catalog_rates(device, peaks, o);
  double efficiency = 1;
  if (kind == t.kind) {
    // Calibrated by the trial's own step here, on a device of the same kind.
    if (const DevicePeaks* here = find_peaks(peaks, t.device); here && t.measured_step_s > 0)
      efficiency = calibrate_efficiency(t.work, probed_rates(*here), t.measured_step_s);
  } else {
    lower_bound = gpu;  // an uncalibrated GPU: its roofline, the least the step can take
  }
  const double step = predict_step(t.work, rates, efficiency).seconds;
  return step * static_cast<double>(t.steps) + outside_steps;
}

std::vector<SearchCostLine> search_cost(const std::vector<TrialCostInput>& trials,
                                        const std::vector<DevicePeaks>& peaks,
                                        const Catalog& catalog, const AdviceOptions& o,
                                        int instances, std::string& note, StepMemo* memo) {
  std::vector<SearchCostLine> lines;
  if (trials.empty()) return lines;
  std::set<int> counts = {1, std::max(1, instances), static_cast<int>(trials.size())};
  for (const CatalogInstance& inst : catalog.instances) {
    const CatalogDevice* device = catalog.find_device(inst.device);
    if (!device) continue;
    SearchCostLine line;
    line.instance = inst.id;
    line.device = device->id;
    // A GPU instance runs one trial per GPU; a CPU instance one trial on all its cores.
    line.devices = device->cores == 0 ? std::max(1, inst.device_count) : 1;
    line.price_per_hour = inst.on_demand_usd_per_hour;
    std::vector<double> jobs;
    for (const TrialCostInput& t : trials) {
      bool lower = false;
      jobs.push_back(predicted_trial_seconds(t, *device, peaks, o, lower, memo));
      line.lower_bound = line.lower_bound || lower;
    }
    for (int n : counts) {
      const Placement p = place_jobs(jobs, n, line.devices);
      line.plans.push_back({n, p.wall_seconds, p.instance_seconds / 3600 * line.price_per_hour});
    }
    lines.push_back(std::move(line));
  }
  std::stable_sort(lines.begin(), lines.end(),
                   [](const SearchCostLine& a, const SearchCostLine& b) {
                     return a.plans.front().dollars < b.plans.front().dollars;
                   });
  const bool profiled = !o.profiles.empty() && trials.front().spec;
  note = fmt::format(
      "Each trial's steps predicted on the instance's device {}, plus its time outside the steps "
      "(start-up, data, evaluation) as measured here; a trial fused here in a group of K "
      "predicted as its share of a fused group of K there (the fused prediction of advise "
      "--trials, which no measurement on a GPU has validated yet); trials placed in the search's "
      "order on the first free "
      "device (one trial per GPU, one per CPU instance); each instance billed on demand, by the "
      "second with no minimum charge, until its last trial ends. Successive halving's waits "
      "between rungs are not modelled.",
      profiled ? "from a device profile (each kernel of the step measured on a profiled device, "
                 "scaled to this one by the rate that bounds it; the validation table gives its "
                 "expected error)"
               : "by the roofline (calibrated by the trial's own median step here on a device of "
                 "the same kind; a GPU with none measured here at its roofline: at least that "
                 "long)");
  return lines;
}

}  // namespace xo

// The predictions: each device of this machine and of the catalog, a step of the model on it
// measured, profiled or at its roofline, with its assumptions and expected error (advice.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>
#include <utility>

#include "advisor/advice.h"
#include "advisor/scale_out.h"
#include "core/format.h"
#include "model/work.h"
#include "train/data_parallel.h"

namespace xo {
namespace {}  // namespace

double step_seconds(const DevicePrediction& p) {
  return p.measured_s ? *p.measured_s : p.step.seconds;
}

const char* prediction_kind(const DevicePrediction& p) {
  if (p.measured_s) return "measured";
  return p.lower_bound ? "predicted, a lower bound" : "predicted";
}

double run_seconds(const DevicePrediction& p, int64_t epochs, int64_t steps_per_epoch) {
  if (p.measured_epoch_s) return *p.measured_epoch_s * static_cast<double>(epochs);
  return step_seconds(p) * static_cast<double>(steps_per_epoch * epochs);
}

double local_efficiency(const RunRecord& row, const std::vector<DevicePeaks>& peaks) {
  const DevicePeaks* p = find_peaks(peaks, row.result.device.id);
  if (!p || row.result.step_ms.median <= 0) return 1.0;
  return calibrate_efficiency(row.work, probed_rates(*p), row.result.step_ms.median * 1e-3);
}

std::string chart_gpu_note(const Catalog& catalog, const AdviceOptions& o,
                           const CatalogDevice& gpu) {
  const CatalogInstance* rented = nullptr;
  for (const CatalogInstance& i : catalog.instances) {
    if (i.device == gpu.id && i.device_count == 1 &&
        (!rented || i.on_demand_usd_per_hour < rented->on_demand_usd_per_hour)) {
      rented = &i;
    }
  }
  const std::string why =
      &gpu != reference_gpu(catalog)
          ? fmt::format("the {} is the GPU the verdict weighs", gpu.name)
          : fmt::format(
                "the {} is the GPU of the catalog's cheapest single-GPU instance ({} {} at "
                "${:.3f}/h), the GPU one would rent first",
                gpu.name, rented ? rented->provider : "", rented ? rented->name : "",
                rented ? rented->on_demand_usd_per_hour : 0.0);
  if (!o.profiles.empty()) {
    // The kind of estimate: which profile, and its validated error.
    const ModelSpec probe = *builtin_spec("disc-2");
    if (const auto ps = profiled_step(probe, probe.train.batch, catalog_target(gpu, {}, o), o)) {
      return fmt::format(
          "{}; predicted from the {} profile, each kernel scaled by the {}'s datasheet rates "
          "({:.1f} TFLOP/s f32, {:.0f} GB/s){}",
          why, ps->from->id, gpu.name, gpu.f32_tflops, gpu.memory_bandwidth_gbs,
          ps->expected_error
              ? fmt::format(", {}: median {:.0f}%, worst {:.0f}% (validation table)",
                            ps->expected_error->at_least ? "not validated, expected error at least"
                                                         : "expected error",
                            100 * ps->expected_error->median, 100 * ps->expected_error->worst)
              : "");
    }
  }
  return fmt::format(
      "{}; predicted at its roofline ({:.1f} TFLOP/s f32, {:.0f} GB/s) with no GPU measured here "
      "to calibrate it, so a lower bound on its time",
      why, gpu.f32_tflops, gpu.memory_bandwidth_gbs);
}

const CatalogDevice* reference_gpu(const Catalog& catalog) {
  const CatalogDevice* best = nullptr;
  double cheapest = std::numeric_limits<double>::infinity();
  for (const CatalogInstance& i : catalog.instances) {
    const CatalogDevice* d = catalog.find_device(i.device);
    if (d && d->kind == DeviceKind::Gpu && i.device_count == 1 &&
        i.on_demand_usd_per_hour < cheapest) {
      cheapest = i.on_demand_usd_per_hour;
      best = d;
    }
  }
  return best;
}

DeviceRates catalog_rates(const CatalogDevice& d, const std::vector<DevicePeaks>& peaks,
                          const AdviceOptions& o) {
  DeviceRates r;
  r.gflops = d.f32_tflops * 1e3 * o.achievable_flops_fraction;
  r.bandwidth_gbs = d.memory_bandwidth_gbs * o.achievable_bandwidth_fraction;
  const DevicePeaks* local = nullptr;
  for (const DevicePeaks& p : peaks) {
    if (device_kind_of(p.device) == d.kind) local = &p;
  }
  if (local) {
    r.step_overhead_us = local->step_overhead_us;
    r.layer_overhead_us = local->layer_overhead_us;
  } else if (d.kind == DeviceKind::Gpu) {
    r.step_overhead_us = o.gpu_step_overhead_us;
    r.layer_overhead_us = o.gpu_layer_overhead_us;
  }
  return r;
}

void use_profiles(AdviceOptions& o, const std::vector<DeviceProfile>& local) {
  o.profiles = local;
  o.local_profiles.clear();
  for (const DeviceProfile& p : local) o.local_profiles.push_back(p.id);
  std::vector<DeviceProfile> shipped = shipped_profiles();
  for (DeviceProfile& p : shipped) {
    bool replaced = false;
    for (const DeviceProfile& l : local) replaced |= l.id == p.id;
    if (!replaced) o.profiles.push_back(std::move(p));
  }
  o.expected_errors = true;
}

const std::vector<ValidationRow>& shipped_validation() {
  // The table is the shipped profiles' (they carry the measurements they are checked against);
  // a cached profile of this machine predicts, but is validated by `crossover validate`. The
  // shipped profiles are built in: their table is the same for the whole process.
  static const std::vector<ValidationRow> table = validate_profiles(shipped_profiles());
  return table;
}

AdviceOptions with_profiles(const AdviceOptions& o) {
  AdviceOptions out = o;
  if (out.profiles.empty()) use_profiles(out, cached_profiles_here(default_profile_cache()));
  return out;
}

namespace {

// The engine's rules for a device of `kind` with `threads`: a CPU's as a CPU profile recorded
// them, with its own thread count; a GPU's: one shard.
ExecutionPolicy policy_for(DeviceKind kind, int threads, const AdviceOptions& o) {
  if (kind == DeviceKind::Gpu) return {};
  for (const DeviceProfile& p : o.profiles) {
    if (p.kind == DeviceKind::Cpu && p.has_kernels()) {
      ExecutionPolicy e = p.policy;
      e.shard_threads = std::max(1, threads);
      return e;
    }
  }
  return {};
}

bool is_local_profile(const DeviceProfile& p, const AdviceOptions& o) {
  return std::find(o.local_profiles.begin(), o.local_profiles.end(), p.id) !=
         o.local_profiles.end();
}

// A catalog GPU is the part a GPU profile was measured on when its model number is in the
// profile's device name and their multiprocessors agree (an H100 SXM's 132, not a PCIe's 114).
bool same_part(const TargetDevice& t, const DeviceProfile& p) {
  if (t.kind != DeviceKind::Gpu || p.kind != DeviceKind::Gpu) return false;
  CatalogDevice c;
  c.kind = t.kind;
  c.name = t.name;
  DeviceInfo d;
  d.kind = p.kind;
  d.name = p.name;
  return same_model(c, d) && (t.sm_count == 0 || p.sm_count == 0 || t.sm_count == p.sm_count);
}

// This machine's CPU is of the kind a shipped CPU profile was measured on: the same CPU name,
// threads and arithmetic, and its probed matmul peak within 15% of the profile's (a name such as
// "AMD EPYC" covers parts of several generations, which their peaks tell apart).
bool same_cpu_kind(const TargetDevice& t, const DeviceProfile& p) {
  if (!t.local || t.kind != DeviceKind::Cpu || p.kind != DeviceKind::Cpu) return false;
  if (t.name != p.name || t.threads != p.threads || t.precision != p.peaks.precision) return false;
  return p.peaks.matmul_gflops > 0 && std::abs(t.gflops / p.peaks.matmul_gflops - 1) <= 0.15;
}

// What a prediction's expected error is and whose rows it comes from, as its assumption says.
std::string expected_error_text(const ProfiledStep& ps) {
  return ps.expected_error && ps.expected_error->at_least && ps.trials > 0
             ? fmt::format(
                   "; no validation row for fused trials: expected error at least that of a "
                   "model the profile did not measure, median {:.0f}%, worst {:.0f}% ({})",
                   100 * ps.expected_error->median, 100 * ps.expected_error->worst,
                   ps.expected_error->rows)
         : ps.expected_error && ps.expected_error->at_least && ps.kind_only
             ? fmt::format(
                   "; not validated on this machine: the held-out rows of its kind were measured "
                   "on the machine the profile came from, so its expected error is at least "
                   "theirs, median {:.0f}%, worst {:.0f}% ({})",
                   100 * ps.expected_error->median, 100 * ps.expected_error->worst,
                   ps.expected_error->rows)
         : ps.expected_error && ps.expected_error->at_least
             ? fmt::format(
                   "; not validated: no held-out validation row is of this kind of prediction "
                   "({}), so its expected error is at least that of the nearest kind ({}), "
                   "median {:.0f}%, worst {:.0f}% ({})",
                   prediction_kind_name(ps.kind), prediction_kind_name(ps.expected_error->kind),
                   100 * ps.expected_error->median, 100 * ps.expected_error->worst,
                   ps.expected_error->rows)
         : ps.expected_error
             ? fmt::format(
                   "; expected error: median {:.0f}%, worst {:.0f}% (the validation table's "
                   "held-out rows of this kind of prediction, {}: {}){}",
                   100 * ps.expected_error->median, 100 * ps.expected_error->worst,
                   prediction_kind_name(ps.expected_error->kind), ps.expected_error->rows,
                   ps.expected_error->spread > 0
                       ? fmt::format("; the measurements behind them moved by up to {:.0f}% "
                                     "between runs of the same model",
                                     100 * ps.expected_error->spread)
                       : "")
             : "; no validation row for this kind of prediction: its error is unknown";
}

std::string profile_assumption(const ProfiledStep& ps) {
  const DeviceProfile& f = *ps.from;
  std::string text =
      ps.kind_only ? fmt::format(
                         "each kernel from the shipped profile of this CPU's kind ({} of {}, {} "
                         "threads, measured {} on another machine of the kind), as it is",
                         f.id, f.name, f.threads, f.date.substr(0, 10))
      : ps.own ? fmt::format("each kernel from this device's own profile ({} of {}, measured {})",
                             f.id, f.name, f.date.substr(0, 10))
      : ps.graph
          ? fmt::format(
                "each kernel from the {} profile of {} (measured {}) as a node of the recorded "
                "step: its latency scaled by the two GPUs' clocks, but never faster than this "
                "GPU's roofline at the best efficiency that profile's kernels reached",
                f.id, f.name, f.date.substr(0, 10))
          : fmt::format(
                "each kernel from the {} profile of {} ({} threads, measured {}), "
                "scaled by the rate that bounds it (compute or bandwidth)",
                f.id, f.name, f.threads, f.date.substr(0, 10));
  if (ps.own) {
    text += ps.holdout == Holdout::None
                ? "; every kernel of this model at its shape is in the profile"
                : "; this model's shapes are not all in the profile: those kernels come from "
                  "neighbouring shapes, scaled by their rooflines";
  }
  if (ps.trials > 0) {
    text += fmt::format(
        "; {} trials fused in {} concurrent group(s): each Linear of a group one kernel over its "
        "trials (predicted as one Linear as many times taller), every other kernel, the loss, the "
        "optimizer and the batch gather once per trial",
        ps.trials, ps.groups);
  }
  text += expected_error_text(ps);
  if (ps.unprofiled > 0) {
    text += fmt::format(
        "; {} kernel(s) of a kind the profile never measured come from the roofline alone, with "
        "no validation behind them (expect this prediction to be optimistic)",
        ps.unprofiled);
  }
  return text;
}

}  // namespace

TargetDevice local_target(const DeviceInfo& d, const DevicePeaks& p, const AdviceOptions& o) {
  TargetDevice t = make_target(d.id, d.name, d.kind, d.threads, probed_rates(p),
                               policy_for(d.kind, d.threads, o),
                               fmt::format("probed {}", p.probed.substr(0, 10)));
  t.architecture = architecture_of(d.kind, d.name);
  if (d.kind == DeviceKind::Cpu && d.precision != "f32") t.precision = d.precision;
  t.local = true;
  return t;
}

TargetDevice catalog_target(const CatalogDevice& d, const std::vector<DevicePeaks>& peaks,
                            const AdviceOptions& o) {
  TargetDevice t = make_target(
      d.id, d.name, d.kind, d.threads, catalog_rates(d, peaks, o), policy_for(d.kind, d.threads, o),
      fmt::format("datasheet x {:.0f}% (compute) and {:.0f}% (bandwidth)",
                  100 * o.achievable_flops_fraction, 100 * o.achievable_bandwidth_fraction));
  t.sm_count = d.sm_count;
  t.clock_mhz = d.boost_clock_mhz;
  t.architecture = d.architecture;
  return t;
}

namespace {

// The profile a target's step is predicted from, and whether it is the target's own (this
// machine's, or of the part a shipped profile was measured on).
struct ChosenProfile {
  const DeviceProfile* from = nullptr;
  bool own = false;
  bool kind_only = false;  // own by kind: a shipped profile of this machine's CPU (same_cpu_kind)
};

ChosenProfile choose_profile(const TargetDevice& target, const AdviceOptions& o) {
  const DeviceProfile* from = nullptr;
  bool own = false;
  // A profile with kernels, timed in the target's arithmetic where it is a CPU.
  auto usable = [&](const DeviceProfile& p) {
    return p.has_kernels() && (p.kind != DeviceKind::Cpu || p.peaks.precision == target.precision);
  };
  for (const DeviceProfile& p : o.profiles) {
    if (usable(p) && is_local_profile(p, o) && p.device == target.id &&
        p.threads == target.threads) {
      from = &p;
      own = true;
      break;
    }
  }
  // A GPU one has not got, of the part a shipped profile was measured on: that profile as it is.
  for (const DeviceProfile& p : o.profiles) {
    if (!from && usable(p) && same_part(target, p)) {
      from = &p;
      own = true;
    }
  }
  // This machine's CPU without a profile of its own, of the kind a shipped one was measured on:
  // that profile as it is, its error not validated on this machine.
  bool kind_only = false;
  for (const DeviceProfile& p : o.profiles) {
    if (!from && usable(p) && same_cpu_kind(target, p)) {
      from = &p;
      own = kind_only = true;
    }
  }
  // Fused trials on a GPU whose profile found has no fused groups' Linears: a GPU profile that
  // timed them, scaled. A group's Linear there is one kernel over its trials, spread over the
  // multiprocessors: the taller Linear that stands in for it otherwise predicted 64 fused disc-4
  // trials on an H200 far too slow (docs/benchmarks.md, "Fused trials on an H200").
  if (o.trials > 0 && target.kind == DeviceKind::Gpu && (!from || !has_trials_samples(*from))) {
    for (const DeviceProfile& p : o.profiles) {
      if (p.has_kernels() && p.kind == target.kind && has_trials_samples(p)) {
        from = &p;
        own = false;
        break;
      }
    }
  }
  // Else the nearest profile of the target's kind: for a CPU the one whose thread count is
  // closest (a 2-thread profile says little of a 96-core chip's shards); else any with kernels.
  auto distance = [&](const DeviceProfile& p) {
    if (p.kind != DeviceKind::Cpu || target.threads <= 0) return 0.0;
    return std::abs(std::log(std::max(1, p.threads) / static_cast<double>(target.threads)));
  };
  for (const DeviceProfile& p : o.profiles) {
    if (!from && usable(p) && p.kind == target.kind) from = &p;
    if (from && !own && usable(p) && p.kind == target.kind && distance(p) < distance(*from))
      from = &p;
  }
  for (const DeviceProfile& p : o.profiles) {
    if (!from && usable(p)) from = &p;
  }
  return {from, own, kind_only};
}

}  // namespace

std::optional<ProfiledStep> profiled_step(const ModelSpec& spec, int64_t batch,
                                          const TargetDevice& target, const AdviceOptions& o) {
  const auto [from, own, kind_only] = choose_profile(target, o);
  if (!from) return std::nullopt;
  const ProfilePrediction pp =
      o.trials > 0 ? predict_fused_with_profile(spec, batch, o.trials, *from, target, own)
                   : predict_with_profile(spec, batch, *from, target, own);
  ProfiledStep out;
  out.from = from;
  out.own = own;
  out.kind_only = kind_only;
  out.step.seconds = pp.seconds;
  out.step.flops_seconds = pp.flops_s;
  out.step.bytes_seconds = pp.bytes_s;
  out.step.overhead_seconds = pp.fixed_s;
  out.step.bound = pp.bound;
  out.graph = pp.graph;
  out.unprofiled = pp.unprofiled;
  out.trials = o.trials;
  out.groups = pp.shards;
  // A fused group's kernels (its Linears from the profile's fused samples, or taller Linears)
  // are not the profile's own model; and no row of the validation table is of fused trials: its
  // error is at least a new model's.
  out.holdout =
      o.trials == 0 && profile_has_model(*from, spec, batch) ? Holdout::None : Holdout::Model;
  out.kind = prediction_kind(from->kind, architecture_of(from->kind, from->name), target.kind,
                             target.architecture, own);
  if (o.expected_errors) {
    out.expected_error = expected_error(shipped_validation(), *from, out.kind);
  }
  if (o.trials > 0 && out.expected_error) out.expected_error->at_least = true;
  // Its kind's own held-out rows were measured on the machine the profile came from: on this one
  // (another day, another host of the kind) the error is at least theirs.
  if (kind_only && out.expected_error) out.expected_error->at_least = true;
  // No held-out row predicts a CPU at bf16 from another CPU's profile (one bf16 profile ships, and
  // AMX is not AVX-512 BF16): the rows quoted are f32's, so the error is at least theirs.
  if (target.precision == "bf16" && !own && out.expected_error) {
    out.expected_error->at_least = true;
  }
  return out;
}

namespace {

// Each kind's efficiency measured on this machine, for the catalog's devices of that kind.
struct MeasuredEfficiency {
  std::optional<double> cpu, gpu;
};

void take_expected_error(DevicePrediction& d, const ProfiledStep& ps) {
  if (ps.expected_error) {
    d.expected_error = ps.expected_error->median;
    d.expected_worst = ps.expected_error->worst;
    d.expected_at_least = ps.expected_error->at_least;
    d.expected_kind = prediction_kind_name(ps.expected_error->kind);
  }
}

// A catalog device of the same model as one measured here shows the measurement beside it.
void take_measurement(DevicePrediction& d, const CatalogDevice& c,
                      const std::vector<const RunRecord*>& measured) {
  for (const RunRecord* row : measured) {
    if (same_model(c, row->result.device)) {
      d.measured_s = row->result.step_ms.median * 1e-3;
      d.measured_epoch_s = seconds_per_epoch(row->result);
    }
  }
}

// A device of this machine: the probe's roofline (or a profile's prediction) next to the
// measurement; `eff` gets the model's measured efficiency against the roofline.
DevicePrediction local_prediction(const RunRecord& focus, const RunRecord& row,
                                  const DevicePeaks& p, const std::optional<ModelSpec>& spec,
                                  const AdviceOptions& o, double* eff) {
  DevicePrediction d;
  d.model = focus.result.model;
  d.device = row.result.device.id;
  // The CPU at bf16 (cpu:bf16) beside it: predicted from a profile timed at bf16 (`crossover
  // validate --device cpu:bf16` makes this machine's), else the roofline of its bf16 probe.
  const bool cpu_bf16 =
      row.result.device.kind == DeviceKind::Cpu && row.result.device.precision != "f32";
  d.name = row.result.device.name +
           (cpu_bf16 ? fmt::format(" (this machine, {})", row.result.device.precision)
                     : std::string(" (this machine)"));
  d.kind = row.result.device.kind;
  d.local = true;
  d.step = predict_step(row.work, probed_rates(p), 1.0);
  d.measured_s = row.result.step_ms.median * 1e-3;
  d.measured_epoch_s = seconds_per_epoch(row.result);
  *eff = calibrate_efficiency(row.work, probed_rates(p), *d.measured_s);
  if (spec) {
    if (const auto ps =
            profiled_step(*spec, row.result.batch, local_target(row.result.device, p, o), o)) {
      d.step = ps->step;
      d.profile = ps->from->id;
      take_expected_error(d, *ps);
      d.assumptions = {profile_assumption(*ps),
                       fmt::format("the measurement is this model's, on this device ({} per "
                                   "step): the prediction is shown against it",
                                   duration(*d.measured_s))};
      return d;
    }
  }
  d.assumptions = {
      fmt::format("roofline at this device's probed peaks: {:.1f} GFLOP/s {} matmul, {:.1f} GB/s",
                  p.matmul_gflops, p.precision.empty() ? "f32" : p.precision, p.bandwidth_gbs),
      fmt::format("fixed costs from the probe: {:.1f} µs per step, {:.2f} µs per layer",
                  p.step_overhead_us, p.layer_overhead_us),
      "efficiency 1 (uncalibrated: how a device you do not have is predicted before any "
      "measurement of this model)",
      fmt::format("measured efficiency of this model here: {:.2f} of the roofline", *eff)};
  return d;
}

// A CPU's bf16 unit as its assumptions name it ("amx" as AMX), from the catalog's or a profile's
// word for it.
std::string_view bf16_unit_name(const std::string& unit) {
  return unit == "amx" ? "AMX" : unit == "avx512_bf16" ? "AVX-512 BF16" : "an unrecorded unit";
}

// A catalog device predicted from a profile, with its assumptions.
void use_profiled_step(DevicePrediction& d, const ProfiledStep& ps, const CatalogDevice& c,
                       const DeviceRates& rates, const MeasuredEfficiency& eff,
                       const AdviceOptions& o) {
  d.step = ps.step;
  d.profile = ps.from->id;
  take_expected_error(d, ps);
  d.assumptions.push_back(profile_assumption(ps));
  if (d.precision == "bf16") {
    d.assumptions.push_back(fmt::format(
        "bf16 products on its {} (f32 weights, gradients and optimizer, as PyTorch's CPU "
        "autocast), {} per step at f32; the device's rates: {:.0f}% of the datasheet's {:.1f} "
        "TFLOP/s bf16 and {:.0f}% of its {:.0f} GB/s",
        bf16_unit_name(c.bf16_unit), duration(d.f32_step_s.value_or(0)),
        100 * o.achievable_flops_fraction, c.bf16_tflops, 100 * o.achievable_bandwidth_fraction,
        c.memory_bandwidth_gbs));
  } else {
    d.assumptions.push_back(fmt::format(
        "f32 (no TF32, no BF16); the device's rates: {:.0f}% of the datasheet's {:.1f} TFLOP/s "
        "and {:.0f}% of its {:.0f} GB/s",
        100 * o.achievable_flops_fraction, c.f32_tflops, 100 * o.achievable_bandwidth_fraction,
        c.memory_bandwidth_gbs));
  }
  if (c.kind == DeviceKind::Gpu && ps.from->kind != DeviceKind::Gpu) {
    d.assumptions.push_back(fmt::format(
        "no GPU profile: a GPU's step predicted from a CPU's kernels, with fixed costs of "
        "{:.1f} µs per step and {:.2f} µs per layer ({})",
        rates.step_overhead_us, rates.layer_overhead_us,
        eff.gpu ? "as probed on this machine's GPU"
                : "assumed for CUDA Graph replay: no GPU measured here"));
  }
}

// A catalog CPU with a bf16 unit, as a target at bf16: its datasheet bf16 rate, and only a profile
// timed at bf16 predicts it.
TargetDevice at_bf16(TargetDevice t, const CatalogDevice& c, const AdviceOptions& o) {
  t.gflops = c.bf16_tflops * 1e3 * o.achievable_flops_fraction;
  t.precision = "bf16";
  t.rates = fmt::format("datasheet bf16 x {:.0f}% (compute) and {:.0f}% (bandwidth)",
                        100 * o.achievable_flops_fraction, 100 * o.achievable_bandwidth_fraction);
  return t;
}

// A catalog CPU at bf16: its f32 step `ps` times the bf16 / f32 ratio of a CPU profiled at both
// (one machine, one thread count), each profile carried to this CPU at its datasheet rate of that
// precision. The ratio isolates what the precision buys from how far the profiled machine is from
// the part (a 2-thread bf16 profile carried straight to a 96-core chip says more of the thread
// count than of bf16). A machine whose products ran on this CPU's unit (AMX, AVX-512 BF16) is
// preferred; another unit's ratio is used only where none did, and said so. Taken where it is
// below 1; the f32 step stays beside it; no held-out row checks it, so its error is at least the
// f32 prediction's.
void weigh_at_bf16(DevicePrediction& d, ProfiledStep& ps, const ModelSpec& spec, int64_t batch,
                   const CatalogDevice& c, const TargetDevice& f32_target, const AdviceOptions& o) {
  std::vector<std::pair<const DeviceProfile*, const DeviceProfile*>> pairs;  // bf16, f32
  for (const DeviceProfile& b : o.profiles) {
    if (b.kind != DeviceKind::Cpu || b.peaks.precision != "bf16" || !b.has_kernels()) continue;
    for (const DeviceProfile& f : o.profiles) {
      if (f.kind == DeviceKind::Cpu && f.peaks.precision.empty() && f.has_kernels() &&
          f.name == b.name && f.threads == b.threads) {
        pairs.emplace_back(&b, &f);
        break;
      }
    }
  }
  if (pairs.empty()) return;
  const auto own = std::find_if(pairs.begin(), pairs.end(),
                                [&](const auto& bf) { return bf.first->bf16_unit == c.bf16_unit; });
  const auto [bp, fp] = own != pairs.end() ? *own : pairs.front();
  const DeviceProfile& b = *bp;
  const DeviceProfile& f = *fp;
  const double at_bf16_s =
      predict_with_profile(spec, batch, b, at_bf16(f32_target, c, o), false).seconds;
  const double at_f32_s = predict_with_profile(spec, batch, f, f32_target, false).seconds;
  if (at_f32_s <= 0 || at_bf16_s >= at_f32_s) return;
  const double ratio = at_bf16_s / at_f32_s;
  d.precision = "bf16";
  d.f32_step_s = ps.step.seconds;
  d.name += " at bf16";
  ps.step.seconds *= ratio;
  ps.step.flops_seconds *= ratio;
  ps.step.bytes_seconds *= ratio;
  ps.step.overhead_seconds *= ratio;
  if (ps.expected_error) ps.expected_error->at_least = true;
  d.assumptions.push_back(fmt::format(
      "bf16: the f32 step x {:.2f}, the bf16 / f32 ratio of {}'s and {}'s profiles (one machine "
      "at {} threads, its products on {}{}, each carried to this CPU at its {} rate)",
      ratio, b.id, f.id, b.threads, bf16_unit_name(b.bf16_unit),
      b.bf16_unit == c.bf16_unit ? "" : ": no machine with this CPU's unit was profiled",
      bf16_unit_name(c.bf16_unit)));
}

// The step of each slice of the batch a multi-device instance of the device would run.
void predict_slices(DevicePrediction& d, const CatalogDevice& c, const RunRecord& focus,
                    const ModelSpec& spec, const std::vector<DevicePeaks>& peaks,
                    const Catalog& catalog, const AdviceOptions& o) {
  // At bf16 each slice's f32 step takes the whole batch's bf16 / f32 ratio (weigh_at_bf16).
  const double scale = d.f32_step_s ? d.step.seconds / *d.f32_step_s : 1.0;
  for (const int n : scale_out_counts(catalog, c.id)) {
    const int64_t rows = (focus.result.batch + n - 1) / n;
    if (const auto slice = profiled_step(spec, rows, catalog_target(c, peaks, o), o)) {
      d.slice_seconds[n] = slice->step.seconds * scale;
    }
  }
}

// A catalog device at the roofline of its datasheet, scaled by the efficiency measured here.
void roofline_assumptions(DevicePrediction& d, const CatalogDevice& c, const DeviceRates& rates,
                          std::optional<double> eff, bool gpu_measured, const AdviceOptions& o) {
  d.assumptions.push_back(fmt::format(
      "f32 (no TF32, no BF16); kernels reach {:.0f}% of the datasheet's {:.1f} TFLOP/s and "
      "{:.0f}% of its {:.0f} GB/s",
      100 * o.achievable_flops_fraction, c.f32_tflops, 100 * o.achievable_bandwidth_fraction,
      c.memory_bandwidth_gbs));
  if (eff) {
    d.assumptions.push_back(fmt::format(
        "this model's efficiency as measured on this machine's {}: {:.2f} of the roofline",
        c.kind == DeviceKind::Gpu ? "GPU" : "CPU", *eff));
  } else {
    d.assumptions.push_back(fmt::format(
        "no {} measured here: efficiency 1 (the roofline itself, a lower bound on the time)",
        c.kind == DeviceKind::Gpu ? "GPU" : "CPU"));
    d.lower_bound = true;
  }
  d.assumptions.push_back(fmt::format("fixed costs {:.1f} µs per step and {:.2f} µs per layer ({})",
                                      rates.step_overhead_us, rates.layer_overhead_us,
                                      c.kind == DeviceKind::Gpu && !gpu_measured
                                          ? "assumed for CUDA Graph replay: no GPU measured here"
                                          : "as probed on this machine's device of that kind"));
  if (c.kind == DeviceKind::Cpu) {
    d.assumptions.push_back("every core busy at the datasheet rate (small layers scale worse)");
  }
}

DevicePrediction catalog_prediction(const RunRecord& focus, const CatalogDevice& c,
                                    const std::optional<ModelSpec>& spec,
                                    const MeasuredEfficiency& measured_eff,
                                    const std::vector<const RunRecord*>& measured,
                                    const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                                    const AdviceOptions& o) {
  DevicePrediction d;
  d.model = focus.result.model;
  d.device = c.id;
  d.name = c.name;
  d.kind = c.kind;
  const DeviceRates rates = catalog_rates(c, peaks, o);
  const std::optional<double> eff = c.kind == DeviceKind::Gpu ? measured_eff.gpu : measured_eff.cpu;
  d.step = predict_step(focus.work, rates, eff.value_or(1.0));
  const TargetDevice target = catalog_target(c, peaks, o);
  std::optional<ProfiledStep> ps =
      spec ? profiled_step(*spec, focus.result.batch, target, o) : std::nullopt;
  // A CPU with a bf16 unit is weighed at bf16 where that is faster (and bf16 changes one of the
  // model's products), as a user on it would train.
  if (ps && o.trials == 0 && runs_bf16(c) && bf16_changes_products(*spec)) {
    weigh_at_bf16(d, *ps, *spec, focus.result.batch, c, target, o);
  }
  if (ps) {
    use_profiled_step(d, *ps, c, rates, measured_eff, o);
    take_measurement(d, c, measured);
    // Fused trials on an instance of several devices would split the trials among them, not
    // the batch: not predicted (the instance is priced as one of its devices running them all).
    if (o.trials == 0) predict_slices(d, c, focus, *spec, peaks, catalog, o);
    return d;
  }
  roofline_assumptions(d, c, rates, eff, measured_eff.gpu.has_value(), o);
  take_measurement(d, c, measured);
  return d;
}

}  // namespace

std::vector<DevicePrediction> predict_devices(const RunRecord& focus,
                                              const std::vector<RunRecord>& local_runs,
                                              const std::vector<DevicePeaks>& peaks,
                                              const Catalog& catalog, const AdviceOptions& o) {
  std::vector<DevicePrediction> out;
  // The spec that ran, for predictions from profiles (none without: the roofline of the peaks).
  const std::optional<ModelSpec> spec =
      o.profiles.empty()
          ? std::nullopt
          : std::optional(parse_spec(focus.spec_toml, focus.result.model + " (spec_toml)"));
  // This machine's devices first: their efficiencies calibrate the catalog's devices.
  MeasuredEfficiency eff;
  std::vector<const RunRecord*> measured;
  for (const RunRecord& row : local_runs) {
    if (row.result.model != focus.result.model) continue;
    const DevicePeaks* p = find_peaks(peaks, row.result.device.id);
    if (!p) continue;
    measured.push_back(&row);
    double row_eff = 0;
    out.push_back(local_prediction(focus, row, *p, spec, o, &row_eff));
    // Catalog CPUs are predicted at f32: the CPU's f32 row calibrates them, not cpu:bf16's.
    if (row.result.device.kind == DeviceKind::Gpu) {
      eff.gpu = row_eff;
    } else if (row.result.device.precision == "f32") {
      eff.cpu = row_eff;
    }
  }
  for (const CatalogDevice& c : catalog.devices) {
    out.push_back(catalog_prediction(focus, c, spec, eff, measured, peaks, catalog, o));
  }
  return out;
}

std::optional<SweepSeries> predicted_gpu_series(const std::vector<RunRecord>& runs,
                                                const std::vector<DevicePeaks>& peaks,
                                                const AdviceOptions& o, const CatalogDevice* gpu) {
  for (const RunRecord& run : runs) {
    if (run.result.device.kind == DeviceKind::Gpu) return std::nullopt;  // a GPU was measured
  }
  if (!gpu || runs.empty()) return std::nullopt;
  const bool profiled = !o.profiles.empty();
  SweepSeries s{gpu->id + (profiled ? " (predicted)" : " (predicted, lower bound)"), {}};
  const DeviceRates rates = catalog_rates(*gpu, peaks, o);
  const TargetDevice target = catalog_target(*gpu, peaks, o);
  const std::string first_device = runs.front().result.device.id;
  for (const RunRecord& run : runs) {
    if (run.result.device.id != first_device) continue;
    std::optional<ProfiledStep> ps;
    if (profiled) {
      // Along "trials", each point is that many trials fused (else o.trials at every point).
      AdviceOptions at = o;
      if (run.axis == "trials") at.trials = static_cast<int>(run.axis_value);
      ps = profiled_step(parse_spec(run.spec_toml, run.result.model + " (spec_toml)"),
                         run.result.batch, target, at);
    }
    const double step = ps ? ps->step.seconds : predict_step(run.work, rates, 1.0).seconds;
    s.points.push_back({run.axis_value, static_cast<double>(run.result.params),
                        step * static_cast<double>(run.result.steps_per_epoch) * 100});
  }
  return s;
}

}  // namespace xo

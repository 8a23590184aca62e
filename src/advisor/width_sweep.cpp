#include "advisor/width_sweep.h"

#include <fmt/format.h>

#include <memory>

#include "advisor/crossover_point.h"
#include "advisor/predict.h"
#include "core/error.h"
#include "model/model.h"
#include "model/vary.h"
#include "model/work.h"

namespace xo {
namespace {

struct WidthSeries {
  SweepSeries there;  // the GPU's (this machine's devices' are their LocalCurves')
};

// A device of this machine along the widths: its profile's prediction, or its probe's roofline
// calibrated by the efficiency its run reached.
struct LocalCurve {
  TargetDevice target;
  DeviceRates rates;
  double eff = 1;
  SweepSeries series;
};
LocalCurve local_curve(const RunRecord& run, const DevicePeaks& peaks,
                       const std::vector<DevicePeaks>& all, const AdviceOptions& o) {
  const bool profiled = !o.profiles.empty();
  return {local_target(run.result.device, peaks, o),
          probed_rates(peaks),
          local_efficiency(run, all),
          {run.result.device.id + (profiled ? " (predicted)" : " (calibrated)"), {}}};
}

// Each width's predicted time per 100 epochs (the spec's steps per epoch at its batch), on each
// of `here` (this machine's devices) and on `gpu`; none where the spec has no hidden width to
// vary.
std::optional<WidthSeries> width_series(const ModelSpec& spec, const RunRecord& measured,
                                        std::vector<LocalCurve>& here, const CatalogDevice& gpu,
                                        const std::vector<DevicePeaks>& peaks,
                                        const AdviceOptions& o) {
  const DeviceRates gpu_rates = catalog_rates(gpu, peaks, o);
  const TargetDevice gpu_target = catalog_target(gpu, peaks, o);
  const bool profiled = !o.profiles.empty();
  auto cpu_backend = make_backend(parse_device("cpu", 1));
  WidthSeries w{{gpu.id + (profiled ? " (predicted)" : " (predicted, lower bound)"), {}}};
  const int64_t batch = measured.result.batch;
  const double per_100 = static_cast<double>(measured.result.steps_per_epoch) * 100;
  for (int64_t width = 16; width <= 4096; width *= 2) {
    ModelSpec s;
    try {
      s = vary_spec(spec, Axis::Width, width);
    } catch (const UserError&) {
      return std::nullopt;  // no hidden width to vary
    }
    if (parameter_count(s) > 100'000'000) break;
    const Model m(s, *cpu_backend);
    const StepWork work = step_work(m, batch);
    const double params = static_cast<double>(m.parameter_count());
    const auto gpu_step = profiled ? profiled_step(s, batch, gpu_target, o) : std::nullopt;
    const double x = static_cast<double>(width);
    for (LocalCurve& c : here) {
      const auto step = profiled ? profiled_step(s, batch, c.target, o) : std::nullopt;
      c.series.points.push_back(
          {x, params,
           (step ? step->step.seconds : predict_step(work, c.rates, c.eff).seconds) * per_100});
    }
    w.there.points.push_back(
        {x, params,
         (gpu_step ? gpu_step->step.seconds : predict_step(work, gpu_rates, 1.0).seconds) *
             per_100});
  }
  return w;
}

}  // namespace

std::optional<SweepRecord> predicted_width_sweep(const ModelSpec& spec, const RunRecord& measured,
                                                 const std::vector<DevicePeaks>& peaks,
                                                 const Catalog& catalog, const AdviceOptions& o_in,
                                                 const CatalogDevice* gpu, const RunRecord* bf16) {
  const AdviceOptions o = with_profiles(o_in);
  const DevicePeaks* local = find_peaks(peaks, measured.result.device.id);
  if (!local || !gpu || measured.result.device.kind == DeviceKind::Gpu) return std::nullopt;
  std::vector<LocalCurve> here = {local_curve(measured, *local, peaks, o)};
  const DevicePeaks* bf16_peaks = bf16 ? find_peaks(peaks, bf16->result.device.id) : nullptr;
  if (bf16_peaks) here.push_back(local_curve(*bf16, *bf16_peaks, peaks, o));
  const std::optional<WidthSeries> w = width_series(spec, measured, here, *gpu, peaks, o);
  if (!w) return std::nullopt;
  std::vector<SweepSeries> series;
  std::vector<std::string> order;
  for (const LocalCurve& c : here) {
    series.push_back(c.series);
    order.push_back(c.series.device);
  }
  series.push_back(w->there);
  order.push_back(w->there.device);
  SweepRecord record = sweep_record("width", series, find_crossovers(series), order);
  const std::string& device = measured.result.device.id;
  record.series[0].note =
      o.profiles.empty() ? fmt::format(
                               "this machine's {} at the probe's roofline, calibrated by the "
                               "efficiency {} reached here",
                               device, spec.name)
                         : fmt::format(
                               "this machine's {} predicted from a device profile at each width "
                               "(the measured point is {}'s own width)",
                               device, spec.name);
  if (here.size() > 1) {
    record.series[1].note =
        fmt::format("this machine's CPU at bf16 ({}), predicted as {} is at each width",
                    bf16->result.device.id, device);
  }
  record.series.back().note = chart_gpu_note(catalog, o, *gpu);
  return record;
}

}  // namespace xo

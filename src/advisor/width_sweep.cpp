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
  SweepSeries here, there;
};

// Each width's predicted time per 100 epochs (the spec's steps per epoch at its batch), here and
// on `gpu`; none where the spec has no hidden width to vary.
std::optional<WidthSeries> width_series(const ModelSpec& spec, const RunRecord& measured,
                                        const DevicePeaks& local, const CatalogDevice& gpu,
                                        const std::vector<DevicePeaks>& peaks,
                                        const AdviceOptions& o) {
  const double eff = local_efficiency(measured, peaks);
  const DeviceRates local_rates = probed_rates(local);
  const DeviceRates gpu_rates = catalog_rates(gpu, peaks, o);
  const TargetDevice gpu_target = catalog_target(gpu, peaks, o);
  const TargetDevice here_target = local_target(measured.result.device, local, o);
  const bool profiled = !o.profiles.empty();
  auto cpu_backend = make_backend(parse_device("cpu", 1));
  WidthSeries w{{measured.result.device.id + (profiled ? " (predicted)" : " (calibrated)"), {}},
                {gpu.id + (profiled ? " (predicted)" : " (predicted, lower bound)"), {}}};
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
    const auto here_step = profiled ? profiled_step(s, batch, here_target, o) : std::nullopt;
    const auto gpu_step = profiled ? profiled_step(s, batch, gpu_target, o) : std::nullopt;
    const double x = static_cast<double>(width);
    w.here.points.push_back(
        {x, params,
         (here_step ? here_step->step.seconds : predict_step(work, local_rates, eff).seconds) *
             per_100});
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
                                                 const CatalogDevice* gpu) {
  const AdviceOptions o = with_profiles(o_in);
  const DevicePeaks* local = find_peaks(peaks, measured.result.device.id);
  if (!local || !gpu || measured.result.device.kind == DeviceKind::Gpu) return std::nullopt;
  const std::optional<WidthSeries> w = width_series(spec, measured, *local, *gpu, peaks, o);
  if (!w) return std::nullopt;
  const std::vector<SweepSeries> series = {w->here, w->there};
  SweepRecord record =
      sweep_record("width", series, find_crossovers(series), {w->here.device, w->there.device});
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
  record.series[1].note = chart_gpu_note(catalog, o, *gpu);
  return record;
}

}  // namespace xo

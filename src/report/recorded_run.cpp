#include "report/recorded_run.h"

#include <fmt/format.h>

#include <cmath>

#include "backend/backend.h"
#include "core/error.h"
#include "model/work.h"
#include "model/model.h"

namespace xo {
namespace {

// The figures a cost is computed from, in a results file that may have been edited: a step time or
// a peak of zero or below divided into "inf ms +inf%". Each must be a positive, finite number (a
// null peak, a device that was not probed, stays unknown).
void check_recosted_figures(const Report& report, const RunRecord& run, const std::string& file) {
  const TrainResult& r = run.result;
  const std::string where = fmt::format("run '{}' on {}", r.model, r.device.id);
  const auto positive = [&](const std::string& place, const char* field, double v, bool null_ok) {
    if ((null_ok && std::isnan(v)) || (v > 0 && std::isfinite(v))) return;
    throw UserError(
        fmt::format("{}: {}: {}: {} (expected a positive number)", file, place, field, v));
  };
  positive(where, "step_ms.median", r.step_ms.median, false);
  if (r.batch <= 0 || r.steps_per_epoch <= 0) {
    throw UserError(
        fmt::format("{}: {}: batch {} and steps_per_epoch {} (expected positive "
                    "integers)",
                    file, where, r.batch, r.steps_per_epoch));
  }
  for (size_t i = 0; i < report.peaks.size(); ++i) {
    const DevicePeaks& p = report.peaks[i];
    const std::string place = fmt::format("peaks[{}] ({})", i, p.device);
    positive(place, "matmul_gflops", p.matmul_gflops, true);
    positive(place, "bandwidth_gbs", p.bandwidth_gbs, true);
    if (p.step_overhead_us < 0 || p.layer_overhead_us < 0) {
      throw UserError(
          fmt::format("{}: {}: step_overhead_us {} and layer_overhead_us {} (expected "
                      "0 or more)",
                      file, place, p.step_overhead_us, p.layer_overhead_us));
    }
  }
}

}  // namespace

RunRecord recorded_run(const Report& report, const std::string& file, const std::string& model) {
  const ReportRun* found = nullptr;
  for (const ReportRun& r : report.runs) {
    if (model.empty() || r.run.result.model == model) found = &r;
  }
  if (!found) {
    throw UserError(fmt::format("{}: no run{} in it", file,
                                model.empty() ? "" : fmt::format(" of model '{}'", model)));
  }
  RunRecord run = found->run;
  check_recosted_figures(report, run, file);
  const ModelSpec spec = parse_spec(run.spec_toml, file + " (spec_toml)");
  auto cpu = make_backend(parse_device("cpu", 1));
  const Model m(spec, *cpu);
  run.work = step_work(m, run.result.batch);
  return run;
}

}  // namespace xo

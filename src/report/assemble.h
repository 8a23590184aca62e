// A report document's answers, filled from its runs: the predictions on the catalog's devices,
// the cost table, the verdict and the advice, for the run the report is about.
#pragma once

#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "measure/peaks.h"
#include "measure/run_record.h"
#include "model/spec.h"
#include "report/document.h"

namespace xo {

// Adds predictions, cost, the verdict and advice for `focus` to `report` (for o.trials fused
// trials where it is set, and the verdict says so); the crossover is the report's sweep's (along
// `axis`, predicted or measured), if it has one. Predictions start from the device profiles
// (with_profiles) where `o` has none.
void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::string& axis, bool crossover_predicted);

// The sweep section of `rows` along `axis` (the disc models for `run`) and the advice for the
// sweep's largest model that learned, on its first device: the measured series, the GPU the
// verdict weighs (chart_gpu) predicted at every point, where the curves cross. Nothing without
// rows.
void add_sweep_and_advice(Report& report, const std::vector<DevicePeaks>& peaks,
                          const std::vector<RunRecord>& rows, const std::string& axis,
                          const Catalog& catalog, const AdviceOptions& o);

// `advise`'s answer for one measured spec: the advice for `focus`, and the chart of the spec's
// hidden width scaled on this machine's device and on the GPU the verdict weighs
// (predicted_width_sweep).
void add_width_sweep_and_advice(Report& report, const ModelSpec& spec, const RunRecord& focus,
                                const std::vector<RunRecord>& runs,
                                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                                const AdviceOptions& o);

// The advice for a sweep of `trials` trials of one model (`advise --trials K`), from `runs`: the
// model alone on each device (axis ""), and fused groups of 1, 4, … and `trials` trials (axis
// "trials", Session::measure_trials). The sweep section: each device's groups along "trials",
// the GPU the verdict weighs predicted at each count; the predictions, cost, verdict and advice
// for the group of `trials`, the verdict also saying what it is for one trial alone.
void add_trials_advice(Report& report, const std::vector<RunRecord>& runs, int trials,
                       const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                       const AdviceOptions& o);

}  // namespace xo

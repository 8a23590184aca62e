// A report document's answers, filled from its runs: the predictions on the catalog's devices,
// the cost table, the verdict and the advice, for the run the report is about.
#pragma once

#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "measure/peaks.h"
#include "measure/run_record.h"
#include "report/document.h"

namespace xo {

// Adds predictions, cost, the verdict and advice for `focus` to `report`; the crossover is the
// report's sweep's (along `axis`, predicted or measured), if it has one. Predictions start from
// the device profiles (with_profiles) where `o` has none.
void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::string& axis, bool crossover_predicted);

// The sweep section of `rows` along `axis` (the disc models for `run`): the measured series, the
// catalog's reference GPU predicted at every point, where the curves cross; then the advice for the
// sweep's largest model on its first device. Nothing without rows.
void add_sweep_and_advice(Report& report, const std::vector<DevicePeaks>& peaks,
                          const std::vector<RunRecord>& rows, const std::string& axis,
                          const Catalog& catalog, const AdviceOptions& o);

}  // namespace xo

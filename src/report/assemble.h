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

}  // namespace xo

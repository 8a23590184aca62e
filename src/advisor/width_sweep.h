// `advise`'s chart: the measured spec's hidden width scaled from 16 to 4096, predicted on this
// machine's device and on a catalog GPU (the verdict's: chart_gpu), and where the two curves cross.
#pragma once

#include <optional>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "advisor/sweep.h"
#include "measure/peaks.h"
#include "measure/run_record.h"
#include "model/spec.h"

namespace xo {

// The predicted sweep along width, each series with a note on how it was predicted: from the
// device profiles where `o` has some (with_profiles), else this device's roofline calibrated by
// the efficiency `measured` reached and the GPU's roofline as a lower bound. None where the spec
// has no hidden width, the measured device is a GPU, or `gpu` is null. `bf16` (the same spec
// measured on cpu:bf16, where it was) adds this CPU at bf16, so that the crossover is found at
// bf16 too.
std::optional<SweepRecord> predicted_width_sweep(const ModelSpec& spec, const RunRecord& measured,
                                                 const std::vector<DevicePeaks>& peaks,
                                                 const Catalog& catalog, const AdviceOptions& o,
                                                 const CatalogDevice* gpu,
                                                 const RunRecord* bf16 = nullptr);

}  // namespace xo

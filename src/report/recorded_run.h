// A run read back from a results.json to be costed again (`crossover cost RESULTS.json`): the
// file may have been edited, so every figure a cost divides by is checked first.
#pragma once

#include <string>

#include "measure/run_record.h"
#include "report/document.h"

namespace xo {

// The run of `model` (the last run when empty) in `report`, read strictly from `file`, with its
// step's work computed again from the spec it recorded. A step time, batch or peak that is not a
// positive finite number is refused, naming the file, the run or peak, and the field.
RunRecord recorded_run(const Report& report, const std::string& file, const std::string& model);

}  // namespace xo

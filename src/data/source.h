// Resolves a spec's [data] section (or a --data override) to a data set in memory.
#pragma once

#include <string>

#include "data/dataset.h"
#include "model/spec.h"

namespace xo {

// `csv_override` (a path; empty for none) replaces the spec's source. Generated data uses the
// spec's train.seed, so a spec and a seed name one data set.
Dataset load_data(const ModelSpec& spec, int64_t classes, const std::string& csv_override = "");

}  // namespace xo

// Resolves a spec's [data] section (or a --data override) to a training and a test set in memory.
#pragma once

#include <string>

#include "data/dataset.h"
#include "model/spec.h"

namespace xo {

// `csv_override` (a path; empty for none) replaces the spec's source. Generated data uses the
// spec's train.seed, so a spec and a seed name one data set. Sources: disc, csv:PATH (no test
// set), fashion-mnist, idx:DIR, imdb:DIR, imdb-synthetic. Sequence sources take their length from
// the model's input and their vocabulary from its embedding (`vocab`).
DataSplit load_data(const ModelSpec& spec, int64_t classes, const std::string& csv_override = "");

}  // namespace xo

// A trained model's predictions for rows (Keras's model.predict): what `crossover predict` writes
// as CSV and the Python module returns as arrays. Forward only, in batches, no dropout.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "model/model.h"

namespace xo {

struct Predictions {
  int64_t rows = 0;
  // Per row: a classifier's probability of each class (the softmax of its outputs; a binary
  // one's, the sigmoid of its one output: the probability of class 1), or a regression's value.
  int64_t columns = 0;
  std::vector<double> values;   // [rows, columns]
  std::vector<int32_t> labels;  // [rows]: a classifier's predicted class (empty for a regression)
};

// The predictions for every row of `rows` (its labels are not read), or nullopt when a stop
// request (Ctrl-C) came between batches.
std::optional<Predictions> predict_rows(const Model& model, const Dataset& rows);

}  // namespace xo

// The rows a trained model predicts (`crossover predict`): their features only. A CSV's rows may
// end in a label or not; any other source gives its training rows.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "data/source.h"

namespace xo {

// A CSV's rows of exactly `features` numeric columns, or of `features` then a label (any text,
// left out), an optional header line first. y is zero. Throws UserError naming the file and line
// as parse_csv does, and for a row of another column count.
Dataset parse_csv_rows(const std::string& text, const std::string& name, int64_t features);

// The rows of `data`'s source for `model`: a CSV's (parse_csv_rows, labelled or not), else the
// source's training rows (no test split, no validation held out).
Dataset load_rows(const DataSpec& data, const DataRequest& model);

}  // namespace xo

// The caller's arrays as a data set, used where they are (the Python module's NumPy arrays): no
// copy is made, so a gigabyte of samples costs no second gigabyte. The checks a CSV file's rows
// pass (data/csv.cpp) are made here on the arrays, each error naming the array and the sample.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "data/dataset.h"

namespace xo {

struct SampleArrays {
  const float* x = nullptr;  // [samples, features], row-major float32
  int64_t samples = 0;
  int64_t features = 0;
  // [samples]: int32 class labels, or for a regression model (classes 0) float32 targets; null:
  // none (rows to predict).
  const void* y = nullptr;
  std::shared_ptr<const void> owner;  // keeps x and y alive while the data set is used
  std::string x_name = "x",
              y_name = "y";  // as the caller named them: "fit(x)", "validation_data[1]"
};

// How such a data set describes itself ("arrays in memory: 1000 samples"): results.json records
// it, and `crossover replay` refuses a run that trained on one (its data is not in the file).
inline constexpr std::string_view kArraysData = "arrays in memory";

// A borrowed data set of `arrays` for a model of `classes` classes (0: a regression). Throws
// UserError, naming the array and the sample, for no samples, a feature that is not a finite
// float32, a label outside [0, classes), a target that is not finite.
Dataset borrow_arrays(const SampleArrays& arrays, int64_t classes);

}  // namespace xo

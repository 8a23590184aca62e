// In-memory classification data sets: row-major float features (token ids, for sequence models,
// stored as exact floats) and integer class labels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace xo {

struct Dataset {
  int64_t samples = 0;
  int64_t features = 0;
  int64_t classes = 0;  // labels are in [0, classes); 0: regression targets (below)
  // [samples]: class labels, or (classes = 0, for mse) real targets as the bits of floats
  // (std::bit_cast<float>), so that batches gather them like labels.
  std::vector<float> x;     // [samples, features], row-major
  std::vector<int32_t> y;   // [samples]
  std::string description;  // e.g. "disc: 1000 points, seed 0" or "csv: data/train.csv"
  // Or samples used where they are without a copy (the Python module's arrays, data/arrays.h; a
  // safetensors file's mapped bytes, load_safetensors_data): then x and y stay empty and `owner`
  // keeps these alive.
  const float* borrowed_x = nullptr;
  const int32_t* borrowed_y = nullptr;
  std::shared_ptr<const void> owner;

  bool borrowed() const { return borrowed_x != nullptr; }
  // The samples, wherever they are: [samples, features] and [samples].
  std::span<const float> inputs() const {
    return borrowed() ? std::span(borrowed_x, static_cast<size_t>(samples * features))
                      : std::span<const float>(x);
  }
  std::span<const int32_t> labels() const {
    if (borrowed())
      return borrowed_y ? std::span(borrowed_y, static_cast<size_t>(samples))
                        : std::span<const int32_t>();
    return std::span<const int32_t>(y);
  }
};

// Samples [begin, end) of `data`: a view of them where `data` is borrowed, else a copy.
Dataset sample_rows(const Dataset& data, int64_t begin, int64_t end);

// A training set, its test set, and its validation set held out of the training samples
// (samples = 0 where there is none).
struct DataSplit {
  Dataset train;
  Dataset test;
  Dataset validation;
};

// The "disc" data set of the classic CPU-vs-GPU experiment: points uniform in [0,1]^2, label 1 when
// x^2 + y^2 < 1/(2*pi), else 0: a quarter disc of area 1/8, so about 12.5% of labels are 1.
// Features are standardized by the global mean and (population) standard deviation of all
// coordinates. Deterministic for a given seed on every machine.
Dataset make_disc(int64_t samples, uint64_t seed);

// Loads a CSV of numeric feature columns with an integer class label in the last column. A first
// line that is not numeric is taken as a header. Blank lines are skipped. `classes` is the number
// of classes the model predicts: labels must be integers in [0, classes); 0 reads the last column
// as a regression target instead (any finite float32, kept as its bits). Throws UserError naming
// the file and line for: an unreadable file, no data rows, ragged rows (column count differs from
// the first data row), a field that is not a number, a label that is not an integer or out of
// range, fewer than 2 columns. `expected_features` (if > 0) must match the feature column count.
Dataset load_csv(const std::filesystem::path& path, int64_t classes, int64_t expected_features);
// Loads a safetensors file holding tensor "x", the samples ([samples, ...]: the numbers after the
// first dimension are one sample's features, converted to float32 as io/safetensors.h reads them),
// and tensor "y", one class label (an integer in [0, classes)) or, with `classes` 0, one real
// target per sample ([samples]). The samples are read in place from the file mapped (core/file.h,
// MappedFile: the data set borrows them) where it holds them as float32, else converted. Throws
// UserError naming the file and the tensor for a missing tensor, a shape that disagrees, a
// non-finite number or a label out of range; `expected_features` (if > 0) must match.
Dataset load_safetensors_data(const std::filesystem::path& path, int64_t classes,
                              int64_t expected_features);
// The same from a CSV file's text; `name` names it in errors.
Dataset parse_csv(const std::string& text, const std::string& name, int64_t classes,
                  int64_t expected_features);

}  // namespace xo

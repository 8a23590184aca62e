// A data set as a safetensors file: tensor "x" the samples ([samples, ...], any float dtype the
// reader converts), tensor "y" their class labels or regression targets ([samples]). What NumPy,
// PyTorch and the Python module (crossover.tune) write without a text format in between.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>

#include "core/error.h"
#include "core/file.h"
#include "data/dataset.h"
#include "io/safetensors.h"

namespace xo {
namespace {

const TensorBytes* find_tensor(const std::vector<TensorBytes>& tensors, std::string_view name) {
  for (const TensorBytes& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Each label an integer in [0, classes), or (classes 0) each target a finite float32 kept as its
// bits, as the CSV reader keeps them.
std::vector<int32_t> read_targets(const std::vector<float>& y, int64_t classes,
                                  const std::string& name) {
  std::vector<int32_t> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const float v = y[i];
    if (!std::isfinite(v)) {
      throw UserError(fmt::format("{}: tensor 'y': sample {} is {} (expected a finite {})", name, i,
                                  v, classes > 0 ? "class label" : "target"));
    }
    if (classes == 0) {
      out[i] = std::bit_cast<int32_t>(v);
      continue;
    }
    if (v != std::floor(v) || v < 0 || v >= static_cast<float>(classes)) {
      throw UserError(fmt::format(
          "{}: tensor 'y': label {} of sample {} is out of range (expected an integer from 0 to "
          "{})",
          name, v, i, classes - 1));
    }
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

// The file mapped and what a data set read from it borrows: the samples in the file itself where
// it holds them as float32 aligned for floats (what the Python module and NumPy write), else
// converted here; the labels converted (a file holds them as integers of 64 bits).
struct MappedSamples {
  explicit MappedSamples(const std::filesystem::path& path) : file(path) {}
  MappedFile file;
  std::vector<float> converted_x;
  std::vector<int32_t> y;
};

// The samples of tensor 'x' in place (float32, aligned) or converted into `copy`.
const float* samples_of(const TensorBytes& x, std::vector<float>& copy) {
  if (x.dtype == "F32" && reinterpret_cast<uintptr_t>(x.bytes.data()) % alignof(float) == 0)
    return reinterpret_cast<const float*>(x.bytes.data());
  copy = tensor_floats(x);
  return copy.data();
}

}  // namespace

Dataset load_safetensors_data(const std::filesystem::path& path, int64_t classes,
                              int64_t expected_features) {
  const std::string name = path.string();
  auto mapped = std::make_shared<MappedSamples>(path);
  const std::vector<TensorBytes> tensors = index_safetensors(mapped->file.bytes(), name);
  const TensorBytes* x = find_tensor(tensors, "x");
  const TensorBytes* y = find_tensor(tensors, "y");
  if (!x || !y) {
    std::vector<std::string> names;
    for (const TensorBytes& t : tensors) names.push_back("'" + t.name + "'");
    throw UserError(fmt::format(
        "{}: no tensor '{}' (expected 'x', the samples [samples, ...], and 'y', their {} "
        "[samples]; the file holds {})",
        name, x ? "y" : "x", classes > 0 ? "class labels" : "targets",
        names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
  }
  if (x->shape.empty() || x->shape[0] < 1) {
    throw UserError(fmt::format(
        "{}: tensor 'x' has shape {} (expected [samples, ...] with at least one sample)", name,
        shape_text(x->shape)));
  }
  const int64_t samples = x->shape[0];
  int64_t features = 1;
  for (size_t i = 1; i < x->shape.size(); ++i) features *= x->shape[i];
  if (expected_features > 0 && features != expected_features) {
    throw UserError(fmt::format(
        "{}: tensor 'x' of shape {} holds {} numbers a sample; the model's input takes {}", name,
        shape_text(x->shape), features, expected_features));
  }
  if (y->shape != std::vector<int64_t>{samples}) {
    throw UserError(
        fmt::format("{}: tensor 'y' has shape {} (expected [{}]: one {} for each sample of 'x')",
                    name, shape_text(y->shape), samples, classes > 0 ? "label" : "target"));
  }
  const float* values = samples_of(*x, mapped->converted_x);
  const auto count = static_cast<size_t>(samples * features);
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      throw UserError(fmt::format(
          "{}: tensor 'x': number {} of sample {} is {} (expected a "
          "finite number)",
          name, i % static_cast<size_t>(features), i / static_cast<size_t>(features), values[i]));
    }
  }
  mapped->y = read_targets(tensor_floats(*y), classes, name);
  Dataset d;
  d.samples = samples;
  d.features = features;
  d.classes = classes;
  d.borrowed_x = values;
  d.borrowed_y = mapped->y.data();
  d.owner = std::move(mapped);
  d.description = fmt::format("safetensors: {} ({} samples, {} features)", name, samples, features);
  return d;
}

}  // namespace xo

// A data set as a safetensors file: tensor "x" the samples ([samples, ...], any float dtype the
// reader converts), tensor "y" their class labels or regression targets ([samples]). What NumPy,
// PyTorch and the Python module (crossover.tune) write without a text format in between.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/dataset.h"
#include "io/safetensors.h"

namespace xo {
namespace {

NamedTensor* find_tensor(std::vector<NamedTensor>& tensors, std::string_view name) {
  for (NamedTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Each label an integer in [0, classes), or (classes 0) each target a finite float32 kept as its
// bits, as the CSV reader keeps them.
std::vector<int32_t> read_targets(const NamedTensor& y, int64_t classes, const std::string& name) {
  std::vector<int32_t> out(y.data.size());
  for (size_t i = 0; i < y.data.size(); ++i) {
    const float v = y.data[i];
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

}  // namespace

Dataset load_safetensors_data(const std::filesystem::path& path, int64_t classes,
                              int64_t expected_features) {
  const std::string name = path.string();
  std::vector<NamedTensor> tensors = load_safetensors(path);
  NamedTensor* x = find_tensor(tensors, "x");
  NamedTensor* y = find_tensor(tensors, "y");
  if (!x || !y) {
    std::vector<std::string> names;
    for (const NamedTensor& t : tensors) names.push_back("'" + t.name + "'");
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
  for (size_t i = 0; i < x->data.size(); ++i) {
    if (!std::isfinite(x->data[i])) {
      throw UserError(fmt::format(
          "{}: tensor 'x': number {} of sample {} is {} (expected a "
          "finite number)",
          name, i % static_cast<size_t>(features), i / static_cast<size_t>(features), x->data[i]));
    }
  }
  Dataset d;
  d.samples = samples;
  d.features = features;
  d.classes = classes;
  d.y = read_targets(*y, classes, name);
  d.x = std::move(x->data);
  d.description = fmt::format("safetensors: {} ({} samples, {} features)", name, samples, features);
  return d;
}

}  // namespace xo

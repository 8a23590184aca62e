// The built-in specs: disc-2 ... disc-12, the MLP depth sweep of the classic "when should I train
// on a GPU?" experiment.
#include <fmt/format.h>

#include "model/spec.h"

namespace xo {
namespace {

constexpr int kMinDiscLayers = 2;
constexpr int kMaxDiscLayers = 12;

// disc-L: L Linear layers; the first L-1 double the width from 2 up to 2^L, each followed by a
// ReLU, then a Linear to the 2 classes. Plain SGD at lr 0.1, batches of 100 in order, 100 epochs.
ModelSpec disc(int layers) {
  ModelSpec s;
  s.name = fmt::format("disc-{}", layers);
  s.origin = "built-in";
  s.input = {2};
  int64_t width = 2;
  for (int i = 0; i < layers - 1; ++i) {
    width *= 2;
    s.layers.push_back({LayerType::Linear, width, true, 0});
    s.layers.push_back({LayerType::ReLU, 0, true, 0});
  }
  s.layers.push_back({LayerType::Linear, 2, true, 0});
  s.loss = LossType::CrossEntropy;
  s.train.optimizer = OptimizerSpec{};  // sgd, lr 0.1, no momentum
  s.train.batch = 100;
  s.train.epochs = 100;
  s.train.shuffle = false;
  s.train.seed = 0;
  s.data.source = "disc";
  s.data.samples = 1000;
  return s;
}

}  // namespace

std::vector<std::string> builtin_spec_names() {
  std::vector<std::string> names;
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) names.push_back(fmt::format("disc-{}", l));
  return names;
}

std::optional<ModelSpec> builtin_spec(const std::string& name) {
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) {
    if (name == fmt::format("disc-{}", l)) return disc(l);
  }
  return std::nullopt;
}

}  // namespace xo

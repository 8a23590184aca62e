// The built-in specs: disc-2 ... disc-12, the MLP depth sweep of the classic "when should I train
// on a GPU?" experiment. specs/ ships the same specs as files (a test keeps them identical).
#include <fmt/format.h>

#include "model/spec.h"

namespace xo {
namespace {

constexpr int kMinDiscLayers = 2;
constexpr int kMaxDiscLayers = 12;
constexpr int64_t kDiscFeatures = 2;  // points in the plane
constexpr int64_t kDiscClasses = 2;   // inside or outside the disc
constexpr double kDiscLearningRate = 0.1;
constexpr int64_t kDiscBatch = 100;
constexpr int64_t kDiscEpochs = 100;
constexpr int64_t kDiscSamples = 1000;
constexpr int kNoLine = 0;  // built-in layers come from no file

std::string disc_name(int layers) { return fmt::format("disc-{}", layers); }

// disc-L: L Linear layers; the first L-1 double the width from 2 up to 2^L, each followed by a
// ReLU, then a Linear to the 2 classes. Plain SGD (no momentum), batches of 100 in order.
ModelSpec disc(int layers) {
  ModelSpec s;
  s.name = disc_name(layers);
  s.origin = "built-in";
  s.input = {kDiscFeatures};
  int64_t width = kDiscFeatures;
  for (int i = 0; i < layers - 1; ++i) {
    width *= 2;
    s.layers.push_back({LayerType::Linear, width, true, kNoLine});
    s.layers.push_back({LayerType::ReLU, 0, true, kNoLine});
  }
  s.layers.push_back({LayerType::Linear, kDiscClasses, true, kNoLine});
  s.loss = LossType::CrossEntropy;
  s.train.optimizer = OptimizerSpec{};
  s.train.optimizer.type = "sgd";
  s.train.optimizer.lr = kDiscLearningRate;
  s.train.optimizer.momentum = 0.0;
  s.train.batch = kDiscBatch;
  s.train.epochs = kDiscEpochs;
  s.train.shuffle = false;
  s.train.seed = 0;
  s.data.source = "disc";
  s.data.samples = kDiscSamples;
  return s;
}

}  // namespace

std::vector<std::string> builtin_spec_names() {
  std::vector<std::string> names;
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) names.push_back(disc_name(l));
  return names;
}

std::optional<ModelSpec> builtin_spec(const std::string& name) {
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) {
    if (name == disc_name(l)) return disc(l);
  }
  return std::nullopt;
}

}  // namespace xo

// The built-in specs: disc-2 ... disc-12, the MLP depth sweep of the classic "when should I train
// on a GPU?" experiment, and the classic Keras examples (mnist-mlp, mnist-cnn, imdb-lstm). specs/
// ships the same specs as files (a test keeps them identical).
#include <fmt/format.h>

#include "io/toml.h"  // kNoLine: built-in layers come from no file
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
  s.train.optimizer = OptimizerSettings{};
  s.train.optimizer.type = OptimizerType::SGD;
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

LayerSpec layer(LayerType type, int64_t out = 0) {
  LayerSpec l;
  l.type = type;
  l.out = out;
  return l;
}

LayerSpec dropout(double p) {
  LayerSpec l = layer(LayerType::Dropout);
  l.p = p;
  return l;
}

LayerSpec conv3x3(int64_t out) {
  LayerSpec l = layer(LayerType::Conv2d, out);
  l.kernel = 3;
  return l;
}

// The classic MNIST networks run on Fashion-MNIST (Debian's dataset-fashion-mnist): same shapes,
// a harder task. Keras's examples shuffle every epoch (fit's default).
ModelSpec mnist_base(std::string name, std::vector<int64_t> input) {
  ModelSpec s;
  s.name = std::move(name);
  s.origin = "built-in";
  s.input = std::move(input);
  s.loss = LossType::CrossEntropy;
  s.train.batch = 128;
  s.train.shuffle = true;
  s.data.source = "fashion-mnist";
  return s;
}

// Keras mnist_mlp.py: 784-512-512-10 with dropout 0.2, RMSprop (Keras's defaults: lr 0.001,
// rho 0.9, epsilon 1e-7), 20 epochs. 669,706 parameters.
ModelSpec mnist_mlp() {
  ModelSpec s = mnist_base("mnist-mlp", {784});
  s.layers = {layer(LayerType::Linear, 512), layer(LayerType::ReLU), dropout(0.2),
              layer(LayerType::Linear, 512), layer(LayerType::ReLU), dropout(0.2),
              layer(LayerType::Linear, 10)};
  s.train.optimizer.type = OptimizerType::RMSprop;
  s.train.optimizer.lr = 0.001;
  s.train.optimizer.alpha = 0.9;
  s.train.optimizer.eps = 1e-7;
  s.train.epochs = 20;
  return s;
}

// Keras mnist_cnn.py: two 3x3 convolutions (32, 64), 2x2 max-pool, dropout 0.25, dense 128,
// dropout 0.5, dense 10; Adadelta (lr 1.0, rho 0.95, epsilon 1e-7), 12 epochs. 1,199,882
// parameters.
ModelSpec mnist_cnn() {
  ModelSpec s = mnist_base("mnist-cnn", {1, 28, 28});
  LayerSpec pool = layer(LayerType::MaxPool2d);
  pool.kernel = pool.stride = 2;
  s.layers = {conv3x3(32),
              layer(LayerType::ReLU),
              conv3x3(64),
              layer(LayerType::ReLU),
              pool,
              dropout(0.25),
              layer(LayerType::Flatten),
              layer(LayerType::Linear, 128),
              layer(LayerType::ReLU),
              dropout(0.5),
              layer(LayerType::Linear, 10)};
  s.train.optimizer.type = OptimizerType::Adadelta;
  s.train.optimizer.lr = 1.0;
  s.train.optimizer.rho = 0.95;
  s.train.optimizer.eps = 1e-7;
  s.train.epochs = 12;
  return s;
}

// Keras imdb_lstm.py: Embedding(20000, 128), LSTM 128, Dense 1 with a sigmoid (here inside the
// bce loss), Adam (Keras's defaults: lr 0.001, epsilon 1e-7), batches of 32, 15 epochs, reviews cut
// or padded to 80 tokens. Without a corpus it trains on imdb-synthetic (25,000 + 25,000 sequences
// like IMDB's); a spec file with source = "imdb:DIR" uses the real reviews.
ModelSpec imdb_lstm() {
  ModelSpec s;
  s.name = "imdb-lstm";
  s.origin = "built-in";
  s.input = {80};
  LayerSpec embedding = layer(LayerType::Embedding, 128);
  embedding.vocab = 20000;
  s.layers = {embedding, layer(LayerType::LSTM, 128), layer(LayerType::Linear, 1)};
  s.loss = LossType::BinaryCrossEntropy;
  s.train.optimizer.type = OptimizerType::Adam;
  s.train.optimizer.lr = 0.001;
  s.train.optimizer.eps = 1e-7;
  s.train.batch = 32;
  s.train.epochs = 15;
  s.train.shuffle = true;
  s.data.source = "imdb-synthetic";
  s.data.samples = 25000;
  s.data.test_samples = 25000;
  return s;
}

using Builder = ModelSpec (*)();
const std::vector<std::pair<std::string, Builder>>& classic_specs() {
  static const std::vector<std::pair<std::string, Builder>> specs = {
      {"mnist-mlp", mnist_mlp}, {"mnist-cnn", mnist_cnn}, {"imdb-lstm", imdb_lstm}};
  return specs;
}

}  // namespace

std::vector<std::string> builtin_spec_names() {
  std::vector<std::string> names;
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) names.push_back(disc_name(l));
  for (const auto& [name, build] : classic_specs()) names.push_back(name);
  return names;
}

std::optional<ModelSpec> builtin_spec(const std::string& name) {
  for (int l = kMinDiscLayers; l <= kMaxDiscLayers; ++l) {
    if (name == disc_name(l)) return disc(l);
  }
  for (const auto& [classic, build] : classic_specs()) {
    if (name == classic) return build();
  }
  return std::nullopt;
}

}  // namespace xo

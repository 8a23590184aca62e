// A model spec: the layers of a torch.nn.Sequential in order, the loss, how to train it and on what
// data. Parsed from TOML files (see specs/) or taken from the built-in catalog (disc-2 ...
// disc-12). Implemented in spec_parse.cpp (reading), shapes.cpp (shape inference, parameters),
// spec_write.cpp (to_toml) and builtin.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/source.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace xo {

enum class LayerType {
  Linear,
  ReLU,
  Tanh,
  Sigmoid,
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  Dropout,
  Flatten,
  Embedding,
  LSTM,
  GlobalAvgPool,  // mean over the steps of a sequence: [T, F] -> [F]
  GlobalMaxPool,  // max over the steps of a sequence
  BatchNorm1d,    // over the batch of [C] or [C, L] (per channel C)
  BatchNorm2d,    // over the batch and positions of [C, H, W] (per channel C)
  LeakyReLU,      // x > 0 ? x : negative_slope * x (torch.nn.LeakyReLU)
};
const char* layer_type_name(LayerType t);  // as written in spec files: "conv2d", "lstm", ...

// One entry of the Sequential. Its index in ModelSpec::layers is its PyTorch module index, so a
// Linear at index 2 owns the parameters "2.weight" [out, in] and "2.bias" [out].
struct LayerSpec {
  LayerType type = LayerType::Linear;
  // Linear: out_features; Conv2d: out_channels; Embedding: embedding_dim; LSTM: hidden_size.
  int64_t out = 0;
  bool bias = true;       // Linear, Conv2d: has a bias
  int line = 0;           // line in the spec file (0 for built-in specs), for error messages
  int64_t kernel = 0;     // Conv2d, pools: square kernel size
  int64_t stride = 1;     // Conv2d, pools (a pool's stride defaults to its kernel)
  int64_t padding = 0;    // Conv2d, pools: zero padding on each side
  double p = 0.5;         // Dropout: probability of zeroing an element
  int64_t vocab = 0;      // Embedding: num_embeddings
  int64_t layers = 1;     // LSTM: num_layers
  bool sequence = false;  // LSTM: output every step [T, H] (true) or the last one [H]
  double eps = 1e-5;      // BatchNorm: added to the variance
  double momentum = 0.1;  // BatchNorm: weight of the batch in the running statistics
  double negative_slope = 0.01;  // LeakyReLU: the slope below zero (PyTorch's default)
};

// A parameter tensor of a layer: PyTorch's state_dict suffix ("weight", "weight_ih_l0") and shape.
struct ParamShape {
  std::string suffix;
  std::vector<int64_t> shape;
};
// The parameters of layer `l` given its input shape, in PyTorch's state_dict order.
std::vector<ParamShape> layer_parameters(const LayerSpec& l, const std::vector<int64_t>& in);

// cross_entropy: softmax over the last layer's scores (torch.nn.CrossEntropyLoss); bce: a sigmoid
// on the single output, binary cross-entropy against labels 0/1 (torch.nn.BCEWithLogitsLoss); mse:
// the single output against a real-valued target, squared error averaged over the batch
// (torch.nn.MSELoss), for regression: there are no classes, and no error or accuracy is measured.
enum class LossType { CrossEntropy, BinaryCrossEntropy, MeanSquaredError };
const char* loss_name(LossType t);

struct TrainSpec {
  OptimizerSettings optimizer;
  int64_t batch = 100;
  int64_t epochs = 100;
  bool shuffle = false;
  uint64_t seed = 0;
  std::optional<ScheduleSettings> schedule;             // [train.schedule]; none: a constant rate
  std::optional<EarlyStoppingSettings> early_stopping;  // [train.early_stopping]
};

struct ModelSpec {
  std::string name;    // built-in name, or the file's stem
  std::string origin;  // the file path, or "built-in"
  // The initial weights: a safetensors file (PyTorch names) or an ONNX model's initializers
  // (`model.init` in a spec, relative to its folder; an imported ONNX model's own file). Empty:
  // drawn from train.seed with PyTorch's default initialisation.
  std::string init;
  // The weights `init` names when they were read already (an imported ONNX model's, read with its
  // graph); shared by the spec's copies. Null: initialize() reads `init`.
  std::shared_ptr<const std::vector<NamedTensor>> init_weights;
  // What the user should know of how this spec was made (an imported model's notes), printed by
  // the commands that take it.
  std::vector<std::string> notes;
  std::vector<int64_t> input;  // shape of one sample, e.g. {2}
  std::vector<LayerSpec> layers;
  LossType loss = LossType::CrossEntropy;
  TrainSpec train;
  DataSpec data;
};

// Parses a TOML spec. `origin` names the file in error messages. Throws UserError of the form
//   "FILE:LINE: model.layers[3].type: unknown layer type 'relux' (expected one of: linear, relu,
//    tanh, sigmoid)"
// for: TOML syntax errors, unknown/missing keys, wrong value types, unknown layer types,
// non-positive widths/batch/epochs, negative lr, shapes that do not chain, a final layer whose
// width is < 2 for cross_entropy.
ModelSpec parse_spec(const std::string& toml_text, const std::string& origin);
ModelSpec load_spec_file(const std::filesystem::path& path);

// Applies a training file to a spec whose layers come from elsewhere (an ONNX model): [train] and
// [data] as in a spec, and in [model] only `loss` (and `name`). A [model] table with layers or an
// input alone is refused, naming `layers_from`; a whole spec (input and layers, as `crossover
// import --spec` writes one) is taken for its training settings, data and loss where its network
// is the model's own, and refused where it was edited.
void apply_training_file(ModelSpec& spec, const std::filesystem::path& path,
                         const std::string& layers_from);

// Applies [train] settings given as TOML text (the Python module's fit() arguments, a table
// `[train]` with a spec's keys: optimizer, batch, epochs, shuffle, seed, schedule,
// early_stopping), each checked as in a spec; errors name `origin`. Nothing else may be set.
void apply_train_settings(ModelSpec& spec, const std::string& toml_text, const std::string& origin);

// Checks that the layers chain from `input` and returns the shape after each layer. Throws
// UserError naming origin, line and layer index when they do not.
std::vector<std::vector<int64_t>> infer_shapes(const ModelSpec& spec);

// The shape layer `index` outputs for an input of shape `in` (its checks as infer_shapes's).
std::vector<int64_t> layer_output_shape(const ModelSpec& spec, size_t index,
                                        const std::vector<int64_t>& in);

// Trainable parameters of the spec's model (what PyTorch's sum(p.numel()) reports).
int64_t parameter_count(const ModelSpec& spec);

// What load_data needs to know of the spec's model, which predicts `classes` classes.
DataRequest data_request(const ModelSpec& spec, int64_t classes);

// Built-in specs, addressable by name ("disc-2" ... "disc-12", "mnist-mlp", "mnist-cnn",
// "imdb-lstm").
std::vector<std::string> builtin_spec_names();
std::optional<ModelSpec> builtin_spec(const std::string& name);

// A name of a built-in spec, a path to a TOML spec, or a path to an ONNX model (imported with the
// training file beside it, model/onnx_import.h). Throws UserError listing the built-in names when
// none matches.
ModelSpec resolve_spec(const std::string& name_or_path);

// A --data argument as a [data] source: a source as a spec writes it ("fashion-mnist",
// "csv:PATH", "idx:DIR", …), or a path to a file: a safetensors file where it ends in
// .safetensors, else a CSV. Throws UserError naming `flag`.
std::string data_source_argument(const std::string& text, const std::string& flag);

// Renders a spec back to TOML (used to ship specs/ files and to record what ran).
std::string to_toml(const ModelSpec& spec);

}  // namespace xo

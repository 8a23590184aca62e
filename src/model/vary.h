// A model family grown along one axis from a spec: its depth, its hidden width, its batch size or
// its sequence length. Sweeps (`crossover sweep --vary AXIS=V1,V2,...`) and the advisor's
// predicted crossover use it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/spec.h"

namespace xo {

enum class Axis { Depth, Width, Batch, Sequence };
const char* axis_name(Axis a);
// "depth", "width", "batch" or "sequence"; throws UserError naming the text and the choices.
Axis parse_axis(const std::string& text);

// "AXIS=V1,V2,..." (integers > 0, at least one; "A..B" expands to every integer from A to B).
// Errors name the text and what was expected.
struct AxisValues {
  Axis axis = Axis::Depth;
  std::vector<int64_t> values;
};
AxisValues parse_vary(const std::string& text);

// The spec at one value of the axis; its name says so ("mnist-mlp[batch=256]"; disc specs at a
// depth are the built-in disc-N). Throws UserError naming the spec when the axis does not apply:
//  - depth: disc-N specs become disc-V (2 <= V <= 12); other specs need a Linear+activation block
//    before the last Linear, which is repeated or dropped so the model has V Linear layers;
//  - width: every Linear, Conv2d, LSTM and Embedding width but the last layer's becomes V;
//  - batch: the training batch;
//  - sequence: the token sequence length of a model whose first layer is an Embedding.
// Along depth and width the spec's `init` is dropped (its weights fit the spec's shapes only): the
// grown models draw their initial weights from the seed.
ModelSpec vary_spec(const ModelSpec& spec, Axis axis, int64_t value);

// A key of a spec that a search varies (`crossover tune --vary KEY=...`), besides the axes above:
//  - a dotted key as the spec file writes it: "train.optimizer.lr", "train.batch",
//    "train.optimizer.type", "data.validation_split", "model.layers.3.out" (layers counted from 0,
//    as nn.Sequential names them);
//  - "TYPE.KEY" for KEY in every layer of that type: "dropout.p"; "linear.out" sets every Linear's
//    width but the output layer's (as the width axis does);
//  - the short names lr (train.optimizer.lr), optimizer (train.optimizer.type), epochs and seed
//    (train.epochs, train.seed).
// An axis name (depth, width, batch, sequence) is the sweep's axis (an integer value, vary_spec).
// Throws UserError naming the key and what keys there are.
struct SpecKey {
  std::string text;               // as given
  std::optional<Axis> axis;       // a sweep axis
  std::vector<std::string> path;  // a dotted key of the file (empty for an axis or a layer type)
  std::optional<LayerType> layer_type;  // TYPE.KEY: every layer of this type
  std::string layer_key;
};
SpecKey parse_spec_key(const std::string& text);

// The spec with `key` set to `value` (TOML text, or a bare word taken as a string: "adam"), read
// back through the spec reader, so a value the spec does not allow fails as it would in a file,
// here naming "KEY=VALUE". Another optimizer type starts from its own defaults at the spec's
// learning rate (an RMSprop's alpha means nothing to Adam). The name gains "[KEY=VALUE]". Initial
// weights (`init`) are kept where the parameter shapes stay the same, and dropped (drawn from the
// seed) where they change.
ModelSpec with_spec_value(const ModelSpec& spec, const SpecKey& key, const std::string& value);

// with_spec_value for each setting in turn: the same spec, name and errors. Consecutive keys of
// the spec file whose values change no layer's kind or number (train's and data's keys, TYPE.KEY
// but `type`; not an axis, another optimizer or a dotted key of the model's layers) are set
// together on one reading of its text: a search's trial specs are made in a fraction of the time.
using SpecSetting = std::pair<SpecKey, std::string>;
ModelSpec with_spec_values(const ModelSpec& spec, const std::vector<SpecSetting>& settings);

}  // namespace xo

// One descriptor per layer kind (LayerType): its spec name and keys, the node it runs as, the
// activation it is, how its shape and settings behave. The spec reader and writer, shape inference,
// the model's layout, --vary and the import summary read this table instead of switching on the
// type each in its own file; docs/architecture.md ("Adding a layer kind") lists what remains.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "model/spec.h"

namespace xo {

// A unit of execution: one layer of the spec, with the activation that follows a Linear or a
// Conv2d fused into it (then `layer` is the index of the Linear/Conv2d).
enum class NodeKind {
  Linear,
  Conv2d,
  Activation,
  Pool2d,
  SequencePool,
  Dropout,
  Flatten,
  Embedding,
  LSTM,
  BatchNorm,
};

struct LayerKind {
  LayerType type;
  std::string_view name;  // as written in spec files: "conv2d", "lstm", ...
  // The keys a spec's layer table takes besides "type", in the order the reference lists them.
  std::span<const std::string_view> keys;
  NodeKind node;
  Activation activation;  // the element-wise function it is; None for every other kind
  // Fused into a Linear or Conv2d right before it (a oneDNN post-op, a CUDA epilogue).
  bool fuses;
  // Outputs its input's shape (infer_shapes checks only its own settings).
  bool keeps_shape;
  // Holds a weight matrix or table that a width or depth sweep would resize (Linear, Conv2d,
  // Embedding, LSTM). BatchNorm's per-channel scale and shift are not counted: they follow the
  // channels of the layer before them.
  bool has_weights;
  // The layer's settings as they follow `type = "…"` in its TOML table (", out = 4"): what the
  // spec reader takes back to the same layer, with only the keys that differ from the defaults.
  std::string (*settings_toml)(const LayerSpec&);
  // One line for the ONNX import summary, e.g. "conv2d 8, 3x3 stride 1 padding 1".
  std::string (*describe)(const LayerSpec&);
};

// Every kind, in the order of LayerType (the table is indexed by it).
std::span<const LayerKind> layer_kinds();
const LayerKind& layer_kind(LayerType t);
// The kind a spec names, if any.
std::optional<LayerType> layer_type_named(std::string_view name);

}  // namespace xo

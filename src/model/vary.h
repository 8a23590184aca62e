// A model family grown along one axis from a spec: its depth, its hidden width, its batch size or
// its sequence length. Sweeps (`crossover sweep --vary AXIS=V1,V2,...`) and the advisor's
// predicted crossover use it.
#pragma once

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

}  // namespace xo

// The ONNX importer's Dropout: crossover's dropout with the node's ratio (an attribute before
// opset 12, an input from 12 on).
#include <fmt/format.h>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::dropout(const OnnxNode& n) {
  known_attributes(n, {"ratio", "seed"});
  takes_data_first(n);
  no_users(n, 1, "the dropout mask");
  double ratio = attr_float(n, "ratio", 0.5);
  if (!input(n, 1).empty()) {
    const OnnxTensor& r = constant(n, input(n, 1));
    if (!r.is_float() || r.floats.size() != 1) refuse(n, "its ratio is not one number");
    ratio = r.floats[0];
  }
  if (!input(n, 2).empty()) constant(n, input(n, 2));  // training_mode: crossover trains
  if (!(ratio >= 0 && ratio < 1)) refuse(n, fmt::format("ratio {} (expected [0, 1))", ratio));
  LayerSpec l;
  l.type = LayerType::Dropout;
  l.p = shortest_float(ratio);
  add_layer(l, n, {}, layout_);
}

}  // namespace xo::onnx_importer

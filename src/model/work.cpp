#include "model/work.h"

#include <fmt/format.h>

namespace xo {

double optimizer_bytes_per_param(const OptimizerSettings& o) {
  // Per parameter: read the parameter and its gradient, write the parameter (12 bytes), and read
  // and write each state array (8 bytes each).
  int state = 0;
  switch (o.type) {
    case OptimizerType::SGD:
      state = o.momentum != 0 ? 1 : 0;
      break;
    case OptimizerType::RMSprop:
      state = 1;
      break;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
    case OptimizerType::Adadelta:
      state = 2;
      break;
  }
  return 12.0 + 8.0 * state;
}

std::string node_name(const Node& node) {
  std::string name = fmt::format("{} {}", node.layer, layer_type_name(node.spec.type));
  if ((node.kind == NodeKind::Linear || node.kind == NodeKind::Conv2d) &&
      node.activation != Activation::None) {
    name += fmt::format("+{}", activation_name(node.activation));
  }
  return name;
}

LayerWork node_work(const Node& n, const std::vector<ParamTensor>& tensors, int64_t batch) {
  LayerWork l;
  l.name = node_name(n);
  const double b = static_cast<double>(batch);
  const double f = b * n.forward_flops;
  l.flops = n.gradient_below ? 3 * f : 2 * f;
  double params = 0;
  for (int t : n.params) params += static_cast<double>(tensors[t].size);
  const double in = b * static_cast<double>(n.in_size), out = b * static_cast<double>(n.out_size);
  // Forward: read the input and the parameters, write the output. Backward: read the output
  // gradient, the input, the output (activation derivative) and the parameters; write the
  // parameter gradients and, where a gradient flows below, the input gradient.
  double floats = in + params + out;
  floats += out + in + out + params + params + (n.gradient_below ? in : 0);
  if (n.kind == NodeKind::LSTM) {
    // The four gates of every step and layer: written forward, read and written backward.
    const double gates = b * 4.0 * static_cast<double>(n.spec.out) *
                         static_cast<double>(n.in_shape.empty() ? 1 : n.in_shape[0]) *
                         static_cast<double>(n.spec.layers);
    floats += 3 * gates;
  }
  l.bytes = 4.0 * floats;
  return l;
}

StepWork step_work(const std::vector<Node>& nodes, const std::vector<ParamTensor>& tensors,
                   int64_t parameters, const OptimizerSettings& optimizer, int64_t batch) {
  StepWork c;
  c.batch = batch;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind == NodeKind::Flatten) continue;  // a view
    LayerWork l = node_work(nodes[i], tensors, batch);
    l.node = static_cast<int>(i);
    c.flops += l.flops;
    c.bytes += l.bytes;
    c.layers.push_back(l);
  }
  c.optimizer_bytes = optimizer_bytes_per_param(optimizer) * static_cast<double>(parameters);
  c.bytes += c.optimizer_bytes;
  return c;
}

StepWork step_work(const Model& model, int64_t batch) {
  return step_work(model.nodes(), model.tensors(), model.parameter_count(),
                   model.spec().train.optimizer, batch);
}

int64_t weighted_layers(const ModelSpec& spec) {
  int64_t n = 0;
  std::vector<int64_t> in = spec.input;
  const auto shapes = infer_shapes(spec);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    n += !layer_parameters(spec.layers[i], in).empty();
    in = shapes[i];
  }
  return n;
}

bool bf16_changes_products(const ModelSpec& spec) {
  for (const Node& n : model_layout(spec).nodes) {
    if (n.kind == NodeKind::Conv2d || n.kind == NodeKind::LSTM) return true;
    if (n.kind == NodeKind::Linear && !n.in_shape.empty() && !n.out_shape.empty() &&
        cpu_bf16_linear(n.in_shape.back(), n.out_shape.back()))
      return true;
  }
  return false;
}

}  // namespace xo

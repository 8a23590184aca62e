#include "advisor/predict.h"

#include <fmt/format.h>

#include <algorithm>

namespace xo {

double optimizer_bytes_per_param(const OptimizerSettings& o) {
  // Per parameter: read the parameter and its gradient, write the parameter (12 bytes), and read
  // and write each state array (8 bytes each).
  int state = 0;
  if (o.type == OptimizerType::SGD) state = o.momentum != 0 ? 1 : 0;
  if (o.type == OptimizerType::Adam || o.type == OptimizerType::AdamW ||
      o.type == OptimizerType::Adadelta) {
    state = 2;
  }
  if (o.type == OptimizerType::RMSprop) state = 1;
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

StepCost step_cost(const Model& model, int64_t batch) {
  StepCost c;
  c.batch = batch;
  const auto& tensors = model.tensors();
  const double b = static_cast<double>(batch);
  for (size_t i = 0; i < model.nodes().size(); ++i) {
    const Node& n = model.nodes()[i];
    if (n.kind == NodeKind::Flatten) continue;  // a view
    LayerCost l;
    l.name = node_name(n);
    l.node = static_cast<int>(i);
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
    c.flops += l.flops;
    c.bytes += l.bytes;
    c.layers.push_back(l);
  }
  c.optimizer_bytes = optimizer_bytes_per_param(model.spec().train.optimizer) *
                      static_cast<double>(model.parameter_count());
  c.bytes += c.optimizer_bytes;
  return c;
}

DeviceRates probed_rates(const DevicePeaks& p) {
  return {p.matmul_gflops, p.bandwidth_gbs, p.step_overhead_us, p.layer_overhead_us};
}

StepPrediction predict_step(const StepCost& cost, const DeviceRates& rates, double efficiency) {
  StepPrediction p;
  const double flops_per_s = rates.gflops * 1e9 * efficiency;
  const double bytes_per_s = rates.bandwidth_gbs * 1e9 * efficiency;
  for (const LayerCost& l : cost.layers) {
    const double tf = l.flops / flops_per_s, tb = l.bytes / bytes_per_s;
    if (tf >= tb) {
      p.flops_seconds += tf;
      p.layer_bounds.push_back("FLOPs");
    } else {
      p.bytes_seconds += tb;
      p.layer_bounds.push_back("bytes");
    }
  }
  p.bytes_seconds += cost.optimizer_bytes / bytes_per_s;
  p.overhead_seconds = (rates.step_overhead_us +
                        rates.layer_overhead_us * static_cast<double>(cost.layers.size())) *
                       1e-6;
  p.seconds = p.flops_seconds + p.bytes_seconds + p.overhead_seconds;
  if (p.overhead_seconds >= p.flops_seconds && p.overhead_seconds >= p.bytes_seconds) {
    p.bound = "overhead";
  } else {
    p.bound = p.flops_seconds >= p.bytes_seconds ? "FLOPs" : "bytes";
  }
  return p;
}

double calibrate_efficiency(const StepCost& cost, const DeviceRates& rates, double measured_s) {
  const StepPrediction ideal = predict_step(cost, rates, 1.0);
  const double work = ideal.flops_seconds + ideal.bytes_seconds;
  const double left = measured_s - ideal.overhead_seconds;
  if (work <= 0 || left <= work) return 1.0;
  return std::clamp(work / left, 0.02, 1.0);
}

}  // namespace xo

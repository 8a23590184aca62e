// The ONNX importer's activations, and the final Softmax, LogSoftmax or Sigmoid, which are part of
// the loss (crossover's cross_entropy and bce take the scores before them).
#include <fmt/format.h>

#include <utility>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::activation(const OnnxNode& n, LayerType type) {
  known_attributes(n, {});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch, "an activation here is not on a layer's output");
  LayerSpec l;
  l.type = type;
  add_layer(l, n, {}, Layout::Batch);
}

// ONNX's LeakyRelu: alpha is torch.nn.LeakyReLU's negative_slope, 0.01 by default in both.
void Importer::leaky_relu(const OnnxNode& n) {
  constexpr double kOnnxDefaultAlpha = 0.01;
  known_attributes(n, {"alpha"});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch, "an activation here is not on a layer's output");
  LayerSpec l;
  l.type = LayerType::LeakyReLU;
  l.negative_slope = shortest_float(attr_float(n, "alpha", kOnnxDefaultAlpha));
  if (!(l.negative_slope >= 0)) {
    refuse(n, fmt::format("alpha {} is negative (crossover's leaky_relu takes a slope >= 0)",
                          l.negative_slope));
  }
  add_layer(l, n, {}, Layout::Batch);
}

void Importer::sigmoid(const OnnxNode& n) {
  known_attributes(n, {});
  takes_data_first(n);
  std::vector<int> through;
  const bool one_score = (layout_ == Layout::Batch && sample_ == std::vector<int64_t>{1}) ||
                         layout_ == Layout::Squeezed;
  if (one_score && leads_to_output(output_of(n), through)) {
    return end_in_loss(n, LossType::BinaryCrossEntropy, through,
                       "the final Sigmoid is part of the bce loss (binary cross-entropy on the "
                       "score, as PyTorch's BCEWithLogitsLoss and Keras's binary_crossentropy "
                       "on a sigmoid compute it)");
  }
  activation(n, LayerType::Sigmoid);
}

void Importer::softmax(const OnnxNode& n) {
  known_attributes(n, {"axis"});
  takes_data_first(n);
  std::vector<int> through;
  need(n, layout_ == Layout::Batch && sample_.size() == 1 && leads_to_output(output_of(n), through),
       fmt::format("{} is supported only as the last node, over the class scores", n.op_type));
  const int64_t axis = normalise_axis(attr_int(n, "axis", g_.opset >= 13 ? -1 : 1), 2);
  if (axis != 1) refuse(n, fmt::format("axis {} is not the class axis", attr_int(n, "axis", 0)));
  end_in_loss(n, LossType::CrossEntropy, through,
              fmt::format("the final {} is part of the cross_entropy loss (which applies a "
                          "softmax to the scores, as PyTorch's CrossEntropyLoss does)",
                          n.op_type));
}

// The tensor leads to the graph's output through nothing but Squeeze and Identity nodes.
bool Importer::leads_to_output(const std::string& tensor, std::vector<int>& through) const {
  if (tensor == output_) return true;
  const auto it = consumers_.find(tensor);
  if (it == consumers_.end() || it->second.size() != 1) return false;
  const OnnxNode& next = g_.nodes[it->second[0]];
  if (next.op_type != "Squeeze" && next.op_type != "Identity") return false;
  through.push_back(it->second[0]);
  return leads_to_output(output_of(next), through);
}

void Importer::end_in_loss(const OnnxNode& n, LossType loss, std::vector<int>& through,
                           std::string note) {
  for (int t : through) used_[t] = true;
  for (int t : through) {
    for (size_t i = 1; i < g_.nodes[t].inputs.size(); ++i) {
      if (!g_.nodes[t].inputs[i].empty()) constant(g_.nodes[t], g_.nodes[t].inputs[i]);
    }
  }
  loss_hint_ = loss;
  out_.spec.notes.push_back(fmt::format("{}: {}", n.described(), note));
  current_ = output_;
}

}  // namespace xo::onnx_importer

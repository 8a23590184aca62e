// The ONNX importer's op tables: from an operator's name to the function that maps it. One table
// for the nodes on the chain from the input to the output (each becomes a layer, part of one, or a
// change of the data's layout), one for the nodes that compute a constant (shape arithmetic, a
// weight rearranged), which are evaluated. An operator in neither table is refused.
#include <map>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

// Several operators share a handler where one layer type covers them (MaxPool and AveragePool);
// the handler reads the node's op_type.
const std::map<std::string_view, LayerHandler>& layer_table() {
  static const std::map<std::string_view, LayerHandler> table = {
      {"Gemm", [](Importer& im, const OnnxNode& n) { im.gemm(n); }},
      {"MatMul", [](Importer& im, const OnnxNode& n) { im.matmul(n); }},
      {"Add", [](Importer& im, const OnnxNode& n) { im.lone_add(n); }},
      {"Conv", [](Importer& im, const OnnxNode& n) { im.conv(n); }},
      {"Relu", [](Importer& im, const OnnxNode& n) { im.activation(n, LayerType::ReLU); }},
      {"LeakyRelu", [](Importer& im, const OnnxNode& n) { im.leaky_relu(n); }},
      {"Tanh", [](Importer& im, const OnnxNode& n) { im.activation(n, LayerType::Tanh); }},
      {"Sigmoid", [](Importer& im, const OnnxNode& n) { im.sigmoid(n); }},
      {"Softmax", [](Importer& im, const OnnxNode& n) { im.softmax(n); }},
      {"LogSoftmax", [](Importer& im, const OnnxNode& n) { im.softmax(n); }},
      {"MaxPool", [](Importer& im, const OnnxNode& n) { im.pool(n); }},
      {"AveragePool", [](Importer& im, const OnnxNode& n) { im.pool(n); }},
      {"GlobalAveragePool", [](Importer& im, const OnnxNode& n) { im.global_pool(n); }},
      {"GlobalMaxPool", [](Importer& im, const OnnxNode& n) { im.global_pool(n); }},
      {"ReduceMean", [](Importer& im, const OnnxNode& n) { im.reduce(n); }},
      {"ReduceMax", [](Importer& im, const OnnxNode& n) { im.reduce(n); }},
      {"Pad", [](Importer& im, const OnnxNode& n) { im.pad(n); }},
      {"Flatten", [](Importer& im, const OnnxNode& n) { im.flatten(n); }},
      {"Reshape", [](Importer& im, const OnnxNode& n) { im.reshape(n); }},
      {"Transpose", [](Importer& im, const OnnxNode& n) { im.transpose(n); }},
      {"Squeeze", [](Importer& im, const OnnxNode& n) { im.squeeze(n); }},
      {"Identity", [](Importer& im, const OnnxNode& n) { im.identity(n); }},
      {"Dropout", [](Importer& im, const OnnxNode& n) { im.dropout(n); }},
      {"BatchNormalization", [](Importer& im, const OnnxNode& n) { im.batch_norm(n); }},
      {"Gather", [](Importer& im, const OnnxNode& n) { im.gather(n); }},
      {"LSTM", [](Importer& im, const OnnxNode& n) { im.lstm(n); }},
      {"Slice", [](Importer& im, const OnnxNode& n) { im.slice_last_step(n); }},
  };
  return table;
}

const std::map<std::string_view, ConstantHandler>& constant_table() {
  using T = OnnxTensor;
  static const std::map<std::string_view, ConstantHandler> table = {
      {"Constant", [](Importer& im, const OnnxNode& n, T& out) { im.fold_constant(n, out); }},
      {"Shape", [](Importer& im, const OnnxNode& n, T& out) { im.fold_shape(n, out); }},
      {"Identity", [](Importer& im, const OnnxNode& n, T& out) { im.fold_identity(n, out); }},
      {"Cast", [](Importer& im, const OnnxNode& n, T& out) { im.fold_cast(n, out); }},
      {"Unsqueeze", [](Importer& im, const OnnxNode& n, T& out) { im.fold_unsqueeze(n, out); }},
      {"Squeeze", [](Importer& im, const OnnxNode& n, T& out) { im.fold_squeeze(n, out); }},
      {"Concat", [](Importer& im, const OnnxNode& n, T& out) { im.fold_concat(n, out); }},
      {"Transpose", [](Importer& im, const OnnxNode& n, T& out) { im.fold_transpose(n, out); }},
      {"Gather", [](Importer& im, const OnnxNode& n, T& out) { im.fold_gather(n, out); }},
      {"Slice", [](Importer& im, const OnnxNode& n, T& out) { im.fold_slice(n, out); }},
      {"Add", [](Importer& im, const OnnxNode& n, T& out) { im.fold_arithmetic(n, out); }},
      {"Sub", [](Importer& im, const OnnxNode& n, T& out) { im.fold_arithmetic(n, out); }},
      {"Mul", [](Importer& im, const OnnxNode& n, T& out) { im.fold_arithmetic(n, out); }},
      {"Div", [](Importer& im, const OnnxNode& n, T& out) { im.fold_arithmetic(n, out); }},
      {"ConstantOfShape",
       [](Importer& im, const OnnxNode& n, T& out) { im.fold_constant_of_shape(n, out); }},
  };
  return table;
}

template <typename Table>
std::vector<std::string_view> names(const Table& table) {
  std::vector<std::string_view> ops;
  for (const auto& [op, handler] : table) ops.push_back(op);
  return ops;
}

}  // namespace

LayerHandler layer_handler(std::string_view op_type) {
  const auto it = layer_table().find(op_type);
  return it == layer_table().end() ? nullptr : it->second;
}

ConstantHandler constant_handler(std::string_view op_type) {
  const auto it = constant_table().find(op_type);
  return it == constant_table().end() ? nullptr : it->second;
}

std::vector<std::string_view> layer_ops() { return names(layer_table()); }
std::vector<std::string_view> constant_ops() { return names(constant_table()); }

}  // namespace xo::onnx_importer

// The ONNX importer's op tables (model/onnx_ops.cpp): every operator the importer maps or evaluates
// has its handler, and nothing else has one.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

TEST(OnnxOps, TheLayerTableMapsEveryOperatorOnTheChain) {
  // The operators the importer's walk accepted as an if-chain before the table: each a layer, a
  // change of layout, or (Add) refused with its own reason.
  const std::vector<std::string_view> expected = {
      "Add",           "AveragePool", "BatchNormalization",
      "Conv",          "Dropout",     "Flatten",
      "Gather",        "Gemm",        "GlobalAveragePool",
      "GlobalMaxPool", "Identity",    "LSTM",
      "LeakyRelu",     "LogSoftmax",  "MatMul",
      "MaxPool",
      "Pad",           "ReduceMax",   "ReduceMean",
      "Relu",          "Reshape",     "Sigmoid",
      "Slice",         "Softmax",     "Squeeze",
      "Tanh",          "Transpose"};
  EXPECT_EQ(layer_ops(), expected);
  for (std::string_view op : expected) EXPECT_NE(layer_handler(op), nullptr) << op;
  for (std::string_view op : {"Unsqueeze", "Concat", "Shape", "Conv1d", "", "relu"}) {
    EXPECT_EQ(layer_handler(op), nullptr) << op;
  }
}

TEST(OnnxOps, EveryOperatorNamedAsSupportedHasALayerHandler) {
  for (std::string_view op : layer_ops()) {
    if (op == "Add") continue;  // named as MatMul's bias: "MatMul (+ Add as its bias)"
    EXPECT_NE(kSupported.find(op), std::string_view::npos) << op;
  }
}

TEST(OnnxOps, TheConstantTableEvaluatesShapeArithmeticAndWeightRearrangement) {
  // The list the evaluator's refusal names, word for word.
  const std::vector<std::string_view> expected = {
      "Add",   "Cast",    "Concat",   "Constant",  "ConstantOfShape",
      "Div",   "Gather",  "Identity", "Mul",       "Shape",
      "Slice", "Squeeze", "Sub",      "Transpose", "Unsqueeze"};
  EXPECT_EQ(constant_ops(), expected);
  for (std::string_view op : expected) EXPECT_NE(constant_handler(op), nullptr) << op;
  EXPECT_EQ(constant_handler("MatMul"), nullptr);
  EXPECT_EQ(constant_handler("Relu"), nullptr);
}

}  // namespace
}  // namespace xo::onnx_importer

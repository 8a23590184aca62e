// The ONNX importer: graphs laid out as torch.onnx.export (PyTorch 1.13) writes them, built here,
// mapped onto crossover's layers and checked layer by layer and weight by weight; the graphs it
// must refuse, refused with the node, its operator and what crossover supports.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/source.h"
#include "model/model.h"
#include "model/onnx_import.h"
#include "core/random.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/onnx_builder.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace xo {
namespace {

using testing::expect_user_error;
using testing::float_tensor;
using testing::int64_tensor;
using testing::OnnxModelBuilder;
using testing::ramp;

constexpr const char* kOrigin = "exported/model.onnx";

OnnxImport import(OnnxModelBuilder& b) { return import_onnx(b.parsed(kOrigin)); }

// -- expected layers ---------------------------------------------------------------------------

LayerSpec layer(LayerType type) {
  LayerSpec l;
  l.type = type;
  return l;
}
LayerSpec linear(int64_t out, bool bias = true) {
  LayerSpec l = layer(LayerType::Linear);
  l.out = out;
  l.bias = bias;
  return l;
}
LayerSpec conv(int64_t out, int64_t kernel, int64_t stride, int64_t padding, bool bias = true) {
  LayerSpec l = layer(LayerType::Conv2d);
  l.out = out;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  l.bias = bias;
  return l;
}
LayerSpec pool(LayerType type, int64_t kernel, int64_t stride, int64_t padding = 0) {
  LayerSpec l = layer(type);
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}
LayerSpec dropout(double p) {
  LayerSpec l = layer(LayerType::Dropout);
  l.p = p;
  return l;
}
LayerSpec embedding(int64_t vocab, int64_t out) {
  LayerSpec l = layer(LayerType::Embedding);
  l.vocab = vocab;
  l.out = out;
  return l;
}
LayerSpec lstm(int64_t hidden, int64_t layers, bool sequence) {
  LayerSpec l = layer(LayerType::LSTM);
  l.out = hidden;
  l.layers = layers;
  l.sequence = sequence;
  return l;
}
LayerSpec batchnorm(LayerType type, double eps, double momentum) {
  LayerSpec l = layer(type);
  l.eps = eps;
  l.momentum = momentum;
  return l;
}

std::string text(const LayerSpec& l) {
  return fmt::format(
      "{} out {} bias {} kernel {} stride {} padding {} p {} vocab {} layers {} "
      "sequence {} eps {} momentum {} negative_slope {}",
      layer_type_name(l.type), l.out, l.bias, l.kernel, l.stride, l.padding, l.p, l.vocab, l.layers,
      l.sequence, l.eps, l.momentum, l.negative_slope);
}

// Every field of every layer, exactly (doubles included: the importer rounds to the shortest
// decimal, so 0.1 must be 0.1).
void expect_layers(const ModelSpec& spec, const std::vector<LayerSpec>& expected) {
  ASSERT_EQ(spec.layers.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(text(spec.layers[i]), text(expected[i])) << "layer " << i;
  }
}

const NamedTensor& weight(const OnnxImport& m, const std::string& name) {
  for (const NamedTensor& t : m.weights) {
    if (t.name == name) return t;
  }
  static const NamedTensor none{"<missing>", {}, {}};
  ADD_FAILURE() << "no weight " << name;
  return none;
}

std::vector<std::string> weight_names(const OnnxImport& m) {
  std::vector<std::string> names;
  for (const NamedTensor& t : m.weights) names.push_back(t.name);
  return names;
}

bool has_note(const ModelSpec& spec, const std::vector<std::string>& pieces) {
  for (const std::string& note : spec.notes) {
    bool all = true;
    for (const std::string& p : pieces) all = all && note.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

// Gemm "/<i>/Gemm" with a fresh [out, in] weight (PyTorch's nn.Linear: transB = 1) and bias;
// returns the weight's values.
std::vector<float> add_gemm(OnnxModelBuilder& b, int index, int64_t in, int64_t out) {
  const std::string w = fmt::format("{}.weight", index), bias = fmt::format("{}.bias", index);
  std::vector<float> values = b.ramp_weight(w, {out, in}, 0.125f * static_cast<float>(index + 1));
  b.ramp_weight(bias, {out}, -0.5f);
  b.then("Gemm", fmt::format("/{}/Gemm", index), {w, bias})
      .f("alpha", 1.0f)
      .f("beta", 1.0f)
      .i("transB", 1);
  return values;
}

// -- linear ------------------------------------------------------------------------------------

TEST(OnnxImport, GemmIsALinearLayerInPyTorchsLayout) {
  struct Case {
    std::string what;
    std::optional<int64_t> trans_b;
    bool bias;
  };
  const std::vector<Case> cases = {
      {"transB = 1 (torch.onnx.export)", 1, false},
      {"transB = 0 (weight stored [in, out])", 0, false},
      {"transB left out (0)", std::nullopt, false},
      {"transB = 1 with a bias", 1, true},
      {"transB = 0 with a bias", 0, true},
  };
  // x [3] → 2 outputs. The weight's values 1..6 laid out either way.
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const bool out_first = c.trans_b.value_or(0) == 1;
    OnnxModelBuilder b;
    b.input("x", {3});
    b.weight("w", out_first ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{3, 2}, w);
    std::vector<std::string> inputs{"w"};
    if (c.bias) {
      b.weight("b", {2}, {0.25f, -0.75f});
      inputs.push_back("b");
    }
    testing::OnnxNodeBuilder gemm = b.then("Gemm", "/0/Gemm", inputs);
    if (c.trans_b) gemm.i("transB", *c.trans_b);
    const OnnxImport m = import(b);
    EXPECT_EQ(m.spec.input, (std::vector<int64_t>{3}));
    expect_layers(m.spec, {linear(2, c.bias)});
    EXPECT_EQ(m.spec.loss, LossType::CrossEntropy);
    EXPECT_EQ(m.sources, (std::vector<std::string>{"/0/Gemm"}));
    EXPECT_EQ(m.spec.name, "model");
    EXPECT_EQ(m.spec.origin, kOrigin);
    const NamedTensor& weight0 = weight(m, "0.weight");
    EXPECT_EQ(weight0.shape, (std::vector<int64_t>{2, 3}));
    // [in = 3, out = 2] rows (1 2)(3 4)(5 6) are the columns of PyTorch's [out, in].
    EXPECT_EQ(weight0.data, out_first ? w : std::vector<float>({1, 3, 5, 2, 4, 6}));
    EXPECT_EQ(weight0.dtype, "F32");
    if (c.bias) {
      EXPECT_EQ(weight_names(m), (std::vector<std::string>{"0.weight", "0.bias"}));
      EXPECT_EQ(weight(m, "0.bias").data, (std::vector<float>{0.25f, -0.75f}));
      EXPECT_EQ(weight(m, "0.bias").shape, (std::vector<int64_t>{2}));
    } else {
      EXPECT_EQ(weight_names(m), (std::vector<std::string>{"0.weight"}));
    }
  }
}

TEST(OnnxImport, MatMulAndAddAreALinearLayerWithBias) {
  // Keras/tf2onnx and torch without a fused Gemm write x·W + b with W stored [in, out]; the Add
  // takes the bias on either side.
  for (bool bias_first : {false, true}) {
    SCOPED_TRACE(bias_first ? "Add(b, x·W)" : "Add(x·W, b)");
    OnnxModelBuilder b;
    b.input("x", {3});
    b.weight("W", {3, 2}, {1, 2, 3, 4, 5, 6});
    b.weight("b", {2}, {0.5f, 1.5f});
    b.then("MatMul", "/dense/MatMul", {"W"});
    const std::string product = b.current();
    b.node("Add", "/dense/Add",
           bias_first ? std::vector<std::string>{"b", product}
                      : std::vector<std::string>{product, "b"},
           {"logits"});
    b.set_current("logits");
    const OnnxImport m = import(b);
    expect_layers(m.spec, {linear(2, true)});
    EXPECT_EQ(weight(m, "0.weight").shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(weight(m, "0.weight").data, (std::vector<float>{1, 3, 5, 2, 4, 6}));
    EXPECT_EQ(weight(m, "0.bias").data, (std::vector<float>{0.5f, 1.5f}));
  }
  // Without the Add: no bias.
  OnnxModelBuilder b;
  b.input("x", {3});
  b.weight("W", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.then("MatMul", "/dense/MatMul", {"W"});
  const OnnxImport m = import(b);
  expect_layers(m.spec, {linear(2, false)});
  EXPECT_EQ(weight_names(m), (std::vector<std::string>{"0.weight"}));
  EXPECT_EQ(weight(m, "0.weight").data, (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

// nn.Sequential(Linear(4, 8), ReLU(), Dropout(0.2), Linear(8, 3)) in eval mode: the Dropout is
// left out, so the second Gemm is module 3. `second`: that Gemm's weight.
OnnxModelBuilder torch_mlp_in_eval_mode(std::vector<float>* second = nullptr) {
  OnnxModelBuilder b;
  b.input("input", {4});
  add_gemm(b, 0, 4, 8);
  b.then("Relu", "/1/Relu");
  const std::vector<float> w = add_gemm(b, 3, 8, 3);
  if (second) *second = w;
  return b;
}

TEST(OnnxImport, AnMlpAsTorchExportsItInEvalMode) {
  std::vector<float> second;
  OnnxModelBuilder b = torch_mlp_in_eval_mode(&second);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {linear(8), layer(LayerType::ReLU), linear(3)});
  EXPECT_EQ(m.sources, (std::vector<std::string>{"/0/Gemm", "/1/Relu", "/3/Gemm"}));
  EXPECT_EQ(weight_names(m),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(weight(m, "2.weight").data, second);
  EXPECT_EQ(weight(m, "2.bias").data, ramp(3, -0.5f));
  EXPECT_TRUE(has_note(m.spec, {"/3/Gemm", "module 3", "numbered with gaps"}));
  EXPECT_EQ(m.spec.loss, LossType::CrossEntropy);
}

// -- convolutions and pools --------------------------------------------------------------------

TEST(OnnxImport, ConvMapsItsWindow) {
  struct Case {
    std::string what;
    int64_t kernel;
    std::function<void(testing::OnnxNodeBuilder&)> attributes;
    bool bias;
    LayerSpec expected;
  };
  const std::vector<Case> cases = {
      {"pads 1, strides 2, bias", 3,
       [](auto& n) {
         n.ints("kernel_shape", {3, 3})
             .ints("pads", {1, 1, 1, 1})
             .ints("strides", {2, 2})
             .ints("dilations", {1, 1})
             .i("group", 1);
       },
       true, conv(3, 3, 2, 1, true)},
      {"no bias, ONNX defaults", 3, [](auto&) {}, false, conv(3, 3, 1, 0, false)},
      {"auto_pad SAME_UPPER, stride 1, odd kernel", 3,
       [](auto& n) { n.s("auto_pad", "SAME_UPPER"); }, false, conv(3, 3, 1, 1, false)},
      {"auto_pad SAME_LOWER, kernel 5", 5,
       [](auto& n) {
         n.s("auto_pad", "SAME_LOWER").ints("strides", {1, 1});
       },
       true, conv(3, 5, 1, 2, true)},
      {"auto_pad VALID, stride 2", 3,
       [](auto& n) {
         n.s("auto_pad", "VALID").ints("strides", {2, 2});
       },
       true, conv(3, 3, 2, 0, true)},
      {"auto_pad NOTSET with pads 2", 5,
       [](auto& n) {
         n.s("auto_pad", "NOTSET").ints("pads", {2, 2, 2, 2});
       },
       false, conv(3, 5, 1, 2, false)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxModelBuilder b;
    b.input("x", {2, 8, 8});
    const std::vector<float> w = b.ramp_weight("0.weight", {3, 2, c.kernel, c.kernel});
    std::vector<std::string> inputs{"0.weight"};
    if (c.bias) {
      b.weight("0.bias", {3}, {0.5f, 0.0f, -0.5f});
      inputs.push_back("0.bias");
    }
    testing::OnnxNodeBuilder n = b.then("Conv", "/0/Conv", inputs);
    c.attributes(n);
    const OnnxImport m = import(b);
    EXPECT_EQ(m.spec.input, (std::vector<int64_t>{2, 8, 8}));
    expect_layers(m.spec, {c.expected});
    EXPECT_EQ(weight(m, "0.weight").shape, (std::vector<int64_t>{3, 2, c.kernel, c.kernel}));
    EXPECT_EQ(weight(m, "0.weight").data, w);
    if (c.bias) {
      EXPECT_EQ(weight(m, "0.bias").data, (std::vector<float>{0.5f, 0.0f, -0.5f}));
    } else {
      EXPECT_EQ(weight_names(m), (std::vector<std::string>{"0.weight"}));
    }
  }
}

TEST(OnnxImport, PoolsTakeOnnxsDefaults) {
  struct Case {
    std::string what;
    std::string op;
    std::function<void(testing::OnnxNodeBuilder&)> attributes;
    LayerSpec expected;
    std::vector<int64_t> shape;  // what the layer outputs for [2, 8, 8]
  };
  const std::vector<Case> cases = {
      // ONNX's strides default to 1 where PyTorch's default to the kernel.
      {"MaxPool without strides: stride 1",
       "MaxPool",
       [](auto& n) {
         n.ints("kernel_shape", {2, 2});
       },
       pool(LayerType::MaxPool2d, 2, 1),
       {2, 7, 7}},
      {"MaxPool as torch exports MaxPool2d(2)",
       "MaxPool",
       [](auto& n) {
         n.i("ceil_mode", 0)
             .ints("kernel_shape", {2, 2})
             .ints("pads", {0, 0, 0, 0})
             .ints("strides", {2, 2});
       },
       pool(LayerType::MaxPool2d, 2, 2),
       {2, 4, 4}},
      {"MaxPool 3, stride 2, padding 1",
       "MaxPool",
       [](auto& n) {
         n.ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).ints("strides", {2, 2});
       },
       pool(LayerType::MaxPool2d, 3, 2, 1),
       {2, 4, 4}},
      {"AveragePool without strides: stride 1",
       "AveragePool",
       [](auto& n) {
         n.ints("kernel_shape", {3, 3});
       },
       pool(LayerType::AvgPool2d, 3, 1),
       {2, 6, 6}},
      {"AveragePool counting the padding",
       "AveragePool",
       [](auto& n) {
         n.ints("kernel_shape", {3, 3})
             .ints("pads", {1, 1, 1, 1})
             .ints("strides", {1, 1})
             .i("count_include_pad", 1);
       },
       pool(LayerType::AvgPool2d, 3, 1, 1),
       {2, 8, 8}},
      {"GlobalAveragePool: a pool over the whole map",
       "GlobalAveragePool",
       [](auto&) {},
       pool(LayerType::AvgPool2d, 8, 8),
       {2, 1, 1}},
      {"GlobalMaxPool", "GlobalMaxPool", [](auto&) {}, pool(LayerType::MaxPool2d, 8, 8), {2, 1, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxModelBuilder b;
    b.input("x", {2, 8, 8});
    testing::OnnxNodeBuilder n = b.then(c.op, "/0/" + c.op);
    c.attributes(n);
    const OnnxImport m = import(b);
    expect_layers(m.spec, {c.expected});
    EXPECT_EQ(layer_output_shape(m.spec, 0, m.spec.input), c.shape);
    EXPECT_TRUE(m.weights.empty());
  }
}

TEST(OnnxImport, ReduceMeanOverTheMapIsAGlobalPool) {
  // x.mean(dim=(2, 3)) on [C, H, W]: a pool over the map, then flat.
  OnnxModelBuilder b(13);
  b.input("x", {2, 4, 4});
  b.then("ReduceMean", "/mean").ints("axes", {2, 3}).i("keepdims", 0);
  add_gemm(b, 1, 2, 3);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {pool(LayerType::AvgPool2d, 4, 4), layer(LayerType::Flatten), linear(3)});
  EXPECT_EQ(infer_shapes(m.spec)[1], (std::vector<int64_t>{2}));
  EXPECT_EQ(weight_names(m), (std::vector<std::string>{"2.weight", "2.bias"}));
}

// The CNN front shared by the flatten tests: x [1, 8, 8] → Conv(2, 3x3) → Relu → [2, 6, 6].
OnnxModelBuilder cnn_front(int64_t opset = 14) {
  OnnxModelBuilder b(opset);
  b.input("input", {1, 8, 8});
  b.ramp_weight("c.weight", {2, 1, 3, 3});
  b.weight("c.bias", {2}, {0.1f, 0.2f});
  b.then("Conv", "/c/Conv", {"c.weight", "c.bias"}).ints("kernel_shape", {3, 3});
  b.then("Relu", "/Relu");
  return b;
}

void expect_flattened_cnn(const OnnxImport& m, const std::vector<float>& fc) {
  expect_layers(m.spec,
                {conv(2, 3, 1, 0), layer(LayerType::ReLU), layer(LayerType::Flatten), linear(3)});
  EXPECT_EQ(weight(m, "3.weight").shape, (std::vector<int64_t>{3, 72}));
  EXPECT_EQ(weight(m, "3.weight").data, fc);
  EXPECT_EQ(infer_shapes(m.spec)[2], (std::vector<int64_t>{72}));
}

TEST(OnnxImport, FlattenAndTheReshapesThatFlatten) {
  {
    SCOPED_TRACE("Flatten");
    OnnxModelBuilder b = cnn_front();
    b.then("Flatten", "/Flatten").i("axis", 1);
    const std::vector<float> fc = add_gemm(b, 3, 72, 3);
    expect_flattened_cnn(import(b), fc);
  }
  // x.view(x.size(0), -1): Shape → Gather(0) → Unsqueeze → Concat with -1, as opset 14 writes
  // it (Unsqueeze's axes an input) and as opset 11 does (an attribute).
  for (int64_t opset : {11, 14}) {
    SCOPED_TRACE(fmt::format("x.view(x.size(0), -1), opset {}", opset));
    OnnxModelBuilder b = cnn_front(opset);
    const std::string data = b.current();
    b.node("Shape", "/Shape", {data}, {"shape"});
    b.constant("zero", int64_tensor("", {}, {0}));
    b.node("Gather", "/Gather", {"shape", "zero"}, {"batch"}).i("axis", 0);
    if (opset >= 13) {
      b.constant_ints("axes0", {1}, {0});
      b.node("Unsqueeze", "/Unsqueeze", {"batch", "axes0"}, {"batch1"});
    } else {
      b.node("Unsqueeze", "/Unsqueeze", {"batch"}, {"batch1"}).ints("axes", {0});
    }
    b.constant_ints("minus_one", {1}, {-1});
    b.node("Concat", "/Concat", {"batch1", "minus_one"}, {"target"}).i("axis", 0);
    b.then("Reshape", "/Reshape", {"target"}).i("allowzero", 0);
    const std::vector<float> fc = add_gemm(b, 3, 72, 3);
    expect_flattened_cnn(import(b), fc);
  }
  {
    SCOPED_TRACE("Reshape to a constant [-1, 72]");
    OnnxModelBuilder b = cnn_front();
    b.initializer(int64_tensor("target", {2}, {-1, 72}));
    b.then("Reshape", "/Reshape", {"target"});
    const std::vector<float> fc = add_gemm(b, 3, 72, 3);
    expect_flattened_cnn(import(b), fc);
  }
  // Exported without dynamic_axes, the batch is a number and constant folding writes it into
  // the target.
  for (const std::vector<int64_t>& target : {std::vector<int64_t>{2, -1}, {2, 72}}) {
    SCOPED_TRACE(fmt::format("a fixed batch of 2, Reshape to [{}]", fmt::join(target, ", ")));
    OnnxModelBuilder b = cnn_front();
    b.graph()
        .mutable_input(0)
        ->mutable_type()
        ->mutable_tensor_type()
        ->mutable_shape()
        ->mutable_dim(0)
        ->set_dim_value(2);
    b.initializer(int64_tensor("target", {2}, target));
    b.then("Reshape", "/Reshape", {"target"});
    const std::vector<float> fc = add_gemm(b, 3, 72, 3);
    expect_flattened_cnn(import(b), fc);
  }
  {
    SCOPED_TRACE("Reshape to [0, -1] (0 copies the batch)");
    OnnxModelBuilder b = cnn_front();
    b.initializer(int64_tensor("target", {2}, {0, -1}));
    b.then("Reshape", "/Reshape", {"target"});
    const std::vector<float> fc = add_gemm(b, 3, 72, 3);
    expect_flattened_cnn(import(b), fc);
  }
}

// -- dropout and batch normalisation -----------------------------------------------------------

TEST(OnnxImport, DropoutTakesItsRatio) {
  struct Case {
    std::string what;
    int64_t opset;
    std::function<void(OnnxModelBuilder&)> add;
    double p;
  };
  const std::vector<Case> cases = {
      {"ratio attribute (opset 11)", 11,
       [](OnnxModelBuilder& b) { b.then("Dropout", "/2/Dropout").f("ratio", 0.2f); }, 0.2},
      {"no ratio (opset 11): 0.5", 11, [](OnnxModelBuilder& b) { b.then("Dropout", "/2/Dropout"); },
       0.5},
      {"ratio and training_mode inputs (opset 14, training export)", 14,
       [](OnnxModelBuilder& b) {
         b.constant("/2/Constant_output_0", float_tensor("", {}, {0.25f}));
         b.constant("/2/Constant_1_output_0",
                    testing::raw_tensor<uint8_t>("", onnx::TensorProto::BOOL, {}, {1}));
         b.then("Dropout", "/2/Dropout", {"/2/Constant_output_0", "/2/Constant_1_output_0"}, 2);
       },
       0.25},
      {"ratio an initializer (opset 12)", 12,
       [](OnnxModelBuilder& b) {
         b.weight("ratio", {}, {0.3f});
         b.then("Dropout", "/2/Dropout", {"ratio"});
       },
       0.3},
      {"no ratio input (opset 13): 0.5", 13,
       [](OnnxModelBuilder& b) { b.then("Dropout", "/2/Dropout", {}, 2); }, 0.5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxModelBuilder b(c.opset);
    b.input("x", {4});
    add_gemm(b, 0, 4, 6);
    b.then("Relu", "/1/Relu");
    c.add(b);
    add_gemm(b, 3, 6, 2);
    const OnnxImport m = import(b);
    expect_layers(m.spec, {linear(6), layer(LayerType::ReLU), dropout(c.p), linear(2)});
    EXPECT_EQ(weight_names(m),
              (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias"}));
  }
}

TEST(OnnxImport, BatchNormalizationKeepsPyTorchsMomentumAndItsBuffers) {
  struct Case {
    std::string what;
    std::vector<int64_t> input;
    std::optional<float> momentum, epsilon;
    LayerSpec expected;
  };
  const std::vector<Case> cases = {
      // torch writes BatchNorm2d(4)'s momentum 0.1 as 0.9f and eps 1e-5 as a float.
      {"after a convolution, as torch exports it",
       {4, 5, 5},
       0.9f,
       1e-5f,
       batchnorm(LayerType::BatchNorm2d, 1e-05, 0.1)},
      {"ONNX's defaults",
       {4, 5, 5},
       std::nullopt,
       std::nullopt,
       batchnorm(LayerType::BatchNorm2d, 1e-05, 0.1)},
      {"over features, momentum 0.99, eps 1e-3",
       {4},
       0.99f,
       1e-3f,
       batchnorm(LayerType::BatchNorm1d, 0.001, 0.01)},
      {"over a sequence [C, L], momentum 0.7",
       {4, 6},
       0.7f,
       1e-5f,
       batchnorm(LayerType::BatchNorm1d, 1e-05, 0.3)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxModelBuilder b;
    b.input("x", c.input);
    const std::vector<float> scale = b.ramp_weight("1.weight", {4}, 1.0f);
    const std::vector<float> bias = b.ramp_weight("1.bias", {4}, -1.0f);
    const std::vector<float> mean = b.ramp_weight("1.running_mean", {4}, 0.125f);
    const std::vector<float> var = b.ramp_weight("1.running_var", {4}, 2.0f);
    testing::OnnxNodeBuilder n =
        b.then("BatchNormalization", "/1/BatchNormalization",
               {"1.weight", "1.bias", "1.running_mean", "1.running_var"}, 3);
    if (c.epsilon) n.f("epsilon", *c.epsilon);
    if (c.momentum) n.f("momentum", *c.momentum);
    n.i("training_mode", 1);
    const OnnxImport m = import(b);
    expect_layers(m.spec, {c.expected});
    EXPECT_EQ(weight_names(m),
              (std::vector<std::string>{"0.weight", "0.bias", "0.running_mean", "0.running_var",
                                        "0.num_batches_tracked"}));
    EXPECT_EQ(weight(m, "0.weight").data, scale);
    EXPECT_EQ(weight(m, "0.bias").data, bias);
    EXPECT_EQ(weight(m, "0.running_mean").data, mean);
    EXPECT_EQ(weight(m, "0.running_var").data, var);
    for (const char* name : {"0.weight", "0.bias", "0.running_mean", "0.running_var"}) {
      EXPECT_EQ(weight(m, name).shape, (std::vector<int64_t>{4})) << name;
      EXPECT_EQ(weight(m, name).dtype, "F32") << name;
    }
    const NamedTensor& count = weight(m, "0.num_batches_tracked");
    EXPECT_EQ(count.dtype, "I64");
    EXPECT_TRUE(count.shape.empty());
    EXPECT_EQ(count.data, (std::vector<float>{0.0f}));
  }
}

// -- LSTM --------------------------------------------------------------------------------------

constexpr int64_t kVocab = 10, kWidth = 3, kSteps = 5, kHidden = 2;

// PyTorch's gate g of a stacked [4 * hidden, cols] tensor, from ONNX's. ONNX stacks the gates as
// (i, o, f, c), PyTorch as (i, f, g, o) where g is ONNX's c.
int onnx_gate(int pytorch_gate) {
  const std::string onnx_order = "iofc", pytorch_order = "ifco";
  return static_cast<int>(onnx_order.find(pytorch_order[static_cast<size_t>(pytorch_gate)]));
}

// Every element of a PyTorch-ordered [4 * hidden, cols] tensor against the ONNX-ordered source.
void expect_gates_reordered(const std::vector<float>& pytorch, const float* onnx, int64_t cols,
                            const std::string& what) {
  ASSERT_EQ(pytorch.size(), static_cast<size_t>(4 * kHidden * cols)) << what;
  for (int g = 0; g < 4; ++g) {
    for (int64_t r = 0; r < kHidden; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t to = (g * kHidden + r) * cols + c;
        const int64_t from = (onnx_gate(g) * kHidden + r) * cols + c;
        EXPECT_EQ(pytorch[static_cast<size_t>(to)], onnx[from])
            << what << ": gate "
            << "ifgo"[g] << " row " << r << " col " << c;
      }
    }
  }
}

struct LstmWeights {
  std::vector<float> w, r, b;  // ONNX's [1, 4H, in], [1, 4H, H], [1, 8H]
};

// The embedding of token ids as torch exports nn.Embedding(kVocab, kWidth), then the batch-first
// sequence transposed to time first: the data is [T, N, E].
OnnxModelBuilder embedding_front(std::vector<float>* table = nullptr) {
  OnnxModelBuilder b;
  b.input("input", {kSteps}, onnx::TensorProto::INT64);
  b.constant("/emb/Constant_output_0", int64_tensor("", {}, {-1}));
  const std::vector<float> t = b.ramp_weight("emb.weight", {kVocab, kWidth}, -1.0f);
  if (table) *table = t;
  b.node("Gather", "/emb/Gather", {"emb.weight", "input"}, {"/emb/Gather_output_0"});
  b.set_current("/emb/Gather_output_0");
  return b;
}

// torch's zero initial state: ConstantOfShape([layers, N, H]) from the data's shape.
std::string zero_state(OnnxModelBuilder& b, int64_t layers) {
  const std::string data = b.current();
  b.node("Shape", "/lstm/Shape", {data}, {"/lstm/Shape_output_0"});
  b.constant("/lstm/Constant_output_0", int64_tensor("", {}, {0}));
  b.node("Gather", "/lstm/Gather", {"/lstm/Shape_output_0", "/lstm/Constant_output_0"},
         {"/lstm/Gather_output_0"})
      .i("axis", 0);
  b.constant_ints("/lstm/Constant_1_output_0", {1}, {layers});
  b.constant_ints("onnx::Unsqueeze_17", {1}, {0});
  b.node("Unsqueeze", "/lstm/Unsqueeze", {"/lstm/Gather_output_0", "onnx::Unsqueeze_17"},
         {"/lstm/Unsqueeze_output_0"});
  b.constant_ints("/lstm/Constant_2_output_0", {1}, {kHidden});
  b.node("Concat", "/lstm/Concat",
         {"/lstm/Constant_1_output_0", "/lstm/Unsqueeze_output_0", "/lstm/Constant_2_output_0"},
         {"/lstm/Concat_output_0"})
      .i("axis", 0);
  b.node("ConstantOfShape", "/lstm/ConstantOfShape", {"/lstm/Concat_output_0"},
         {"/lstm/ConstantOfShape_output_0"})
      .t("value", float_tensor("", {1}, {0.0f}));
  return "/lstm/ConstantOfShape_output_0";
}

// An LSTM node "/lstm/LSTM<suffix>" on the current data with fresh weights.
LstmWeights add_lstm(OnnxModelBuilder& b, const std::string& suffix, int64_t in,
                     const std::string& h0, const std::string& c0, float start) {
  LstmWeights w;
  w.w = b.ramp_weight("W" + suffix, {1, 4 * kHidden, in}, start);
  w.r = b.ramp_weight("R" + suffix, {1, 4 * kHidden, kHidden}, start + 100);
  w.b = b.ramp_weight("B" + suffix, {1, 8 * kHidden}, start + 200);
  b.then("LSTM", "/lstm/LSTM" + suffix, {"W" + suffix, "R" + suffix, "B" + suffix, "", h0, c0}, 3)
      .i("hidden_size", kHidden);
  return w;
}

void expect_lstm_weights(const OnnxImport& m, const std::string& layer, int k, int64_t in,
                         const LstmWeights& w) {
  const std::string l = fmt::format("{}.", layer);
  const NamedTensor& ih = weight(m, fmt::format("{}weight_ih_l{}", l, k));
  const NamedTensor& hh = weight(m, fmt::format("{}weight_hh_l{}", l, k));
  const NamedTensor& bih = weight(m, fmt::format("{}bias_ih_l{}", l, k));
  const NamedTensor& bhh = weight(m, fmt::format("{}bias_hh_l{}", l, k));
  EXPECT_EQ(ih.shape, (std::vector<int64_t>{4 * kHidden, in}));
  EXPECT_EQ(hh.shape, (std::vector<int64_t>{4 * kHidden, kHidden}));
  EXPECT_EQ(bih.shape, (std::vector<int64_t>{4 * kHidden}));
  EXPECT_EQ(bhh.shape, (std::vector<int64_t>{4 * kHidden}));
  expect_gates_reordered(ih.data, w.w.data(), in, "weight_ih");
  expect_gates_reordered(hh.data, w.r.data(), kHidden, "weight_hh");
  // B is [Wb, Rb]: the first half is PyTorch's bias_ih, the second its bias_hh.
  expect_gates_reordered(bih.data, w.b.data(), 1, "bias_ih");
  expect_gates_reordered(bhh.data, w.b.data() + 4 * kHidden, 1, "bias_hh");
}

TEST(OnnxImport, LstmGatesAreReorderedToPyTorchs) {
  // The ONNX → PyTorch gate map by hand: i stays, f was ONNX's third, g (cell) its fourth, o its
  // second.
  EXPECT_EQ(onnx_gate(0), 0);
  EXPECT_EQ(onnx_gate(1), 2);
  EXPECT_EQ(onnx_gate(2), 3);
  EXPECT_EQ(onnx_gate(3), 1);
}

// o, _ = lstm(emb(x)); fc(o[:, -1, :]) with batch_first=True, as torch 1.13 exports it. `table`:
// the embedding's weight, `w`: the LSTM's.
OnnxModelBuilder torch_lstm_on_the_last_step(std::vector<float>* table = nullptr,
                                             LstmWeights* w = nullptr) {
  OnnxModelBuilder b = embedding_front(table);
  const std::string zeros = zero_state(b, 1);
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  const LstmWeights lstm_weights = add_lstm(b, "", kWidth, zeros, zeros, 1.0f);
  if (w) *w = lstm_weights;
  b.constant_ints("/lstm/Constant_3_output_0", {1}, {1});
  b.then("Squeeze", "/lstm/Squeeze", {"/lstm/Constant_3_output_0"});
  b.then("Transpose", "/lstm/Transpose_1").ints("perm", {1, 0, 2});
  b.then("Gather", "/Gather", {"/emb/Constant_output_0"}).i("axis", 1);
  b.ramp_weight("fc.weight", {1, kHidden}, 0.5f);
  b.weight("fc.bias", {1}, {0.125f});
  b.then("Gemm", "/fc/Gemm", {"fc.weight", "fc.bias"}).i("transB", 1);
  return b;
}

TEST(OnnxImport, TorchsLstmOnTheLastStep) {
  std::vector<float> table;
  LstmWeights w;
  OnnxModelBuilder b = torch_lstm_on_the_last_step(&table, &w);
  const OnnxImport m = import(b);
  EXPECT_EQ(m.spec.input, (std::vector<int64_t>{kSteps}));
  expect_layers(m.spec, {embedding(kVocab, kWidth), lstm(kHidden, 1, false), linear(1)});
  EXPECT_EQ(m.spec.loss, LossType::BinaryCrossEntropy);  // one score, no sigmoid
  EXPECT_EQ(m.sources, (std::vector<std::string>{"/emb/Gather", "/lstm/LSTM", "/fc/Gemm"}));
  EXPECT_EQ(weight_names(m),
            (std::vector<std::string>{"0.weight", "1.weight_ih_l0", "1.weight_hh_l0",
                                      "1.bias_ih_l0", "1.bias_hh_l0", "2.weight", "2.bias"}));
  EXPECT_EQ(weight(m, "0.weight").shape, (std::vector<int64_t>{kVocab, kWidth}));
  EXPECT_EQ(weight(m, "0.weight").data, table);
  expect_lstm_weights(m, "1", 0, kWidth, w);
  EXPECT_EQ(weight(m, "2.bias").data, (std::vector<float>{0.125f}));
  EXPECT_EQ(infer_shapes(m.spec).back(), (std::vector<int64_t>{1}));
}

TEST(OnnxImport, StackedLstmNodesAreOneLstmOfTwoLayers) {
  // nn.LSTM(E, H, num_layers=2, batch_first=True), then o.max(dim=1): torch writes one LSTM node
  // per layer, their initial states slices of one ConstantOfShape([2, N, H]).
  OnnxModelBuilder b = embedding_front();
  const std::string zeros = zero_state(b, 2);
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  std::vector<std::string> states;
  for (int k = 0; k < 2; ++k) {
    for (int s = 0; s < 2; ++s) {
      const std::string name = fmt::format("/lstm/Slice_{}_{}", k, s);
      b.constant_ints(name + "/starts", {1}, {k});
      b.constant_ints(name + "/ends", {1}, {k + 1});
      b.constant_ints(name + "/axes", {1}, {0});
      b.node("Slice", name, {zeros, name + "/starts", name + "/ends", name + "/axes"},
             {name + "_output_0"});
      states.push_back(name + "_output_0");
    }
  }
  const LstmWeights l0 = add_lstm(b, "", kWidth, states[0], states[1], 1.0f);
  b.constant_ints("/lstm/axis1", {1}, {1});
  b.then("Squeeze", "/lstm/Squeeze", {"/lstm/axis1"});
  const LstmWeights l1 = add_lstm(b, "_1", kHidden, states[2], states[3], 1000.0f);
  b.then("Squeeze", "/lstm/Squeeze_1", {"/lstm/axis1"});
  b.then("Transpose", "/lstm/Transpose_1").ints("perm", {1, 0, 2});
  b.then("ReduceMax", "/ReduceMax").ints("axes", {1}).i("keepdims", 0);
  add_gemm(b, 3, kHidden, 1);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {embedding(kVocab, kWidth), lstm(kHidden, 2, true),
                         layer(LayerType::GlobalMaxPool), linear(1)});
  EXPECT_EQ(m.sources[1], "/lstm/LSTM, /lstm/LSTM_1");
  EXPECT_EQ(weight_names(m), (std::vector<std::string>{
                                 "0.weight", "1.weight_ih_l0", "1.weight_hh_l0", "1.bias_ih_l0",
                                 "1.bias_hh_l0", "1.weight_ih_l1", "1.weight_hh_l1", "1.bias_ih_l1",
                                 "1.bias_hh_l1", "3.weight", "3.bias"}));
  expect_lstm_weights(m, "1", 0, kWidth, l0);
  expect_lstm_weights(m, "1", 1, kHidden, l1);
  EXPECT_EQ(infer_shapes(m.spec)[1], (std::vector<int64_t>{kSteps, kHidden}));
  EXPECT_EQ(infer_shapes(m.spec)[2], (std::vector<int64_t>{kHidden}));
}

TEST(OnnxImport, ReduceMeanOverTheStepsIsAGlobalAvgPool) {
  OnnxModelBuilder b = embedding_front();
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  add_lstm(b, "", kWidth, "", "", 1.0f);
  b.constant_ints("/lstm/axis1", {1}, {1});
  b.then("Squeeze", "/lstm/Squeeze", {"/lstm/axis1"});
  // Still time first: the mean over axis 0.
  b.then("ReduceMean", "/ReduceMean").ints("axes", {0}).i("keepdims", 0);
  add_gemm(b, 3, kHidden, 4);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {embedding(kVocab, kWidth), lstm(kHidden, 1, true),
                         layer(LayerType::GlobalAvgPool), linear(4)});
}

TEST(OnnxImport, AnEmbeddingAveragedOverItsSteps) {
  // fc(emb(x).mean(dim=1)): no LSTM, the mean over the batch-first sequence.
  std::vector<float> table;
  OnnxModelBuilder b = embedding_front(&table);
  b.then("ReduceMean", "/ReduceMean").ints("axes", {1}).i("keepdims", 0);
  add_gemm(b, 2, kWidth, 2);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {embedding(kVocab, kWidth), layer(LayerType::GlobalAvgPool), linear(2)});
  EXPECT_EQ(weight(m, "0.weight").data, table);
  EXPECT_EQ(infer_shapes(m.spec)[1], (std::vector<int64_t>{kWidth}));
}

TEST(OnnxImport, LstmFinalHiddenStateIsTheLastStep) {
  // _, (h, _) = lstm(x); fc(h.squeeze(0)): the graph continues from Y_h.
  OnnxModelBuilder b = embedding_front();
  const std::string zeros = zero_state(b, 1);
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  const LstmWeights w = add_lstm(b, "", kWidth, zeros, zeros, 1.0f);
  b.set_current("/lstm/LSTM_output_1");
  b.constant_ints("/axis0", {1}, {0});
  b.then("Squeeze", "/Squeeze", {"/axis0"});
  add_gemm(b, 2, kHidden, 3);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {embedding(kVocab, kWidth), lstm(kHidden, 1, false), linear(3)});
  expect_lstm_weights(m, "1", 0, kWidth, w);
  EXPECT_EQ(m.spec.loss, LossType::CrossEntropy);
}

TEST(OnnxImport, BatchFirstLstmLayout) {
  // layout = 1 (opset 14): [N, T, F] in, Y [N, T, 1, H] out, squeezed on axis 2.
  OnnxModelBuilder b = embedding_front();
  LstmWeights w;
  w.w = b.ramp_weight("W", {1, 4 * kHidden, kWidth}, 3.0f);
  w.r = b.ramp_weight("R", {1, 4 * kHidden, kHidden}, 30.0f);
  w.b = b.ramp_weight("B", {1, 8 * kHidden}, 300.0f);
  b.then("LSTM", "/lstm/LSTM", {"W", "R", "B"}, 3).i("hidden_size", kHidden).i("layout", 1);
  b.constant_ints("/axis2", {1}, {2});
  b.then("Squeeze", "/Squeeze", {"/axis2"});
  b.then("ReduceMax", "/ReduceMax").ints("axes", {1}).i("keepdims", 0);
  add_gemm(b, 3, kHidden, 1);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {embedding(kVocab, kWidth), lstm(kHidden, 1, true),
                         layer(LayerType::GlobalMaxPool), linear(1)});
  expect_lstm_weights(m, "1", 0, kWidth, w);
}

// -- the end of the graph: the loss ------------------------------------------------------------

TEST(OnnxImport, TheFinalActivationBecomesTheLoss) {
  struct Case {
    std::string what;
    int64_t opset;
    int64_t outputs;
    std::function<void(OnnxModelBuilder&)> tail;
    LossType loss;
    std::vector<std::string> note;  // empty: no note on the loss
  };
  const auto squeeze = [](OnnxModelBuilder& b, const std::string& name) {
    if (b.proto().opset_import(0).version() >= 13) {
      b.constant_ints(name + "/axes", {1}, {1});
      b.then("Squeeze", name, {name + "/axes"});
    } else {
      b.then("Squeeze", name).ints("axes", {1});
    }
  };
  const std::vector<Case> cases = {
      {"Softmax (opset 14, default axis -1)",
       14,
       3,
       [](auto& b) { b.then("Softmax", "/2/Softmax"); },
       LossType::CrossEntropy,
       {"node '/2/Softmax' (Softmax)", "final Softmax", "cross_entropy"}},
      {"Softmax (opset 11, default axis 1)",
       11,
       3,
       [](auto& b) { b.then("Softmax", "/2/Softmax"); },
       LossType::CrossEntropy,
       {"final Softmax", "cross_entropy"}},
      {"LogSoftmax on axis 1",
       14,
       3,
       [](auto& b) { b.then("LogSoftmax", "/2/LogSoftmax").i("axis", 1); },
       LossType::CrossEntropy,
       {"node '/2/LogSoftmax' (LogSoftmax)", "final LogSoftmax"}},
      {"no activation, 3 scores", 14, 3, [](auto&) {}, LossType::CrossEntropy, {}},
      {"Sigmoid on one score",
       14,
       1,
       [](auto& b) { b.then("Sigmoid", "/2/Sigmoid"); },
       LossType::BinaryCrossEntropy,
       {"node '/2/Sigmoid' (Sigmoid)", "final Sigmoid", "bce"}},
      {"one score, no Sigmoid", 14, 1, [](auto&) {}, LossType::BinaryCrossEntropy, {}},
      {"one score squeezed (opset 14)",
       14,
       1,
       [&](auto& b) { squeeze(b, "/Squeeze"); },
       LossType::BinaryCrossEntropy,
       {}},
      {"one score squeezed (opset 11)",
       11,
       1,
       [&](auto& b) { squeeze(b, "/Squeeze"); },
       LossType::BinaryCrossEntropy,
       {}},
      {"Sigmoid then Squeeze",
       14,
       1,
       [&](auto& b) {
         b.then("Sigmoid", "/2/Sigmoid");
         squeeze(b, "/Squeeze");
       },
       LossType::BinaryCrossEntropy,
       {"final Sigmoid", "bce"}},
      {"Squeeze then Sigmoid",
       14,
       1,
       [&](auto& b) {
         squeeze(b, "/Squeeze");
         b.then("Sigmoid", "/3/Sigmoid");
       },
       LossType::BinaryCrossEntropy,
       {"node '/3/Sigmoid' (Sigmoid)", "bce"}},
      {"Squeeze without axes",
       14,
       1,
       [](auto& b) { b.then("Squeeze", "/Squeeze"); },
       LossType::BinaryCrossEntropy,
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    OnnxModelBuilder b(c.opset);
    b.input("x", {4});
    add_gemm(b, 0, 4, 5);
    b.then("Relu", "/1/Relu");
    add_gemm(b, 2, 5, c.outputs);
    c.tail(b);
    const OnnxImport m = import(b);
    expect_layers(m.spec, {linear(5), layer(LayerType::ReLU), linear(c.outputs)});
    EXPECT_EQ(m.spec.loss, c.loss);
    if (c.note.empty()) {
      EXPECT_TRUE(m.spec.notes.empty()) << m.spec.notes.front();
    } else {
      EXPECT_TRUE(has_note(m.spec, c.note)) << (m.spec.notes.empty() ? "" : m.spec.notes[0]);
    }
    EXPECT_EQ(infer_shapes(m.spec).back(), (std::vector<int64_t>{c.outputs}));
  }
}

TEST(OnnxImport, ASigmoidInsideTheModelIsALayer) {
  OnnxModelBuilder b;
  b.input("x", {4});
  add_gemm(b, 0, 4, 5);
  b.then("Sigmoid", "/1/Sigmoid");
  add_gemm(b, 2, 5, 3);
  b.then("Tanh", "/3/Tanh");
  add_gemm(b, 4, 3, 2);
  const OnnxImport m = import(b);
  expect_layers(
      m.spec, {linear(5), layer(LayerType::Sigmoid), linear(3), layer(LayerType::Tanh), linear(2)});
  EXPECT_TRUE(m.spec.notes.empty());
}

LayerSpec leaky_relu(double negative_slope) {
  LayerSpec l = layer(LayerType::LeakyReLU);
  l.negative_slope = negative_slope;
  return l;
}

// LeakyRelu's alpha is the layer's negative_slope; without one it is ONNX's default, 0.01, which is
// PyTorch's too.
TEST(OnnxImport, LeakyReluTakesItsAlphaAsTheSlope) {
  OnnxModelBuilder b;
  b.input("x", {4});
  add_gemm(b, 0, 4, 5);
  b.then("LeakyRelu", "/1/LeakyRelu").f("alpha", 0.3f);
  add_gemm(b, 2, 5, 3);
  b.then("LeakyRelu", "/3/LeakyRelu");
  add_gemm(b, 4, 3, 2);
  const OnnxImport m = import(b);
  expect_layers(m.spec, {linear(5), leaky_relu(0.3), linear(3), leaky_relu(0.01), linear(2)});
  EXPECT_EQ(m.sources[1], "/1/LeakyRelu");
}

TEST(OnnxImport, RefusesANegativeLeakyReluAlpha) {
  OnnxModelBuilder b;
  b.input("x", {4});
  add_gemm(b, 0, 4, 5);
  b.then("LeakyRelu", "/1/LeakyRelu").f("alpha", -0.5f);
  add_gemm(b, 2, 5, 2);
  const OnnxGraph g = b.parsed(kOrigin);
  const std::string message = testing::user_error([&] { import_onnx(g); });
  for (const char* piece : {kOrigin, "/1/LeakyRelu", "alpha -0.5 is negative"}) {
    EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
}

// -- refusals ----------------------------------------------------------------------------------

struct Refusal {
  std::string what;
  std::function<OnnxModelBuilder()> make;
  std::vector<std::string> expected;  // besides the file's name
};

// x [4] → Gemm "/0/Gemm" (6) → Relu "/1/Relu" → the case's tail.
OnnxModelBuilder mlp_front(int64_t opset = 14) {
  OnnxModelBuilder b(opset);
  b.input("x", {4});
  add_gemm(b, 0, 4, 6);
  b.then("Relu", "/1/Relu");
  return b;
}

// x [2, 8, 8] → Conv "/0/Conv" with a [3, 2, 3, 3] weight and the attributes given.
OnnxModelBuilder conv_with(const std::function<void(testing::OnnxNodeBuilder&)>& attributes,
                           std::vector<int64_t> weight_dims = {3, 2, 3, 3}) {
  OnnxModelBuilder b;
  b.input("x", {2, 8, 8});
  b.ramp_weight("0.weight", weight_dims);
  testing::OnnxNodeBuilder n = b.then("Conv", "/0/Conv", {"0.weight"});
  attributes(n);
  return b;
}

// An LSTM "/lstm/LSTM" on an embedding, with its attributes and initial states given.
OnnxModelBuilder lstm_with(const std::function<void(testing::OnnxNodeBuilder&)>& attributes,
                           const std::function<void(OnnxModelBuilder&)>& states = {}) {
  OnnxModelBuilder b = embedding_front();
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  b.ramp_weight("W", {1, 4 * kHidden, kWidth});
  b.ramp_weight("R", {1, 4 * kHidden, kHidden});
  b.ramp_weight("B", {1, 8 * kHidden});
  if (states) states(b);
  std::vector<std::string> inputs{"W", "R", "B", ""};
  if (states) inputs.insert(inputs.end(), {"h0", "c0"});
  testing::OnnxNodeBuilder n = b.then("LSTM", "/lstm/LSTM", inputs, 3);
  n.i("hidden_size", kHidden);
  attributes(n);
  b.constant_ints("/axis1", {1}, {1});
  b.then("Squeeze", "/lstm/Squeeze", {"/axis1"});
  b.then("ReduceMax", "/ReduceMax").ints("axes", {0}).i("keepdims", 0);
  add_gemm(b, 3, kHidden, 2);
  return b;
}

void expect_refusals(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::string> expected = c.expected;
    expected.insert(expected.begin(), kOrigin);
    OnnxModelBuilder b = c.make();
    const OnnxGraph g = b.parsed(kOrigin);
    const std::string message = testing::user_error([&] { import_onnx(g); });
    for (const std::string& piece : expected) {
      EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
    }
    // The batch dimension is N in messages, never the number the importer evaluates shapes with.
    EXPECT_EQ(message.find("1000003"), std::string::npos) << message;
  }
}

TEST(OnnxImport, RefusesGraphsThatAreNotAChain) {
  expect_refusals({
      {"a residual connection",
       [] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 8});
         b.ramp_weight("0.weight", {2, 2, 3, 3});
         b.ramp_weight("2.weight", {2, 2, 3, 3});
         b.then("Conv", "/0/Conv", {"0.weight"}).ints("pads", {1, 1, 1, 1});
         b.then("Relu", "/1/Relu");
         const std::string skip = b.current();
         b.then("Conv", "/2/Conv", {"2.weight"}).ints("pads", {1, 1, 1, 1});
         b.then("Add", "/3/Add", {skip});
         return b;
       },
       {"branches", "'/1/Relu_output_0'", "node '/2/Conv' (Conv)", "node '/3/Add' (Add)",
        "residual connection"}},
      {"an Add of the data to itself",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Add", "/2/Add", {b.current()});
         return b;
       },
       {"node '/2/Add' (Add)", "residual connection"}},
      {"a node not on the chain",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.output("/1/Relu_output_0");
         b.node("Relu", "/stray/Relu", {"0.weight"}, {"unused"});
         return b;
       },
       {"node '/stray/Relu' (Relu)", "not on the chain", "'x'", "'/1/Relu_output_0'"}},
      {"a chain that does not reach the output",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.output("elsewhere");
         return b;
       },
       {"'/1/Relu_output_0'", "no node uses it", "'elsewhere'"}},
      {"the output feeds another node",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.output("/1/Relu_output_0");
         b.then("Relu", "/2/Relu");
         return b;
       },
       {"'/1/Relu_output_0'", "node '/2/Relu' (Relu)", "ends at the graph's output"}},
      {"two graph inputs",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.input("y", {4});
         return b;
       },
       {"2 inputs", "'x', 'y'", "one input"}},
      {"two graph outputs",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.output("/1/Relu_output_0");
         b.output("/0/Gemm_output_0");
         return b;
       },
       {"2 outputs", "'/1/Relu_output_0', '/0/Gemm_output_0'", "one output"}},
  });
}

TEST(OnnxImport, RefusesWhatItCannotMapExactly) {
  expect_refusals({
      {"an unsupported operator",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Elu", "/2/Elu").f("alpha", 1.0f);
         return b;
       },
       {"node '/2/Elu' (Elu)", "operator Elu is not supported", "Gemm", "Conv",
        "LSTM", "BatchNormalization"}},
      {"an operator of another domain",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("FusedGemm", "/2/FusedGemm").proto().set_domain("com.microsoft");
         return b;
       },
       {"node '/2/FusedGemm' (FusedGemm)", "domain 'com.microsoft'"}},
      {"Gemm with alpha 2",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.then("Gemm", "/0/Gemm", {"w"}).f("alpha", 2.0f).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "alpha and beta", "x·Wᵀ + b"}},
      {"Gemm with beta 0.5",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.ramp_weight("c", {3});
         b.then("Gemm", "/0/Gemm", {"w", "c"}).f("beta", 0.5f).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "alpha and beta"}},
      {"Gemm with transA",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.then("Gemm", "/0/Gemm", {"w"}).i("transA", 1).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "transA"}},
      {"a FLOAT16 weight",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.initializer(testing::raw_tensor<uint16_t>("half.weight", onnx::TensorProto::FLOAT16,
                                                     {3, 4}, std::vector<uint16_t>(12, 0x3c00)));
         b.then("Gemm", "/0/Gemm", {"half.weight"}).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "'half.weight'", "FLOAT16", "expected FLOAT weights"}},
      {"a weight whose width does not match the data",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 5});
         b.then("Gemm", "/0/Gemm", {"w"}).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "'w' [3, 5] takes 5 features, the data has 4"}},
      {"a bias of the wrong size",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.ramp_weight("c", {2});
         b.then("Gemm", "/0/Gemm", {"w", "c"}).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "bias 'c' has the shape [2]", "expected [3]"}},
      {"an unknown attribute on a Gemm",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.then("Gemm", "/0/Gemm", {"w"}).i("transB", 1).i("broadcast", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "attribute 'broadcast' is not supported",
        "alpha, beta, transA, transB"}},
      {"an unknown attribute on a Relu",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Relu", "/2/Relu").f("slope", 0.1f);
         return b;
       },
       {"node '/2/Relu' (Relu)", "attribute 'slope' is not supported", "reads none here"}},
      {"an attribute of the wrong type",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {3, 4});
         b.then("Gemm", "/0/Gemm", {"w"}).f("transB", 1.0f);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "attribute 'transB'", "another type"}},
      {"a Dropout whose mask is used",
       [] {
         OnnxModelBuilder b = mlp_front(13);
         b.then("Dropout", "/2/Dropout", {}, 2);
         b.node("Cast", "/mask/Cast", {"/2/Dropout_output_1"}, {"mask_float"}).i("to", 1);
         add_gemm(b, 3, 6, 2);
         return b;
       },
       {"node '/2/Dropout' (Dropout)", "'/2/Dropout_output_1'", "the dropout mask", "is used"}},
      {"a Dropout ratio of 1",
       [] {
         OnnxModelBuilder b = mlp_front(11);
         b.then("Dropout", "/2/Dropout").f("ratio", 1.0f);
         return b;
       },
       {"node '/2/Dropout' (Dropout)", "ratio 1", "[0, 1)"}},
      {"a Softmax before the end",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Softmax", "/2/Softmax").i("axis", 1);
         add_gemm(b, 3, 6, 2);
         return b;
       },
       {"node '/2/Softmax' (Softmax)", "only as the last node"}},
      {"a Softmax over the batch",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Softmax", "/2/Softmax").i("axis", 0);
         return b;
       },
       {"node '/2/Softmax' (Softmax)", "axis 0", "not the class axis"}},
      {"a Reshape that does not flatten",
       [] {
         OnnxModelBuilder b = cnn_front();
         b.initializer(int64_tensor("target", {3}, {-1, 36, 2}));
         b.then("Reshape", "/Reshape", {"target"});
         return b;
       },
       {"node '/Reshape' (Reshape)", "reshapes [N, 2, 6, 6] to [-1, 36, 2]",
        "flatten each sample to [N, 72]"}},
      {"x.view(x.size(0), 36, 2)",
       [] {
         OnnxModelBuilder b = cnn_front();
         b.node("Shape", "/Shape", {b.current()}, {"shape"});
         b.constant_ints("zero", {1}, {0});
         b.constant_ints("one", {1}, {1});
         b.node("Slice", "/Slice", {"shape", "zero", "one"}, {"batch1"});
         b.constant_ints("rest", {2}, {36, 2});
         b.node("Concat", "/Concat", {"batch1", "rest"}, {"target"}).i("axis", 0);
         b.then("Reshape", "/Reshape", {"target"});
         return b;
       },
       {"node '/Reshape' (Reshape)", "reshapes [N, 2, 6, 6] to [N, 36, 2]"}},
      {"a Transpose of channels",
       [] {
         OnnxModelBuilder b = cnn_front();
         b.then("Transpose", "/Transpose").ints("perm", {0, 2, 3, 1});
         return b;
       },
       {"node '/Transpose' (Transpose)", "perm [0, 2, 3, 1]", "channels-last"}},
      {"a Squeeze of the batch",
       [] {
         OnnxModelBuilder b = mlp_front(11);
         b.then("Squeeze", "/2/Squeeze").ints("axes", {0});
         return b;
       },
       {"node '/2/Squeeze' (Squeeze)", "squeezes axes [0] of data laid out [N, 6]"}},
      {"a ReduceMax over the features",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("ReduceMax", "/2/ReduceMax").ints("axes", {1}).i("keepdims", 0);
         return b;
       },
       {"node '/2/ReduceMax' (ReduceMax)", "reduces axes [1] of data laid out [N, 6]"}},
      {"a Gather of the first step",
       [] {
         OnnxModelBuilder b = embedding_front();
         b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
         add_lstm(b, "", kWidth, "", "", 1.0f);
         b.constant_ints("/axis1", {1}, {1});
         b.then("Squeeze", "/lstm/Squeeze", {"/axis1"});
         b.constant("/first", int64_tensor("", {}, {0}));
         b.then("Gather", "/Gather", {"/first"}).i("axis", 0);
         return b;
       },
       {"node '/Gather' (Gather)", "gathers [0] along axis 0 of data laid out [5, N, 2]",
        "out[:, -1]"}},
  });
}

TEST(OnnxImport, RefusesWindowsItHasNoLayerFor) {
  expect_refusals({
      {"Conv group 2",
       [] {
         return conv_with([](auto& n) { n.i("group", 2); }, {4, 1, 3, 3});
       },
       {"node '/0/Conv' (Conv)", "group = 2", "grouped or depthwise"}},
      {"asymmetric pads",
       [] { return conv_with([](auto& n) {
              n.ints("pads", {0, 0, 1, 1});
            }); },
       {"node '/0/Conv' (Conv)", "pads [0, 0, 1, 1]", "every side equally"}},
      {"dilations",
       [] { return conv_with([](auto& n) {
              n.ints("dilations", {2, 2});
            }); },
       {"node '/0/Conv' (Conv)", "dilations [2, 2]", "not supported"}},
      {"unequal strides",
       [] { return conv_with([](auto& n) {
              n.ints("strides", {1, 2});
            }); },
       {"node '/0/Conv' (Conv)", "strides [1, 2]"}},
      {"a rectangular kernel",
       [] {
         return conv_with([](auto& n) { n.ints("kernel_shape", {3, 1}); }, {3, 2, 3, 1});
       },
       {"node '/0/Conv' (Conv)", "kernel [3, 1]", "square"}},
      {"SAME_UPPER with stride 2 (uneven padding)",
       [] {
         return conv_with([](auto& n) { n.s("auto_pad", "SAME_UPPER").ints("strides", {2, 2}); });
       },
       {"node '/0/Conv' (Conv)", "SAME_UPPER", "unevenly"}},
      {"a weight for other channels",
       [] {
         return conv_with([](auto&) {}, {3, 5, 3, 3});
       },
       {"node '/0/Conv' (Conv)", "[3, 5, 3, 3]", "expected [out, 2, k, k]"}},
      {"a pool with ceil_mode",
       [] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 8});
         b.then("MaxPool", "/0/MaxPool").ints("kernel_shape", {3, 3}).i("ceil_mode", 1);
         return b;
       },
       {"node '/0/MaxPool' (MaxPool)", "ceil_mode"}},
      {"an average leaving the padding out of the count",
       [] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 8});
         b.then("AveragePool", "/0/AveragePool")
             .ints("kernel_shape", {3, 3})
             .ints("pads", {1, 1, 1, 1});
         return b;
       },
       {"node '/0/AveragePool' (AveragePool)", "count_include_pad = 0"}},
      {"MaxPool's indices used",
       [] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 8});
         b.then("MaxPool", "/0/MaxPool", {}, 2).ints("kernel_shape", {2, 2});
         b.node("Cast", "/Cast", {"/0/MaxPool_output_1"}, {"indices"}).i("to", 1);
         return b;
       },
       {"node '/0/MaxPool' (MaxPool)", "arg-max indices"}},
      {"a global pool over a rectangle",
       [] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 6});
         b.then("GlobalAveragePool", "/0/GlobalAveragePool");
         return b;
       },
       {"node '/0/GlobalAveragePool' (GlobalAveragePool)", "8x6", "square"}},
  });
}

TEST(OnnxImport, RefusesLstmsItHasNoLayerFor) {
  expect_refusals({
      {"a bidirectional LSTM",
       [] { return lstm_with([](auto& n) { n.s("direction", "bidirectional"); }); },
       {"node '/lstm/LSTM' (LSTM)", "direction 'bidirectional'",
        "bidirectional LSTM is not "
        "supported"}},
      {"a non-zero initial hidden state",
       [] {
         return lstm_with([](auto&) {},
                          [](OnnxModelBuilder& b) {
                            b.weight("h0", {1, 1, kHidden}, {0.0f, 0.5f});
                            b.weight("c0", {1, 1, kHidden}, {0.0f, 0.0f});
                          });
       },
       {"node '/lstm/LSTM' (LSTM)", "initial hidden state 'h0' is not zero"}},
      {"a non-zero initial cell state from a ConstantOfShape",
       [] {
         return lstm_with([](auto&) {},
                          [](OnnxModelBuilder& b) {
                            b.weight("h0", {1, 1, kHidden}, {0.0f, 0.0f});
                            b.initializer(int64_tensor("state_shape", {3}, {1, 1, kHidden}));
                            b.node("ConstantOfShape", "/c0", {"state_shape"}, {"c0"})
                                .t("value", float_tensor("", {1}, {1.0f}));
                          });
       },
       {"node '/lstm/LSTM' (LSTM)", "initial cell state 'c0' is not zero"}},
      {"other activations",
       [] {
         return lstm_with([](auto& n) { n.strings("activations", {"Sigmoid", "Relu", "Tanh"}); });
       },
       {"node '/lstm/LSTM' (LSTM)", "activations [Sigmoid, Relu, Tanh]"}},
      {"the final cell state used",
       [] {
         OnnxModelBuilder b = embedding_front();
         b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
         add_lstm(b, "", kWidth, "", "", 1.0f);
         b.set_current("/lstm/LSTM_output_2");
         b.constant_ints("/axis0", {1}, {0});
         b.then("Squeeze", "/Squeeze", {"/axis0"});
         add_gemm(b, 2, kHidden, 2);
         return b;
       },
       {"node '/lstm/LSTM' (LSTM)", "output 2", "Y_c"}},
      {"both every step and the last state used",
       [] {
         OnnxModelBuilder b = embedding_front();
         b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
         add_lstm(b, "", kWidth, "", "", 1.0f);
         b.node("Relu", "/h/Relu", {"/lstm/LSTM_output_1"}, {"h"});
         return b;
       },
       {"node '/lstm/LSTM' (LSTM)", "both Y (every step) and Y_h", "out[:, -1]"}},
      {"peepholes",
       [] {
         OnnxModelBuilder b = embedding_front();
         b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
         b.ramp_weight("W", {1, 4 * kHidden, kWidth});
         b.ramp_weight("R", {1, 4 * kHidden, kHidden});
         b.ramp_weight("P", {1, 3 * kHidden});
         b.then("LSTM", "/lstm/LSTM", {"W", "R", "", "", "", "", "P"}, 3).i("hidden_size", kHidden);
         return b;
       },
       {"node '/lstm/LSTM' (LSTM)", "peepholes"}},
      {"without the Transpose to time first",
       [] {
         OnnxModelBuilder b = embedding_front();
         b.ramp_weight("W", {1, 4 * kHidden, kWidth});
         b.ramp_weight("R", {1, 4 * kHidden, kHidden});
         b.then("LSTM", "/lstm/LSTM", {"W", "R"}, 3).i("hidden_size", kHidden);
         return b;
       },
       {"node '/lstm/LSTM' (LSTM)", "layout 0", "[T, N, F]"}},
      {"token ids into a Gemm",
       [] {
         OnnxModelBuilder b;
         b.input("ids", {kSteps}, onnx::TensorProto::INT64);
         b.ramp_weight("w", {3, kSteps});
         b.then("Gemm", "/0/Gemm", {"w"}).i("transB", 1);
         return b;
       },
       {"node '/0/Gemm' (Gemm)", "token ids", "Gather"}},
  });
}

TEST(OnnxImport, RefusesModelsOutsideTheOpsetsAndInputsItReads) {
  const auto opset = [](int64_t version) {
    return [version] {
      OnnxModelBuilder b(version);
      b.input("x", {4});
      add_gemm(b, 0, 4, 2);
      return b;
    };
  };
  expect_refusals({
      {"opset 8", opset(8), {"ONNX opset 8", "opsets 9 to 17", "opset_version"}},
      {"opset 18", opset(18), {"ONNX opset 18", "opsets 9 to 17"}},
      {"no default opset",
       [opset] {
         OnnxModelBuilder b = opset(14)();
         b.proto().mutable_opset_import(0)->set_domain("ai.onnx.ml");
         return b;
       },
       {"no standard ONNX operator set"}},
      {"a dynamic sequence length",
       [] {
         OnnxModelBuilder b;
         b.input("x", {kSteps}, onnx::TensorProto::INT64);
         b.graph()
             .mutable_input(0)
             ->mutable_type()
             ->mutable_tensor_type()
             ->mutable_shape()
             ->mutable_dim(1)
             ->set_dim_param("seq");
         b.ramp_weight("emb", {kVocab, kWidth});
         b.node("Gather", "/emb/Gather", {"emb", "x"}, {"e"});
         return b;
       },
       {"input 'x'", "dimension 1 is 'seq'", "sequence length", "dynamic_axes"}},
      {"a dynamic image side",
       [] {
         OnnxModelBuilder b = conv_with([](auto&) {});
         b.graph()
             .mutable_input(0)
             ->mutable_type()
             ->mutable_tensor_type()
             ->mutable_shape()
             ->mutable_dim(3)
             ->clear_dim_value();
         return b;
       },
       {"input 'x'", "dimension 3 is unknown"}},
      {"an input without a shape",
       [opset] {
         OnnxModelBuilder b = opset(14)();
         b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
         return b;
       },
       {"input 'x'", "no shape"}},
      {"an input of booleans",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4}, onnx::TensorProto::BOOL);
         return b;
       },
       {"input 'x' holds BOOL", "FLOAT features, or INT64 token ids"}},
  });
}

TEST(OnnxImport, RefusesGraphsOutOfOrderOrWithCycles) {
  // ONNX lists nodes in topological order, each tensor computed once; a damaged or hand-made file
  // that does not must be refused, not followed round a cycle.
  expect_refusals({
      {"a node that feeds itself",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.ramp_weight("w", {4, 4});
         b.node("Gemm", "/loop/Gemm", {"y", "w"}, {"y"}).i("transB", 1);
         b.output("y");
         return b;
       },
       {"node '/loop/Gemm' (Gemm)", "'y'", "topological order"}},
      {"a cycle through the data",
       [] {
         OnnxModelBuilder b;
         b.input("x", {4});
         b.node("Relu", "/0/Relu", {"x"}, {"a"});
         b.node("Relu", "/1/Relu", {"a"}, {"x"});
         b.output("never");
         return b;
       },
       {"node '/1/Relu' (Relu)", "'x'", "computed twice"}},
      {"a cycle among constants",
       [] {
         OnnxModelBuilder b = cnn_front();
         b.constant_ints("one", {1}, {1});
         b.node("Add", "/a", {"b", "one"}, {"a"});
         b.node("Add", "/b", {"a", "one"}, {"b"});
         b.then("Reshape", "/Reshape", {"a"});
         return b;
       },
       {"node '/a' (Add)", "'b'", "topological order"}},
      {"an input nothing computes",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.then("Reshape", "/2/Reshape", {"nowhere"});
         return b;
       },
       {"node '/2/Reshape' (Reshape)", "'nowhere'", "topological order"}},
      {"a tensor computed twice",
       [] {
         OnnxModelBuilder b = mlp_front();
         b.node("Relu", "/twice/Relu", {"x"}, {"/1/Relu_output_0"});
         return b;
       },
       {"node '/twice/Relu' (Relu)", "'/1/Relu_output_0'", "computed twice"}},
  });
}

TEST(OnnxImport, RefusesSizesPastWhatItsShapeArithmeticHolds) {
  // ONNX bounds neither the input's dimensions nor a window's attributes: sizes that would
  // overflow the shape arithmetic are refused with the node, never computed with.
  const int64_t huge = int64_t{1} << 62;
  expect_refusals({
      {"an input of 2^80 values per sample",
       [] {
         OnnxModelBuilder b;
         b.input("x", {int64_t{1} << 40, int64_t{1} << 40});
         b.then("Flatten", "/0/Flatten").i("axis", 1);
         return b;
       },
       {"input 'x'", "[1099511627776, 1099511627776]", "2^31"}},
      {"pads of 2^62",
       [huge] { return conv_with([&](auto& n) {
                  n.ints("pads", {huge, huge, huge, huge});
                }); },
       {"node '/0/Conv' (Conv)", "pads", "2^24"}},
      {"a pool kernel of 2^62",
       [huge] {
         OnnxModelBuilder b;
         b.input("x", {2, 8, 8});
         b.then("MaxPool", "/0/MaxPool").ints("kernel_shape", {huge, huge});
         return b;
       },
       {"node '/0/MaxPool' (MaxPool)", "kernel", "2^24"}},
      {"negative pads",
       [] { return conv_with([](auto& n) {
              n.ints("pads", {-1, -1, -1, -1});
            }); },
       {"node '/0/Conv' (Conv)", "pads [-1, -1, -1, -1]"}},
      {"an LSTM hidden_size of 2^62",
       [huge] { return lstm_with([&](auto& n) { n.proto().mutable_attribute(0)->set_i(huge); }); },
       {"node '/lstm/LSTM' (LSTM)", "hidden_size 4611686018427387904"}},
      {"an LSTM without biases",
       [] { return lstm_with([](auto& n) { n.proto().set_input(3, ""); }); },
       {"node '/lstm/LSTM' (LSTM)", "has no bias B", "bias=True"}},
      {"a negative LSTM hidden_size",
       [] { return lstm_with([](auto& n) { n.proto().mutable_attribute(0)->set_i(-2); }); },
       {"node '/lstm/LSTM' (LSTM)", "hidden_size -2"}},
  });
}

TEST(OnnxImport, AnInputStraightToTheOutputMapsToNoLayer) {
  OnnxModelBuilder b;
  b.input("x", {4});
  b.then("Identity", "/Identity");
  expect_user_error([&] { import(b); }, {kOrigin, "no layer"});
}

// -- load_onnx_spec: the training file beside the model ----------------------------------------

// x [4] → Gemm(8) → Relu → Gemm(3): a classifier of 3 classes, written as `name`.onnx.
std::filesystem::path write_classifier(const std::filesystem::path& dir,
                                       const std::string& name = "model") {
  OnnxModelBuilder b;
  b.input("x", {4});
  add_gemm(b, 0, 4, 8);
  b.then("Relu", "/1/Relu");
  add_gemm(b, 2, 8, 3);
  const std::filesystem::path path = dir / (name + ".onnx");
  b.write(path);
  return path;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(OnnxSpec, TheTrainingFileBesideTheModelSetsTrainAndData) {
  const testing::TempDir dir("onnx_spec");
  const auto model = write_classifier(dir.path());
  write_text(dir / "model.toml", R"([model]
name = "mine"
loss = "cross_entropy"

[train]
epochs = 3
batch = 4
seed = 9
optimizer = { type = "adam", lr = 0.01 }

[data]
source = "csv:data/points.csv"
)");
  const ModelSpec spec = load_onnx_spec(model);
  EXPECT_EQ(spec.name, "mine");
  EXPECT_EQ(spec.init, model.string());
  EXPECT_EQ(spec.origin, model.string());
  EXPECT_EQ(spec.train.epochs, 3);
  EXPECT_EQ(spec.train.batch, 4);
  EXPECT_EQ(spec.train.seed, 9u);
  EXPECT_EQ(spec.train.optimizer.type, OptimizerType::Adam);
  EXPECT_EQ(spec.train.optimizer.lr, 0.01);
  // Relative to the training file's folder, as in a spec.
  EXPECT_EQ(spec.data.source, "csv:" + (dir.path() / "data/points.csv").string());
  EXPECT_EQ(spec.loss, LossType::CrossEntropy);
  expect_layers(spec, {linear(8), layer(LayerType::ReLU), linear(3)});
  EXPECT_FALSE(has_note(spec, {"defaults"}));
}

TEST(OnnxSpec, WithoutATrainingFileTheDefaultsAndNoData) {
  const testing::TempDir dir("onnx_spec");
  const auto model = write_classifier(dir.path(), "net");
  const ModelSpec spec = load_onnx_spec(model);
  EXPECT_EQ(spec.name, "net");
  const ModelSpec defaults;
  EXPECT_EQ(spec.train.epochs, defaults.train.epochs);
  EXPECT_EQ(spec.train.batch, defaults.train.batch);
  EXPECT_TRUE(has_note(spec, {"no net.toml beside it", "defaults", "--data"}));
  EXPECT_TRUE(spec.data.source.empty());
  // Training it without data names the model and what to write.
  expect_user_error([&] { load_data(spec.data, data_request(spec, 3)); },
                    {model.string(), "no data to train on", "[data]", "--data"});
  // resolve_spec takes the path the same way.
  const ModelSpec resolved = resolve_spec(model.string());
  EXPECT_EQ(resolved.init, model.string());
  expect_layers(resolved, {linear(8), layer(LayerType::ReLU), linear(3)});
}

TEST(OnnxSpec, TheTrainingFileMayNotSetTheModel) {
  const testing::TempDir dir("onnx_spec");
  const auto model = write_classifier(dir.path());
  struct Case {
    std::string what, toml;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"layers",
       "[model]\nloss = \"cross_entropy\"\nlayers = [{ type = \"linear\", out = 2 }]\n",
       {"model.toml:3", "layers", model.string(), "[train], [data] and model.loss only"}},
      {"the input", "[model]\ninput = [4]\n", {"model.toml:2", "input shape", model.string()}},
      {"initial weights",
       "[model]\ninit = \"w.safetensors\"\n",
       {"model.toml:2", "initial weights", model.string()}},
      {"an unknown table", "[optimizer]\nlr = 1\n", {"model.toml", "optimizer"}},
      {"a loss its output cannot take",
       "[model]\nloss = \"bce\"\n",
       {model.string(), "bce needs the last layer to output one score", "[3]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    write_text(dir / "model.toml", c.toml);
    expect_user_error([&] { load_onnx_spec(model); }, c.expected);
  }
}

TEST(OnnxSpec, TheLossOfABinaryModelFromTheTrainingFile) {
  // One score and a final Sigmoid: bce; a training file that says cross_entropy is refused, one
  // that says bce is taken.
  const testing::TempDir dir("onnx_spec");
  OnnxModelBuilder b;
  b.input("x", {4});
  add_gemm(b, 0, 4, 1);
  b.then("Sigmoid", "/1/Sigmoid");
  b.write(dir / "binary.onnx");
  write_text(dir / "binary.toml", "[model]\nloss = \"bce\"\n");
  EXPECT_EQ(load_onnx_spec(dir / "binary.onnx").loss, LossType::BinaryCrossEntropy);
  write_text(dir / "binary.toml", "[model]\nloss = \"cross_entropy\"\n");
  expect_user_error([&] { load_onnx_spec(dir / "binary.onnx"); },
                    {(dir / "binary.onnx").string(), "cross_entropy", "at least 2", "[1]"});
}

// -- initialize: the model starts from the file's weights --------------------------------------

void expect_model_holds(const ModelSpec& spec, const std::vector<NamedTensor>& weights) {
  auto be = make_backend(parse_device("cpu", 1));
  Model model(spec, *be);
  initialize(model);
  const std::vector<NamedTensor> state = model.export_params();
  ASSERT_EQ(state.size(), weights.size());
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : state) by_name[t.name] = &t;
  int64_t trained = 0;
  for (const NamedTensor& w : weights) {
    SCOPED_TRACE(w.name);
    ASSERT_TRUE(by_name.count(w.name));
    const NamedTensor& t = *by_name[w.name];
    EXPECT_EQ(t.shape, w.shape);
    EXPECT_EQ(t.dtype, w.dtype);
    ASSERT_EQ(t.data.size(), w.data.size());
    EXPECT_EQ(0, std::memcmp(t.data.data(), w.data.data(), sizeof(float) * w.data.size()));
    const bool buffer = w.name.find("running_") != std::string::npos ||
                        w.name.find("num_batches_tracked") != std::string::npos;
    if (!buffer) trained += static_cast<int64_t>(w.data.size());
  }
  EXPECT_EQ(parameter_count(spec), trained);
  EXPECT_EQ(model.parameter_count(), trained);
}

TEST(OnnxInitialize, ACnnWithBatchNormStartsFromTheFilesWeights) {
  const testing::TempDir dir("onnx_init");
  OnnxModelBuilder b;
  b.input("input", {1, 6, 6});
  b.ramp_weight("0.weight", {4, 1, 3, 3}, -2.0f);
  b.then("Conv", "/0/Conv", {"0.weight"}).ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1});
  b.ramp_weight("1.weight", {4}, 1.0f);
  b.ramp_weight("1.bias", {4}, 0.0f);
  b.ramp_weight("1.running_mean", {4}, 0.5f);
  b.ramp_weight("1.running_var", {4}, 3.0f);
  b.then("BatchNormalization", "/1/BatchNormalization",
         {"1.weight", "1.bias", "1.running_mean", "1.running_var"}, 3)
      .f("epsilon", 1e-5f)
      .f("momentum", 0.9f)
      .i("training_mode", 1);
  b.then("Relu", "/2/Relu");
  b.then("MaxPool", "/3/MaxPool").ints("kernel_shape", {2, 2}).ints("strides", {2, 2});
  b.then("Flatten", "/4/Flatten").i("axis", 1);
  add_gemm(b, 5, 36, 3);
  b.write(dir / "cnn.onnx");
  const ModelSpec spec = load_onnx_spec(dir / "cnn.onnx");
  const OnnxImport imported = import_onnx(read_onnx(dir / "cnn.onnx"));
  EXPECT_EQ(imported.weights.size(), 8u);
  expect_model_holds(spec, imported.weights);
  // load_initial_weights reads the ONNX file's initializers the same way.
  const std::vector<NamedTensor> initial = load_initial_weights(dir / "cnn.onnx");
  ASSERT_EQ(initial.size(), imported.weights.size());
  for (size_t i = 0; i < initial.size(); ++i) {
    EXPECT_EQ(initial[i].name, imported.weights[i].name);
    EXPECT_EQ(initial[i].data, imported.weights[i].data);
  }
}

TEST(OnnxInitialize, AStackedLstmStartsFromTheFilesWeights) {
  const testing::TempDir dir("onnx_init");
  OnnxModelBuilder b = embedding_front();
  b.then("Transpose", "/lstm/Transpose").ints("perm", {1, 0, 2});
  add_lstm(b, "", kWidth, "", "", 1.0f);
  b.constant_ints("/lstm/axis1", {1}, {1});
  b.then("Squeeze", "/lstm/Squeeze", {"/lstm/axis1"});
  add_lstm(b, "_1", kHidden, "", "", -3.0f);
  b.then("Squeeze", "/lstm/Squeeze_1", {"/lstm/axis1"});
  b.then("Transpose", "/lstm/Transpose_1").ints("perm", {1, 0, 2});
  b.then("Gather", "/Gather", {"/emb/Constant_output_0"}).i("axis", 1);
  add_gemm(b, 2, kHidden, 1);
  b.write(dir / "lstm.onnx");
  const ModelSpec spec = load_onnx_spec(dir / "lstm.onnx");
  expect_layers(spec, {embedding(kVocab, kWidth), lstm(kHidden, 2, false), linear(1)});
  const OnnxImport imported = import_onnx(read_onnx(dir / "lstm.onnx"));
  EXPECT_EQ(imported.weights.size(), 11u);
  expect_model_holds(spec, imported.weights);
}

// -- imported models on the GPU ----------------------------------------------------------------

// The import tests' models, trained from their imported weights on the CPU and on the GPU: the
// same per-epoch losses and final weights (the GPU's kernels are golden against the CPU's; here
// the spec and weights come from the importer: its layer notes, BatchNorm momentum, LSTM gate
// order and bias split).
struct ImportedCase {
  std::string name;
  OnnxModelBuilder (*build)();  // one of the import tests' models
  int64_t vocab = 0;  // > 0: the inputs are token ids below it
};

void PrintTo(const ImportedCase& c, std::ostream* os) { *os << c.name; }

OnnxModelBuilder imported_cnn_batchnorm() {  // the flatten tests' CNN with a BatchNorm2d
  OnnxModelBuilder b = cnn_front();
  b.ramp_weight("bn.weight", {2}, 1.0f);
  b.ramp_weight("bn.bias", {2}, -1.0f);
  b.ramp_weight("bn.running_mean", {2}, 0.125f);
  b.ramp_weight("bn.running_var", {2}, 2.0f);
  b.then("BatchNormalization", "/bn/BatchNormalization",
         {"bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, 3)
      .f("epsilon", 1e-5f)
      .f("momentum", 0.9f)
      .i("training_mode", 1);
  b.then("Flatten", "/Flatten").i("axis", 1);
  add_gemm(b, 4, 72, 3);
  return b;
}

// The ramps tell weights apart but are far too large to train from: each value v becomes
// 0.4 sin(v + i) (a variance 0.5 + 0.25 sin(...), kept positive), the count of batches kept.
std::vector<NamedTensor> trainable(std::vector<NamedTensor> weights) {
  for (NamedTensor& t : weights) {
    if (t.name.find("num_batches_tracked") != std::string::npos) continue;
    const bool variance = t.name.find("running_var") != std::string::npos;
    for (size_t i = 0; i < t.data.size(); ++i) {
      const float s = std::sin(t.data[i] + static_cast<float>(i));
      t.data[i] = variance ? 0.5f + 0.25f * s : 0.4f * s;
    }
  }
  return weights;
}

struct ImportedRun {
  TrainResult result;
  std::vector<float> params;
};

ImportedRun train_imported(const std::string& device, const ImportedCase& c) {
  OnnxModelBuilder b = c.build();
  OnnxImport m = import(b);
  m.spec.train.batch = 8;
  m.spec.train.epochs = 3;
  m.spec.train.shuffle = true;
  m.spec.train.optimizer.lr = 0.05;
  auto be = make_backend(parse_device(device, 0));
  Model model(m.spec, *be);
  model.import_params(trainable(m.weights), kOrigin);
  Dataset d;
  d.samples = 30;  // not a multiple of the batch: the partial last batch runs too
  d.features = model.input_features();
  d.classes = model.classes();
  Rng rng(7);
  d.x.resize(static_cast<size_t>(d.samples * d.features));
  for (float& v : d.x) {
    v = c.vocab > 0 ? static_cast<float>(rng.below(static_cast<uint64_t>(c.vocab)))
                    : static_cast<float>(rng.uniform(-1, 1));
  }
  for (int64_t i = 0; i < d.samples; ++i) d.y.push_back(static_cast<int32_t>(i % d.classes));
  ImportedRun run{train_model(model, d, m.spec.train), {}};
  run.params.resize(static_cast<size_t>(model.flat_size()));
  be->download(run.params.data(), model.params(), sizeof(float) * run.params.size());
  return run;
}

class OnnxImportOnTheGpu : public ::testing::TestWithParam<ImportedCase> {};

TEST_P(OnnxImportOnTheGpu, TrainsAsOnTheCpu) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  const ImportedRun cpu = train_imported("cpu", GetParam());
  const ImportedRun gpu = train_imported("cuda", GetParam());
  EXPECT_TRUE(gpu.result.recorded_step);
  ASSERT_EQ(cpu.result.epochs.size(), 3u);
  ASSERT_EQ(gpu.result.epochs.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_TRUE(std::isfinite(cpu.result.epochs[e].loss));
    EXPECT_NEAR(gpu.result.epochs[e].loss, cpu.result.epochs[e].loss,
                1e-4 * std::abs(cpu.result.epochs[e].loss))
        << "epoch " << e + 1;
  }
  ASSERT_EQ(cpu.params.size(), gpu.params.size());
  EXPECT_LT(testing::max_relative_difference(cpu.params, gpu.params), 1e-4);
}

// Runs everywhere: each case imports and trains to finite losses on the CPU.
TEST_P(OnnxImportOnTheGpu, CaseTrainsOnTheCpu) {
  const ImportedRun cpu = train_imported("cpu", GetParam());
  ASSERT_EQ(cpu.result.epochs.size(), 3u);
  EXPECT_TRUE(std::isfinite(cpu.result.final_loss));
}

INSTANTIATE_TEST_SUITE_P(
    Models, OnnxImportOnTheGpu,
    ::testing::Values(ImportedCase{"mlp", [] { return torch_mlp_in_eval_mode(); }},
                      ImportedCase{"cnn_batchnorm", imported_cnn_batchnorm},
                      ImportedCase{"lstm", [] { return torch_lstm_on_the_last_step(); }, kVocab}),
    [](const auto& case_info) { return case_info.param.name; });

}  // namespace
}  // namespace xo

// The ONNX reader: ModelProtos built here, serialised and read back through parse_onnx, and bad
// files refused with the file's name and what was expected.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "io/onnx.h"
#include "support/expect_error.h"
#include "support/onnx_builder.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using testing::expect_user_error;
using testing::float_tensor;
using testing::int64_tensor;
using testing::OnnxModelBuilder;

constexpr const char* kOrigin = "nets/model.onnx";

// A small valid model: x [batch, 3] → Gemm(w [2, 3], b [2]) → y.
OnnxModelBuilder small_model() {
  OnnxModelBuilder b;
  b.input("x", {3});
  b.weight("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.weight("b", {2}, {0.5f, -0.5f});
  b.then("Gemm", "/0/Gemm", {"w", "b"}).i("transB", 1);
  return b;
}

// A model whose one initializer is `t`, read back.
OnnxGraph with_initializer(const onnx::TensorProto& t) {
  OnnxModelBuilder b = small_model();
  b.initializer(t);
  return b.parsed(kOrigin);
}

TEST(OnnxReader, ReadsTheGraphItsNodesAndInitializers) {
  const OnnxGraph g = small_model().parsed(kOrigin);
  EXPECT_EQ(g.origin, kOrigin);
  EXPECT_EQ(g.ir_version, 8);
  EXPECT_EQ(g.opset, 14);
  EXPECT_TRUE(g.other_domains.empty());
  EXPECT_EQ(g.producer, "pytorch 1.13.0");
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "x");
  EXPECT_EQ(g.inputs[0].type, kOnnxFloat);
  EXPECT_TRUE(g.inputs[0].has_shape);
  ASSERT_EQ(g.inputs[0].dims.size(), 2u);
  EXPECT_EQ(g.inputs[0].dims[0].value, -1);
  EXPECT_EQ(g.inputs[0].dims[0].param, "batch");
  EXPECT_EQ(g.inputs[0].dims[1].value, 3);
  EXPECT_EQ(g.inputs[0].dims[1].param, "");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].name, "/0/Gemm_output_0");
  ASSERT_EQ(g.nodes.size(), 1u);
  const OnnxNode& n = g.nodes[0];
  EXPECT_EQ(n.name, "/0/Gemm");
  EXPECT_EQ(n.op_type, "Gemm");
  EXPECT_EQ(n.inputs, (std::vector<std::string>{"x", "w", "b"}));
  EXPECT_EQ(n.outputs, (std::vector<std::string>{"/0/Gemm_output_0"}));
  EXPECT_EQ(n.described(), "node '/0/Gemm' (Gemm)");
  ASSERT_NE(n.attribute("transB"), nullptr);
  EXPECT_EQ(n.attribute("transB")->i, 1);
  EXPECT_EQ(n.attribute("alpha"), nullptr);
  ASSERT_EQ(g.initializers.size(), 2u);
  const OnnxTensor* w = g.initializer("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->type, kOnnxFloat);
  EXPECT_EQ(w->floats, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(w->ints.empty());
  EXPECT_EQ(w->size(), 6);
  EXPECT_EQ(g.initializer("b")->floats, (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(g.initializer("nothing"), nullptr);
}

TEST(OnnxReader, ReadsAFileFromDisc) {
  const testing::TempDir dir("onnx_read");
  small_model().write(dir / "m.onnx");
  const OnnxGraph g = read_onnx(dir / "m.onnx");
  EXPECT_EQ(g.origin, (dir / "m.onnx").string());
  EXPECT_EQ(g.nodes.size(), 1u);
  expect_user_error([&] { read_onnx(dir / "absent.onnx"); }, {"absent.onnx"});
}

TEST(OnnxReader, NodeWithoutANameIsDescribedByItsOutput) {
  OnnxModelBuilder b;
  b.input("x", {3});
  b.node("Relu", "", {"x"}, {"r"});
  EXPECT_EQ(b.parsed().nodes[0].described(), "node 'r' (Relu)");
}

// -- bytes that are not a model -----------------------------------------------------------------

TEST(OnnxReader, RefusesBytesThatAreNotAModel) {
  std::string valid = small_model().bytes();
  struct Case {
    std::string what, bytes;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"text", "this is a text file, not an ONNX model\n", {kOrigin, "not an ONNX model"}},
      {"truncated file", valid.substr(0, valid.size() - 7), {kOrigin, "not an ONNX model"}},
      {"half a file", valid.substr(0, valid.size() / 2), {kOrigin, "not an ONNX model"}},
      {"invalid wire type", std::string("\x0f\x01\x02\x03", 4), {kOrigin, "not an ONNX model"}},
      // Protobuf reads no bytes as a message with nothing set: a model without a graph.
      {"empty file", "", {kOrigin, "without a graph"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_user_error([&] { parse_onnx(c.bytes, kOrigin); }, c.expected);
  }
}

TEST(OnnxReader, RefusesAModelWithoutAGraph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  std::string bytes;
  m.SerializeToString(&bytes);
  expect_user_error([&] { parse_onnx(bytes, kOrigin); }, {kOrigin, "without a graph"});
}

// -- tensors -----------------------------------------------------------------------------------

TEST(OnnxReader, TensorsWhoseDataDoesNotMatchTheirShapeAreRefused) {
  struct Case {
    std::string what;
    std::function<onnx::TensorProto()> make;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      {"raw_data too short",
       [] {
         onnx::TensorProto t = float_tensor("short", {2, 3}, {1, 2, 3, 4, 5});
         return t;
       },
       {kOrigin, "tensor 'short'", "raw_data holds 20 bytes", "needs 24"}},
      {"raw_data too long",
       [] {
         return float_tensor("long", {2}, {1, 2, 3});
       },
       {kOrigin, "tensor 'long'", "raw_data holds 12 bytes", "needs 8"}},
      {"raw int64 of a wrong size",
       [] {
         onnx::TensorProto t = int64_tensor("ids", {3}, {1, 2, 3});
         t.mutable_raw_data()->pop_back();
         return t;
       },
       {kOrigin, "tensor 'ids'", "raw_data holds 23 bytes", "needs 24"}},
      {"float_data count",
       [] {
         onnx::TensorProto t;
         t.set_name("typed");
         t.set_data_type(onnx::TensorProto::FLOAT);
         t.add_dims(4);
         for (float v : {1.0f, 2.0f, 3.0f}) t.add_float_data(v);
         return t;
       },
       {kOrigin, "tensor 'typed'", "3 values stored", "[4] needs 4"}},
      {"int64_data count",
       [] {
         onnx::TensorProto t;
         t.set_name("shape");
         t.set_data_type(onnx::TensorProto::INT64);
         t.add_dims(1);
         t.add_int64_data(1);
         t.add_int64_data(2);
         return t;
       },
       {kOrigin, "tensor 'shape'", "2 values stored", "[1] needs 1"}},
      {"a scalar without a value",
       [] {
         onnx::TensorProto t;
         t.set_name("scalar");
         t.set_data_type(onnx::TensorProto::FLOAT);
         return t;
       },
       {kOrigin, "tensor 'scalar'", "0 values stored", "needs 1"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_user_error([&] { with_initializer(c.make()); }, c.expected);
  }
}

TEST(OnnxReader, ShapesThatAreNegativeOrOverflowAreRefused) {
  const int64_t big = int64_t{1} << 40;
  const int64_t max = std::numeric_limits<int64_t>::max();
  struct Case {
    std::string what;
    std::vector<int64_t> dims;
    std::string shape;
  };
  const std::vector<Case> cases = {
      {"negative", {2, -3}, "[2, -3]"},
      {"minus one", {-1}, "[-1]"},
      {"product overflows int64", {big, big}, fmt::format("[{}, {}]", big, big)},
      {"product wraps to a small number", {max, 2, 0}, fmt::format("[{}, 2, 0]", max)},
      {"past 2^31 elements", {int64_t{1} << 16, int64_t{1} << 16}, "[65536, 65536]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    onnx::TensorProto t;
    t.set_name("huge");
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : c.dims) t.add_dims(d);
    t.set_raw_data("");  // never read: the shape is refused first
    expect_user_error([&] { with_initializer(t); },
                      {kOrigin, "tensor 'huge'", "shape " + c.shape, "non-negative dimensions"});
  }
  // In a Constant node's tensor too: attributes are read through the same checks.
  OnnxModelBuilder b = small_model();
  onnx::TensorProto t = int64_tensor("", {big, big}, {});
  b.constant("c", t);
  expect_user_error([&] { b.parsed(kOrigin); }, {kOrigin, "non-negative dimensions"});
}

TEST(OnnxReader, TooManyDimensionsAreRefused) {
  onnx::TensorProto t;
  t.set_name("deep");
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 33; ++i) t.add_dims(1);
  t.add_float_data(1);
  expect_user_error([&] { with_initializer(t); }, {kOrigin, "tensor 'deep'", "33 dimensions"});
}

TEST(OnnxReader, ExternalDataIsRefused) {
  onnx::TensorProto t;
  t.set_name("big.weight");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  onnx::StringStringEntryProto* e = t.add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  expect_user_error([&] { with_initializer(t); },
                    {kOrigin, "tensor 'big.weight'", "external file"});
}

TEST(OnnxReader, DoubleIsReadAsFloat) {
  onnx::TensorProto raw =
      testing::raw_tensor<double>("raw", onnx::TensorProto::DOUBLE, {3}, {0.1, -2.5, 1e-5});
  OnnxGraph g = with_initializer(raw);
  const OnnxTensor* t = g.initializer("raw");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, kOnnxDouble);
  EXPECT_TRUE(t->is_float());
  EXPECT_FALSE(t->is_integer());
  EXPECT_EQ(t->floats, (std::vector<float>{0.1f, -2.5f, 1e-5f}));

  onnx::TensorProto typed;
  typed.set_name("typed");
  typed.set_data_type(onnx::TensorProto::DOUBLE);
  typed.add_dims(2);
  typed.add_double_data(0.3);
  typed.add_double_data(4.0);
  g = with_initializer(typed);
  EXPECT_EQ(g.initializer("typed")->floats, (std::vector<float>{0.3f, 4.0f}));
}

TEST(OnnxReader, IntegerTensorsKeepTheirValues) {
  const int64_t big = int64_t{1} << 40;
  OnnxGraph g = with_initializer(int64_tensor("i64", {2, 2}, {-1, 0, big, 7}));
  const OnnxTensor* t = g.initializer("i64");
  EXPECT_EQ(t->type, kOnnxInt64);
  EXPECT_TRUE(t->is_integer());
  EXPECT_EQ(t->ints, (std::vector<int64_t>{-1, 0, big, 7}));
  EXPECT_TRUE(t->floats.empty());

  g = with_initializer(
      testing::raw_tensor<int32_t>("i32raw", onnx::TensorProto::INT32, {3}, {-5, 0, 2147483647}));
  EXPECT_EQ(g.initializer("i32raw")->ints, (std::vector<int64_t>{-5, 0, 2147483647}));

  onnx::TensorProto typed;
  typed.set_name("i32");
  typed.set_data_type(onnx::TensorProto::INT32);
  typed.add_dims(2);
  typed.add_int32_data(-3);
  typed.add_int32_data(9);
  g = with_initializer(typed);
  EXPECT_EQ(g.initializer("i32")->type, kOnnxInt32);
  EXPECT_EQ(g.initializer("i32")->ints, (std::vector<int64_t>{-3, 9}));

  onnx::TensorProto typed64;
  typed64.set_name("i64typed");
  typed64.set_data_type(onnx::TensorProto::INT64);  // a scalar: no dims, one value
  typed64.add_int64_data(-1);
  g = with_initializer(typed64);
  EXPECT_TRUE(g.initializer("i64typed")->dims.empty());
  EXPECT_EQ(g.initializer("i64typed")->ints, (std::vector<int64_t>{-1}));
  EXPECT_EQ(g.initializer("i64typed")->size(), 1);

  g = with_initializer(
      testing::raw_tensor<uint8_t>("mask", onnx::TensorProto::BOOL, {3}, {1, 0, 1}));
  EXPECT_EQ(g.initializer("mask")->ints, (std::vector<int64_t>{1, 0, 1}));
}

TEST(OnnxReader, OtherElementTypesKeepTheirShapeAndNoValues) {
  onnx::TensorProto half =
      testing::raw_tensor<uint16_t>("half", onnx::TensorProto::FLOAT16, {2, 2}, {1, 2, 3, 4});
  const OnnxGraph g = with_initializer(half);
  const OnnxTensor* t = g.initializer("half");
  EXPECT_EQ(t->type, kOnnxFloat16);
  EXPECT_EQ(t->dims, (std::vector<int64_t>{2, 2}));
  EXPECT_FALSE(t->is_float());
  EXPECT_FALSE(t->is_integer());
  EXPECT_TRUE(t->floats.empty());
  EXPECT_TRUE(t->ints.empty());
  EXPECT_EQ(onnx_element_type_name(kOnnxFloat16), "FLOAT16");
  EXPECT_EQ(onnx_element_type_name(kOnnxInt64), "INT64");
  EXPECT_EQ(onnx_element_type_name(kOnnxBfloat16), "BFLOAT16");
  EXPECT_EQ(onnx_element_type_name(99), "type 99");
}

// -- attributes, inputs, operator sets ---------------------------------------------------------

TEST(OnnxReader, ReadsAttributesOfEveryKind) {
  OnnxModelBuilder b;
  b.input("x", {3});
  testing::OnnxNodeBuilder n = b.node("Custom", "/all", {"x"}, {"y"});
  n.i("an_int", -7)
      .f("a_float", 0.25f)
      .s("a_string", "SAME_UPPER")
      .ints("some_ints", {1, -2, 3})
      .floats("some_floats", {0.5f, 1.5f})
      .strings("some_strings", {"Sigmoid", "Tanh"})
      .t("a_tensor", int64_tensor("", {2}, {4, 5}));
  onnx::AttributeProto* graph_attr = n.proto().add_attribute();
  graph_attr->set_name("a_graph");
  graph_attr->set_type(onnx::AttributeProto::GRAPH);
  graph_attr->mutable_g()->set_name("body");
  const OnnxGraph g = b.parsed(kOrigin);
  const OnnxNode& node = g.nodes.at(0);
  using Kind = OnnxAttribute::Kind;
  ASSERT_EQ(node.attributes.size(), 8u);
  const OnnxAttribute* a = node.attribute("an_int");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, Kind::Int);
  EXPECT_EQ(a->i, -7);
  a = node.attribute("a_float");
  EXPECT_EQ(a->kind, Kind::Float);
  EXPECT_EQ(a->f, 0.25);
  a = node.attribute("a_string");
  EXPECT_EQ(a->kind, Kind::String);
  EXPECT_EQ(a->s, "SAME_UPPER");
  a = node.attribute("some_ints");
  EXPECT_EQ(a->kind, Kind::Ints);
  EXPECT_EQ(a->ints, (std::vector<int64_t>{1, -2, 3}));
  a = node.attribute("some_floats");
  EXPECT_EQ(a->kind, Kind::Floats);
  EXPECT_EQ(a->floats, (std::vector<float>{0.5f, 1.5f}));
  a = node.attribute("some_strings");
  EXPECT_EQ(a->kind, Kind::Strings);
  EXPECT_EQ(a->strings, (std::vector<std::string>{"Sigmoid", "Tanh"}));
  a = node.attribute("a_tensor");
  EXPECT_EQ(a->kind, Kind::Tensor);
  ASSERT_TRUE(a->tensor.has_value());
  EXPECT_EQ(a->tensor->ints, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(a->tensor->dims, (std::vector<int64_t>{2}));
  a = node.attribute("a_graph");
  EXPECT_EQ(a->kind, Kind::Other);
}

TEST(OnnxReader, InitializersListedAmongTheInputsAreNotInputs) {
  // Exporters before IR version 4 list every initializer among the graph's inputs too.
  OnnxModelBuilder b = small_model();
  for (const char* name : {"w", "b"}) {
    onnx::ValueInfoProto* v = b.graph().add_input();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  const OnnxGraph g = b.parsed(kOrigin);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0].name, "x");
}

TEST(OnnxReader, ValueInfoWithoutAShapeOrATensorType) {
  OnnxModelBuilder b = small_model();
  onnx::ValueInfoProto* v = b.graph().add_input();
  v->set_name("no_shape");
  v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  onnx::ValueInfoProto* seq = b.graph().add_input();
  seq->set_name("a_sequence");
  seq->mutable_type()->mutable_sequence_type();
  const OnnxGraph g = b.parsed(kOrigin);
  ASSERT_EQ(g.inputs.size(), 3u);
  EXPECT_EQ(g.inputs[1].type, kOnnxInt64);
  EXPECT_FALSE(g.inputs[1].has_shape);
  EXPECT_TRUE(g.inputs[1].dims.empty());
  EXPECT_EQ(g.inputs[2].type, 0);
  EXPECT_FALSE(g.inputs[2].has_shape);
}

TEST(OnnxReader, ReadsTheDefaultOpsetAndListsTheOtherDomains) {
  OnnxModelBuilder b(13);
  onnx::OperatorSetIdProto* ml = b.proto().add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  onnx::OperatorSetIdProto* ms = b.proto().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", {3});
  OnnxGraph g = b.parsed(kOrigin);
  EXPECT_EQ(g.opset, 13);
  EXPECT_EQ(g.other_domains,
            (std::vector<std::string>{"ai.onnx.ml version 3", "com.microsoft version 1"}));

  // "ai.onnx" names the default domain too.
  onnx::ModelProto m;
  m.mutable_graph()->set_name("g");
  onnx::OperatorSetIdProto* set = m.add_opset_import();
  set->set_domain("ai.onnx");
  set->set_version(11);
  std::string bytes;
  m.SerializeToString(&bytes);
  g = parse_onnx(bytes, kOrigin);
  EXPECT_EQ(g.opset, 11);
  EXPECT_TRUE(g.other_domains.empty());
  EXPECT_TRUE(g.producer.empty());

  // No default domain at all: opset 0, for the importer to refuse.
  onnx::ModelProto only_ml;
  only_ml.mutable_graph()->set_name("g");
  onnx::OperatorSetIdProto* other = only_ml.add_opset_import();
  other->set_domain("ai.onnx.ml");
  other->set_version(2);
  only_ml.SerializeToString(&bytes);
  g = parse_onnx(bytes, kOrigin);
  EXPECT_EQ(g.opset, 0);
  EXPECT_EQ(g.other_domains, (std::vector<std::string>{"ai.onnx.ml version 2"}));
}

TEST(OnnxReader, NodeDomainsAndEmptyOptionalInputs) {
  OnnxModelBuilder b;
  b.input("x", {3});
  b.node("LSTM", "/lstm", {"x", "W", "R", "B", "", "h0"}, {"Y", "", "Y_c"});
  b.node("FusedGemm", "/fused", {"Y"}, {"z"}).proto().set_domain("com.microsoft");
  const OnnxGraph g = b.parsed(kOrigin);
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"x", "W", "R", "B", "", "h0"}));
  EXPECT_EQ(g.nodes[0].outputs, (std::vector<std::string>{"Y", "", "Y_c"}));
  EXPECT_EQ(g.nodes[0].domain, "");
  EXPECT_EQ(g.nodes[1].domain, "com.microsoft");
}

}  // namespace
}  // namespace xo

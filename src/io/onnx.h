// ONNX files (https://onnx.ai: a protobuf ModelProto) read into plain values: the graph's nodes
// with their attributes, its initializers as float or integer tensors, its inputs and outputs with
// their shapes. Nothing of protobuf or of the ONNX library leaks past onnx.cpp;
// model/onnx_import.cpp maps the graph onto crossover's layers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace xo {

// ONNX's TensorProto element types that crossover reads (the others keep their number).
enum OnnxElementType : int32_t {
  kOnnxFloat = 1,
  kOnnxInt32 = 6,
  kOnnxInt64 = 7,
  kOnnxBool = 9,
  kOnnxFloat16 = 10,
  kOnnxDouble = 11,
  kOnnxBfloat16 = 16,
};
std::string onnx_element_type_name(int32_t type);  // "FLOAT", "INT64", … or "type 13"

// A tensor's values: floats for FLOAT and DOUBLE (converted), integers for INT64, INT32 and BOOL.
// Other element types keep their shape and type and no values.
struct OnnxTensor {
  std::string name;
  std::vector<int64_t> dims;
  int32_t type = kOnnxFloat;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  bool is_float() const { return type == kOnnxFloat || type == kOnnxDouble; }
  bool is_integer() const { return type == kOnnxInt64 || type == kOnnxInt32 || type == kOnnxBool; }
  int64_t size() const;  // the product of dims (1 for a scalar)
};

struct OnnxAttribute {
  enum class Kind { Int, Float, String, Tensor, Ints, Floats, Strings, Other };
  std::string name;
  Kind kind = Kind::Other;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::optional<OnnxTensor> tensor;
};

struct OnnxNode {
  std::string name;  // may be empty in hand-made files: described() then uses its first output
  std::string op_type;
  std::string domain;                        // "" (or "ai.onnx") for the standard operators
  std::vector<std::string> inputs, outputs;  // "" for an optional input left out
  std::vector<OnnxAttribute> attributes;

  const OnnxAttribute* attribute(std::string_view attr) const;
  // "node '/0/Gemm' (Gemm)", for messages.
  std::string described() const;
};

// A graph input's or output's declared shape: each dimension a number, or -1 with the symbolic
// name (`param`, e.g. "batch") or none.
struct OnnxDim {
  int64_t value = -1;
  std::string param;
};
struct OnnxValueInfo {
  std::string name;
  int32_t type = 0;  // element type, 0 when not a tensor
  std::vector<OnnxDim> dims;
  bool has_shape = false;
};

struct OnnxGraph {
  std::string origin;  // the file, for messages
  int64_t ir_version = 0;
  int64_t opset = 0;                       // of the default domain; 0 when the file imports none
  std::vector<std::string> other_domains;  // imported operator sets besides the default one
  std::string producer;                    // "pytorch 1.13.0", "tf2onnx 1.9.3", …
  std::vector<OnnxValueInfo> inputs;       // the graph's inputs, initializers left out
  std::vector<OnnxValueInfo> outputs;
  std::vector<OnnxTensor> initializers;
  std::vector<OnnxNode> nodes;  // in the file's (topological) order

  const OnnxTensor* initializer(std::string_view name) const;
};

// Parses a serialised ModelProto. Throws UserError naming `origin` for: bytes that are not an ONNX
// model, tensors whose data does not match their shape (or whose shape overflows), tensors stored
// in external files, a model with no graph.
OnnxGraph parse_onnx(const std::string& bytes, const std::string& origin);
OnnxGraph read_onnx(const std::filesystem::path& path);

}  // namespace xo

// ONNX models built in C++ for the tests (no Python needed): a ModelProto assembled node by node,
// with the data threaded through a chain of nodes as torch.onnx.export lays it out.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "io/onnx.h"

namespace xo::testing {

// Distinct values start, start + step, …: every element of a weight can be told from the others,
// so a transposition or a reordering shows in an element-wise comparison.
inline std::vector<float> ramp(int64_t n, float start = 0.5f, float step = 0.25f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + step * static_cast<float>(i);
  return v;
}

inline int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A tensor stored as ONNX exporters store weights: little-endian raw_data.
template <typename T>
onnx::TensorProto raw_tensor(const std::string& name, onnx::TensorProto::DataType type,
                             const std::vector<int64_t>& dims, const std::vector<T>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  std::string raw(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
  t.set_raw_data(raw);
  return t;
}

inline onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<float>& values) {
  return raw_tensor(name, onnx::TensorProto::FLOAT, dims, values);
}
inline onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                      const std::vector<int64_t>& values) {
  return raw_tensor(name, onnx::TensorProto::INT64, dims, values);
}

// A node under construction: its attributes, added by kind.
class OnnxNodeBuilder {
 public:
  explicit OnnxNodeBuilder(onnx::NodeProto* node) : node_(node) {}
  OnnxNodeBuilder& i(const std::string& name, int64_t v) {
    add(name, onnx::AttributeProto::INT)->set_i(v);
    return *this;
  }
  OnnxNodeBuilder& f(const std::string& name, float v) {
    add(name, onnx::AttributeProto::FLOAT)->set_f(v);
    return *this;
  }
  OnnxNodeBuilder& s(const std::string& name, const std::string& v) {
    add(name, onnx::AttributeProto::STRING)->set_s(v);
    return *this;
  }
  OnnxNodeBuilder& ints(const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = add(name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  OnnxNodeBuilder& floats(const std::string& name, const std::vector<float>& v) {
    onnx::AttributeProto* a = add(name, onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
    return *this;
  }
  OnnxNodeBuilder& strings(const std::string& name, const std::vector<std::string>& v) {
    onnx::AttributeProto* a = add(name, onnx::AttributeProto::STRINGS);
    for (const std::string& x : v) a->add_strings(x);
    return *this;
  }
  OnnxNodeBuilder& t(const std::string& name, const onnx::TensorProto& v) {
    *add(name, onnx::AttributeProto::TENSOR)->mutable_t() = v;
    return *this;
  }
  onnx::NodeProto& proto() { return *node_; }
  std::string output(int k = 0) const { return node_->output(k); }

 private:
  onnx::AttributeProto* add(const std::string& name, onnx::AttributeProto::AttributeType type) {
    onnx::AttributeProto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }
  onnx::NodeProto* node_;
};

// A model of one graph. `then` adds a node that takes the current data as its first input and
// makes its first output the current data; the last current data becomes the graph's output
// unless one was declared.
class OnnxModelBuilder {
 public:
  explicit OnnxModelBuilder(int64_t opset = 14) {
    model_.set_ir_version(8);
    model_.set_producer_name("pytorch");
    model_.set_producer_version("1.13.0");
    onnx::OperatorSetIdProto* set = model_.add_opset_import();
    set->set_domain("");
    set->set_version(opset);
  }

  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // A graph input [batch, sample...] whose first dimension is the symbolic "batch", as
  // dynamic_axes={"input": {0: "batch"}} exports it.
  OnnxModelBuilder& input(const std::string& name, const std::vector<int64_t>& sample,
                          onnx::TensorProto::DataType type = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto* v = graph().add_input();
    v->set_name(name);
    onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    onnx::TensorShapeProto* shape = t->mutable_shape();
    shape->add_dim()->set_dim_param("batch");
    for (int64_t d : sample) shape->add_dim()->set_dim_value(d);
    if (current_.empty()) current_ = name;
    return *this;
  }

  OnnxModelBuilder& output(const std::string& name) {
    onnx::ValueInfoProto* v = graph().add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return *this;
  }

  OnnxModelBuilder& initializer(const onnx::TensorProto& t) {
    *graph().add_initializer() = t;
    return *this;
  }
  OnnxModelBuilder& weight(const std::string& name, const std::vector<int64_t>& dims,
                           const std::vector<float>& values) {
    return initializer(float_tensor(name, dims, values));
  }
  // A weight of distinct values (ramp), returned so that a test can compare against it.
  std::vector<float> ramp_weight(const std::string& name, const std::vector<int64_t>& dims,
                                 float start = 0.5f) {
    std::vector<float> values = ramp(element_count(dims), start);
    weight(name, dims, values);
    return values;
  }

  // A node with the given inputs and outputs.
  OnnxNodeBuilder node(const std::string& op, const std::string& name,
                       const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs) {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    for (const std::string& out : outputs) n->add_output(out);
    return OnnxNodeBuilder(n);
  }

  // A node on the data: inputs {current, more...}, outputs "<name>_output_k" for k < outputs.
  OnnxNodeBuilder then(const std::string& op, const std::string& name,
                       const std::vector<std::string>& more = {}, int outputs = 1) {
    std::vector<std::string> inputs{current_};
    inputs.insert(inputs.end(), more.begin(), more.end());
    std::vector<std::string> outs;
    for (int k = 0; k < outputs; ++k) outs.push_back(name + "_output_" + std::to_string(k));
    OnnxNodeBuilder n = node(op, name, inputs, outs);
    current_ = outs[0];
    return n;
  }

  // A Constant node whose output is `name`.
  std::string constant(const std::string& name, const onnx::TensorProto& value) {
    node("Constant", name, {}, {name}).t("value", value);
    return name;
  }
  std::string constant_ints(const std::string& name, const std::vector<int64_t>& dims,
                            const std::vector<int64_t>& values) {
    return constant(name, int64_tensor("", dims, values));
  }

  const std::string& current() const { return current_; }
  void set_current(const std::string& tensor) { current_ = tensor; }

  std::string bytes() {
    if (graph().output_size() == 0) output(current_);
    std::string out;
    model_.SerializeToString(&out);
    return out;
  }
  OnnxGraph parsed(const std::string& origin = "model.onnx") { return parse_onnx(bytes(), origin); }
  void write(const std::filesystem::path& path) {
    std::ofstream(path, std::ios::binary) << bytes();
  }

 private:
  onnx::ModelProto model_;
  std::string current_;
};

}  // namespace xo::testing

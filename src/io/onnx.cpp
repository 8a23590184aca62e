// Reads ONNX files through Debian's libonnx (its generated protobuf classes) into the plain values
// of onnx.h. Every count and size read from the file is checked before it is used.
#include "io/onnx.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/file.h"

namespace xo {
namespace {

// No tensor crossover maps holds more (a 2^31-element layer is past any device's memory anyway).
constexpr int64_t kMaxTensorElements = int64_t{1} << 31;
constexpr int kMaxDims = 32;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw UserError(fmt::format("{}: {}", origin, what));
}

int64_t checked_size(const std::string& origin, const std::string& tensor,
                     const std::vector<int64_t>& dims) {
  if (dims.size() > kMaxDims) {
    fail(origin, fmt::format("tensor '{}' has {} dimensions (at most {} expected)", tensor,
                             dims.size(), kMaxDims));
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxTensorElements) {
      fail(origin, fmt::format("tensor '{}' has the shape [{}] (expected non-negative dimensions "
                               "of at most 2^31 elements in all)",
                               tensor, fmt::join(dims, ", ")));
    }
  }
  return n;
}

// Values from raw_data (little-endian, as ONNX stores them) or from the typed field.
template <typename Raw, typename Out, typename Field>
void read_values(const std::string& origin, const onnx::TensorProto& t, int64_t n,
                 const Field& field, std::vector<Out>& out) {
  // The values are allocated only once the file is seen to hold them all: a shape of 2^31
  // elements with no data behind it is refused before it takes 8 GB (found by fuzz_onnx).
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() != static_cast<size_t>(n) * sizeof(Raw)) {
      fail(origin,
           fmt::format("tensor '{}': raw_data holds {} bytes, its shape needs {} ({} values "
                       "of {} bytes)",
                       t.name(), raw.size(), static_cast<size_t>(n) * sizeof(Raw), n, sizeof(Raw)));
    }
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      Raw v;
      std::memcpy(&v, raw.data() + i * static_cast<int64_t>(sizeof(Raw)), sizeof(Raw));
      out[static_cast<size_t>(i)] = static_cast<Out>(v);
    }
    return;
  }
  if (field.size() != n) {
    fail(origin, fmt::format("tensor '{}': {} values stored, its shape [{}] needs {}", t.name(),
                             field.size(), fmt::join(t.dims(), ", "), n));
  }
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<Out>(field.Get(i));
}

OnnxTensor tensor_of(const std::string& origin, const onnx::TensorProto& t) {
  OnnxTensor out;
  out.name = t.name();
  out.type = t.data_type();
  out.dims.assign(t.dims().begin(), t.dims().end());
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    fail(origin, fmt::format("tensor '{}' is stored in an external file (crossover reads weights "
                             "stored in the model file; export the model smaller than 2 GB)",
                             t.name()));
  }
  if (t.has_segment()) {
    fail(origin, fmt::format("tensor '{}' is a segment of a tensor (not supported)", t.name()));
  }
  const int64_t n = checked_size(origin, t.name(), out.dims);
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      read_values<float>(origin, t, n, t.float_data(), out.floats);
      break;
    case onnx::TensorProto::DOUBLE:
      read_values<double>(origin, t, n, t.double_data(), out.floats);
      break;
    case onnx::TensorProto::INT64:
      read_values<int64_t>(origin, t, n, t.int64_data(), out.ints);
      break;
    case onnx::TensorProto::INT32:
      read_values<int32_t>(origin, t, n, t.int32_data(), out.ints);
      break;
    case onnx::TensorProto::BOOL:
      read_values<uint8_t>(origin, t, n, t.int32_data(), out.ints);
      break;
    default:
      break;  // kept as shape and type: the importer names the type where it needs values
  }
  return out;
}

OnnxAttribute attribute_of(const std::string& origin, const onnx::AttributeProto& a) {
  OnnxAttribute out;
  out.name = a.name();
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      out.kind = OnnxAttribute::Kind::Int;
      out.i = a.i();
      break;
    case onnx::AttributeProto::FLOAT:
      out.kind = OnnxAttribute::Kind::Float;
      out.f = a.f();
      break;
    case onnx::AttributeProto::STRING:
      out.kind = OnnxAttribute::Kind::String;
      out.s = a.s();
      break;
    case onnx::AttributeProto::TENSOR:
      out.kind = OnnxAttribute::Kind::Tensor;
      out.tensor = tensor_of(origin, a.t());
      break;
    case onnx::AttributeProto::INTS:
      out.kind = OnnxAttribute::Kind::Ints;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = OnnxAttribute::Kind::Floats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = OnnxAttribute::Kind::Strings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    default:
      out.kind = OnnxAttribute::Kind::Other;  // graphs, sparse tensors, type protos
      break;
  }
  return out;
}

OnnxValueInfo value_info_of(const onnx::ValueInfoProto& v) {
  OnnxValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) return out;
  const onnx::TypeProto::Tensor& t = v.type().tensor_type();
  out.type = t.elem_type();
  out.has_shape = t.has_shape();
  for (const onnx::TensorShapeProto::Dimension& d : t.shape().dim()) {
    OnnxDim dim;
    if (d.has_dim_value()) dim.value = d.dim_value();
    if (d.has_dim_param()) dim.param = d.dim_param();
    out.dims.push_back(dim);
  }
  return out;
}

}  // namespace

std::string onnx_element_type_name(int32_t type) {
  if (onnx::TensorProto::DataType_IsValid(type)) {
    return onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type));
  }
  return fmt::format("type {}", type);
}

int64_t OnnxTensor::size() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // checked when read
  return n;
}

const OnnxAttribute* OnnxNode::attribute(std::string_view attr) const {
  for (const OnnxAttribute& a : attributes) {
    if (a.name == attr) return &a;
  }
  return nullptr;
}

std::string OnnxNode::described() const {
  const std::string& label = !name.empty() ? name : !outputs.empty() ? outputs[0] : op_type;
  return fmt::format("node '{}' ({})", label, op_type);
}

const OnnxTensor* OnnxGraph::initializer(std::string_view tensor) const {
  for (const OnnxTensor& t : initializers) {
    if (t.name == tensor) return &t;
  }
  return nullptr;
}

namespace {

onnx::ModelProto parsed_model(const std::string& bytes, const std::string& origin) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    fail(origin,
         "larger than 2 GiB (ONNX keeps the weights of such models in external files, "
         "which crossover does not read)");
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    fail(origin, "not an ONNX model (the bytes do not parse as an ONNX ModelProto)");
  }
  if (!model.has_graph()) fail(origin, "an ONNX model without a graph");
  return model;
}

// The model's values; each initializer's bytes are released once converted, so that a large model
// is held about twice (protobuf's copy shrinking as the floats grow), not three times.
OnnxGraph graph_of(onnx::ModelProto& model, const std::string& origin) {
  OnnxGraph g;
  g.origin = origin;
  g.ir_version = model.ir_version();
  g.producer = model.producer_name();
  if (!model.producer_version().empty()) g.producer += " " + model.producer_version();
  for (const onnx::OperatorSetIdProto& set : model.opset_import()) {
    if (set.domain().empty() || set.domain() == "ai.onnx") {
      g.opset = set.version();
    } else {
      g.other_domains.push_back(fmt::format("{} version {}", set.domain(), set.version()));
    }
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  for (onnx::TensorProto& t : *graph.mutable_initializer()) {
    g.initializers.push_back(tensor_of(origin, t));
    std::string().swap(*t.mutable_raw_data());
    t.clear_float_data();
  }
  for (const onnx::ValueInfoProto& v : graph.input()) {
    // Older exporters list the initializers among the inputs too: those are weights, not data.
    if (g.initializer(v.name()) == nullptr) g.inputs.push_back(value_info_of(v));
  }
  for (const onnx::ValueInfoProto& v : graph.output()) g.outputs.push_back(value_info_of(v));
  for (const onnx::NodeProto& n : graph.node()) {
    OnnxNode node;
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const onnx::AttributeProto& a : n.attribute()) {
      node.attributes.push_back(attribute_of(origin, a));
    }
    g.nodes.push_back(std::move(node));
  }
  return g;
}

}  // namespace

OnnxGraph parse_onnx(const std::string& bytes, const std::string& origin) {
  onnx::ModelProto model = parsed_model(bytes, origin);
  return graph_of(model, origin);
}

OnnxGraph read_onnx(const std::filesystem::path& path) {
  onnx::ModelProto model;
  {
    const std::string bytes = read_file(path);  // released once parsed
    model = parsed_model(bytes, path.string());
  }
  return graph_of(model, path.string());
}

}  // namespace xo

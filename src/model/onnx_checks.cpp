// The ONNX importer's checks: the graph as a whole (opset, one input and one output, the input's
// type and shape, topological order, every node on the chain), a node's attributes against what
// ONNX defines and crossover reads, and the data a node takes. Each refuses with the graph's origin
// and the node, so that a user can find what to change.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

std::vector<std::string> names_of(const std::vector<OnnxValueInfo>& values) {
  std::vector<std::string> names;
  for (const OnnxValueInfo& v : values) names.push_back("'" + v.name + "'");
  return names;
}

}  // namespace

// -- messages --------------------------------------------------------------------------------
void Importer::fail(const std::string& what) const {
  throw UserError(fmt::format("{}: {}", g_.origin, what));
}

void Importer::refuse(const OnnxNode& n, const std::string& what) const {
  throw UserError(fmt::format("{}: {}: {}", g_.origin, n.described(), what));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += shape[i] == kBatch ? std::string("N") : std::to_string(shape[i]);
  }
  return text;
}

// -- attributes ------------------------------------------------------------------------------
const OnnxAttribute* Importer::attr(const OnnxNode& n, std::string_view name,
                                    OnnxAttribute::Kind kind) const {
  const OnnxAttribute* a = n.attribute(name);
  if (a && a->kind != kind) {
    refuse(n, fmt::format("attribute '{}' has another type than ONNX defines", name));
  }
  return a;
}

int64_t Importer::attr_int(const OnnxNode& n, std::string_view name, int64_t fallback) const {
  const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Int);
  return a ? a->i : fallback;
}

double Importer::attr_float(const OnnxNode& n, std::string_view name, double fallback) const {
  const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Float);
  return a ? a->f : fallback;
}

std::string Importer::attr_string(const OnnxNode& n, std::string_view name,
                                  std::string fallback) const {
  const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::String);
  return a ? a->s : fallback;
}

std::vector<int64_t> Importer::attr_ints(const OnnxNode& n, std::string_view name,
                                         std::vector<int64_t> fallback) const {
  const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Ints);
  return a ? a->ints : fallback;
}

// Attributes outside `known` change what the node computes in ways crossover does not model.
void Importer::known_attributes(const OnnxNode& n,
                                std::initializer_list<std::string_view> known) const {
  for (const OnnxAttribute& a : n.attributes) {
    if (std::find(known.begin(), known.end(), a.name) == known.end()) {
      refuse(n, fmt::format("attribute '{}' is not supported (crossover reads {} here)", a.name,
                            known.size() ? fmt::format("{}", fmt::join(known, ", "))
                                         : std::string("none")));
    }
  }
}

// -- the graph as a whole --------------------------------------------------------------------
void Importer::check_graph() const {
  if (g_.opset == 0) fail("the model imports no standard ONNX operator set");
  if (g_.opset < kMinOnnxOpset || g_.opset > kMaxOnnxOpset) {
    fail(
        fmt::format("ONNX opset {}: crossover reads opsets {} to {} (e.g. "
                    "torch.onnx.export(..., opset_version=14))",
                    g_.opset, kMinOnnxOpset, kMaxOnnxOpset));
  }
  if (g_.inputs.size() != 1) {
    fail(fmt::format("the graph has {} inputs ({}): crossover trains a model of one input",
                     g_.inputs.size(), fmt::join(names_of(g_.inputs), ", ")));
  }
  if (g_.outputs.size() != 1) {
    fail(fmt::format("the graph has {} outputs ({}): crossover trains a model of one output",
                     g_.outputs.size(), fmt::join(names_of(g_.outputs), ", ")));
  }
  const OnnxValueInfo& in = g_.inputs[0];
  const bool floats = in.type == kOnnxFloat || in.type == kOnnxDouble;
  const bool ids = in.type == kOnnxInt64 || in.type == kOnnxInt32;
  if (!floats && !ids) {
    fail(fmt::format("input '{}' holds {} (expected FLOAT features, or INT64 token ids)", in.name,
                     onnx_element_type_name(in.type)));
  }
  if (!in.has_shape || in.dims.size() < 2) {
    fail(fmt::format(
        "input '{}' has {} (expected [batch, ...] with the sample's dimensions "
        "fixed)",
        in.name,
        in.has_shape ? fmt::format("{} dimension(s)", in.dims.size()) : std::string("no shape")));
  }
  for (size_t d = 1; d < in.dims.size(); ++d) {
    if (in.dims[d].value <= 0) {
      fail(fmt::format(
          "input '{}': dimension {} is {} (crossover needs every dimension but the "
          "batch fixed; export with a fixed {} and dynamic_axes on the batch only)",
          in.name, d,
          in.dims[d].param.empty() ? std::string("unknown") : fmt::format("'{}'", in.dims[d].param),
          d == 1 && ids ? "sequence length" : "shape"));
    }
  }
  int64_t values = 1;
  for (size_t d = 1; d < in.dims.size(); ++d) {
    if (__builtin_mul_overflow(values, in.dims[d].value, &values) || values > kMaxSize) {
      std::vector<int64_t> sample;
      for (size_t i = 1; i < in.dims.size(); ++i) sample.push_back(in.dims[i].value);
      fail(fmt::format("input '{}': a sample of [{}] holds more than 2^31 values", in.name,
                       fmt::join(sample, ", ")));
    }
  }
}

// ONNX lists a graph's nodes in topological order, each tensor computed once. A file that does
// not (hand-made or damaged) could send the walk below round a cycle for ever: refused here, so
// that every step follows a node to a later one and every evaluation to an earlier one.
void Importer::check_order() const {
  std::set<std::string> defined;
  for (const OnnxValueInfo& v : g_.inputs) defined.insert(v.name);
  for (const OnnxTensor& t : g_.initializers) defined.insert(t.name);
  for (const OnnxNode& n : g_.nodes) {
    for (const std::string& in : n.inputs) {
      if (!in.empty() && !defined.count(in)) {
        refuse(n, fmt::format("its input '{}' is computed by no node before it (an ONNX graph "
                              "lists its nodes in topological order)",
                              in));
      }
    }
    for (const std::string& out : n.outputs) {
      if (!out.empty() && !defined.insert(out).second) {
        refuse(n, fmt::format("its output '{}' is computed twice (each tensor of an ONNX graph "
                              "has one producer)",
                              out));
      }
    }
  }
}

void Importer::check_all_used() const {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const OnnxNode& n = g_.nodes[i];
    if (used_[i] || n.op_type == "Constant") continue;
    refuse(n, fmt::format("not on the chain from the input '{}' to the output '{}' (crossover "
                          "imports a chain of layers)",
                          g_.inputs[0].name, output_));
  }
}

// -- a node on the chain ---------------------------------------------------------------------
// A node's first output, which the chain continues with.
const std::string& Importer::output_of(const OnnxNode& n) const {
  if (n.outputs.empty() || n.outputs[0].empty()) refuse(n, "has no output");
  return n.outputs[0];
}

// An input's name, or "" where the node leaves it out.
const std::string& input(const OnnxNode& n, size_t i) {
  static const std::string none;
  return i < n.inputs.size() ? n.inputs[i] : none;
}

void Importer::need(const OnnxNode& n, bool ok, const std::string& expected) const {
  if (!ok) {
    refuse(n, fmt::format("{} (the data here is [{}] per sample)", expected,
                          fmt::join(sample_, ", ")));
  }
}

void Importer::takes_data_first(const OnnxNode& n) const {
  if (input(n, 0) != current_) {
    refuse(n, fmt::format("takes the data '{}' as another input than its first", current_));
  }
}

void Importer::no_users(const OnnxNode& n, size_t from_output, std::string_view what) const {
  for (size_t i = from_output; i < n.outputs.size(); ++i) {
    const auto it = consumers_.find(n.outputs[i]);
    if (!n.outputs[i].empty() &&
        (n.outputs[i] == output_ || (it != consumers_.end() && !it->second.empty()))) {
      refuse(n, fmt::format("its output {} ('{}', {}) is used (crossover's layer has no such "
                            "output)",
                            i, n.outputs[i], what));
    }
  }
}

}  // namespace xo::onnx_importer

// Maps an ONNX graph onto crossover's layers (see onnx_import.h for the table). The importer walks
// the data from the graph's input to its output, one node at a time, and keeps what the data is
// at each point: crossover's per-sample shape and how ONNX lays it out (batch first, time first
// around an LSTM, an LSTM's output with its direction axis, …). Inputs that are not the data must
// be constants: initializers, Constant nodes, or shape arithmetic over the data's shape, which is
// evaluated here with the batch dimension standing as kBatch.
#include "model/onnx_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/error.h"

namespace xo {
namespace {

// The batch dimension in evaluated shapes: a prime no real dimension of these models takes.
constexpr int64_t kBatch = 1000003;
// Constants materialised by the evaluator (an all-zero initial state is checked, not built): one
// ConstantOfShape, and all evaluated values together (weights rearranged by Slice and Concat
// count).
constexpr int64_t kMaxEvaluated = int64_t{1} << 20;
constexpr int64_t kMaxEvaluatedTotal = int64_t{1} << 30;
constexpr size_t kMaxConstantDepth = 256;
// Bounds on the sizes a graph declares, so that no shape arithmetic downstream (2 x padding,
// 8 x hidden) can overflow: windows, strides, padding and hidden sizes of at most 2^24, ...
constexpr int64_t kMaxExtent = int64_t{1} << 24;
// ... and a sample of at most 2^31 values, the reader's bound on a tensor.
constexpr int64_t kMaxSize = int64_t{1} << 31;

constexpr std::string_view kSupported =
    "Gemm, MatMul (+ Add as its bias), Conv, Relu, Tanh, Sigmoid, MaxPool, AveragePool, "
    "GlobalAveragePool, GlobalMaxPool, Flatten, Reshape (to [N, -1]), Dropout, "
    "BatchNormalization, Gather (an embedding, or an LSTM's last step), Slice + Squeeze (an LSTM's "
    "last step), Pad (folded into a Conv or AveragePool), LSTM, Transpose (batch and "
    "time), Squeeze, ReduceMean and ReduceMax (over a sequence), Identity, and Softmax, "
    "LogSoftmax or Sigmoid at the end";

// How ONNX lays out the data at a point of the chain, given crossover's per-sample shape.
enum class Layout {
  Batch,       // [N, sample...]
  Time,        // a sequence [T, F] stored time first: [T, N, F]
  LstmY,       // an LSTM's Y: [T, 1, N, H] (layout = 0)
  LstmYBatch,  // an LSTM's Y with layout = 1: [N, T, 1, H]
  LstmState,   // an LSTM's Y_h: [1, N, H]
  Squeezed,    // a single score squeezed to [N]
};

// A shape as messages show it: the batch dimension as N, never the number that stands for it.
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += shape[i] == kBatch ? std::string("N") : std::to_string(shape[i]);
  }
  return text;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

// The shortest decimal that rounds to the same float: 0.1 for the float nearest 0.1, 1e-05 for
// BatchNormalization's float epsilon, so that specs read as PyTorch's arguments were written.
double shortest_float(double v) {
  const float target = static_cast<float>(v);
  for (int digits = 1; digits <= 9; ++digits) {
    const double candidate = std::strtod(fmt::format("{:.{}g}", v, digits).c_str(), nullptr);
    if (static_cast<float>(candidate) == target) return candidate;
  }
  return v;
}

// ONNX stacks an LSTM's gates as (input, output, forget, cell); PyTorch as (input, forget, cell,
// output). Rows of `rows_per_gate` × `cols`, for each of the 4 gates.
std::vector<float> pytorch_gate_order(const float* onnx, int64_t rows_per_gate, int64_t cols) {
  constexpr int kFrom[4] = {0, 2, 3, 1};
  const int64_t block = rows_per_gate * cols;
  std::vector<float> out(static_cast<size_t>(4 * block));
  for (int g = 0; g < 4; ++g) {
    std::copy(onnx + kFrom[g] * block, onnx + (kFrom[g] + 1) * block, out.begin() + g * block);
  }
  return out;
}

int64_t normalise_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

class Importer {
 public:
  explicit Importer(const OnnxGraph& g) : g_(g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (const std::string& out : g.nodes[i].outputs) {
        if (!out.empty()) producer_[out] = static_cast<int>(i);
      }
      for (const std::string& in : g.nodes[i].inputs) {
        if (!in.empty()) consumers_[in].push_back(static_cast<int>(i));
      }
    }
    used_.assign(g.nodes.size(), false);
  }

  OnnxImport run() {
    check_graph();
    check_order();
    out_.spec.origin = g_.origin;
    const OnnxValueInfo& input = g_.inputs[0];
    output_ = g_.outputs[0].name;
    ids_ = input.type != kOnnxFloat && input.type != kOnnxDouble;
    if (!input.dims.empty() && input.dims[0].value > 0) export_batch_ = input.dims[0].value;
    std::vector<int64_t> sample;
    for (size_t d = 1; d < input.dims.size(); ++d) sample.push_back(input.dims[d].value);
    out_.spec.input = sample;
    data_.insert(input.name);
    set_current(input.name, Layout::Batch, sample);
    while (current_ != output_) step(next_node());
    for (int c : consumers_[output_]) {
      if (g_.nodes[c].op_type != "Shape") {
        fail(
            fmt::format("its output '{}' also feeds {}: crossover imports a chain that ends at the "
                        "graph's output",
                        output_, g_.nodes[c].described()));
      }
      used_[c] = true;
    }
    check_all_used();
    finish();
    return std::move(out_);
  }

 private:
  // -- messages ------------------------------------------------------------------------------
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(fmt::format("{}: {}", g_.origin, what));
  }
  [[noreturn]] void refuse(const OnnxNode& n, const std::string& what) const {
    throw UserError(fmt::format("{}: {}: {}", g_.origin, n.described(), what));
  }

  // -- attributes ----------------------------------------------------------------------------
  const OnnxAttribute* attr(const OnnxNode& n, std::string_view name,
                            OnnxAttribute::Kind kind) const {
    const OnnxAttribute* a = n.attribute(name);
    if (a && a->kind != kind) {
      refuse(n, fmt::format("attribute '{}' has another type than ONNX defines", name));
    }
    return a;
  }
  int64_t attr_int(const OnnxNode& n, std::string_view name, int64_t fallback) const {
    const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Int);
    return a ? a->i : fallback;
  }
  double attr_float(const OnnxNode& n, std::string_view name, double fallback) const {
    const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Float);
    return a ? a->f : fallback;
  }
  std::string attr_string(const OnnxNode& n, std::string_view name, std::string fallback) const {
    const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::String);
    return a ? a->s : fallback;
  }
  std::vector<int64_t> attr_ints(const OnnxNode& n, std::string_view name,
                                 std::vector<int64_t> fallback) const {
    const OnnxAttribute* a = attr(n, name, OnnxAttribute::Kind::Ints);
    return a ? a->ints : fallback;
  }
  // Attributes outside `known` change what the node computes in ways crossover does not model.
  void known_attributes(const OnnxNode& n, std::initializer_list<std::string_view> known) const {
    for (const OnnxAttribute& a : n.attributes) {
      if (std::find(known.begin(), known.end(), a.name) == known.end()) {
        refuse(n, fmt::format("attribute '{}' is not supported (crossover reads {} here)", a.name,
                              known.size() ? fmt::format("{}", fmt::join(known, ", "))
                                           : std::string("none")));
      }
    }
  }

  // A node's first output, which the chain continues with.
  const std::string& output_of(const OnnxNode& n) const {
    if (n.outputs.empty() || n.outputs[0].empty()) refuse(n, "has no output");
    return n.outputs[0];
  }

  // An input's name, or "" where the node leaves it out.
  static const std::string& input(const OnnxNode& n, size_t i) {
    static const std::string none;
    return i < n.inputs.size() ? n.inputs[i] : none;
  }

  // -- the graph as a whole ------------------------------------------------------------------
  void check_graph() const {
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
        fail(
            fmt::format("input '{}': dimension {} is {} (crossover needs every dimension but the "
                        "batch fixed; export with a fixed {} and dynamic_axes on the batch only)",
                        in.name, d,
                        in.dims[d].param.empty() ? std::string("unknown")
                                                 : fmt::format("'{}'", in.dims[d].param),
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
  void check_order() const {
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

  static std::vector<std::string> names_of(const std::vector<OnnxValueInfo>& values) {
    std::vector<std::string> names;
    for (const OnnxValueInfo& v : values) names.push_back("'" + v.name + "'");
    return names;
  }

  void check_all_used() const {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const OnnxNode& n = g_.nodes[i];
      if (used_[i] || n.op_type == "Constant") continue;
      refuse(n, fmt::format("not on the chain from the input '{}' to the output '{}' (crossover "
                            "imports a chain of layers)",
                            g_.inputs[0].name, output_));
    }
  }

  // -- the data ------------------------------------------------------------------------------
  std::vector<int64_t> full_shape() const {
    switch (layout_) {
      case Layout::Batch: {
        std::vector<int64_t> s{kBatch};
        s.insert(s.end(), sample_.begin(), sample_.end());
        return s;
      }
      case Layout::Time:
        return {sample_[0], kBatch, sample_[1]};
      case Layout::LstmY:
        return {sample_[0], 1, kBatch, sample_[1]};
      case Layout::LstmYBatch:
        return {kBatch, sample_[0], 1, sample_[1]};
      case Layout::LstmState:
        return {1, kBatch, sample_[0]};
      case Layout::Squeezed:
        return {kBatch};
    }
    return {};
  }

  void set_current(const std::string& tensor, Layout layout, std::vector<int64_t> sample) {
    current_ = tensor;
    layout_ = layout;
    sample_ = std::move(sample);
    data_.insert(tensor);
    shapes_[tensor] = full_shape();
  }

  // The one node that computes with the current data (Shape nodes only read its shape).
  const OnnxNode& next_node() {
    std::vector<int> users;
    for (int c : consumers_[current_]) {
      if (g_.nodes[c].op_type == "Shape") {
        used_[c] = true;
      } else if (std::find(users.begin(), users.end(), c) == users.end()) {
        users.push_back(c);
      }
    }
    const auto from = producer_.find(current_);
    const std::string made_by = from == producer_.end()
                                    ? std::string("the graph's input")
                                    : "the output of " + g_.nodes[from->second].described();
    if (users.empty()) {
      fail(fmt::format("the tensor '{}' ({}) is not the graph's output '{}', and no node uses it",
                       current_, made_by, output_));
    }
    if (users.size() > 1) {
      std::vector<std::string> names;
      for (int u : users) names.push_back(g_.nodes[u].described());
      fail(
          fmt::format("the graph branches at the tensor '{}' ({}): it feeds {}; crossover imports "
                      "a chain of layers, each feeding the next (a residual connection or a "
                      "second head is not supported)",
                      current_, made_by, fmt::join(names, " and ")));
    }
    return g_.nodes[users[0]];
  }

  // -- constants -----------------------------------------------------------------------------
  // The value of a non-data input: an initializer, a Constant, or arithmetic over those and the
  // data's shape.
  // A reference to the initializer itself or to the evaluated value (kept for the whole import): a
  // weight of tens of megabytes is never copied on its way to the layer.
  const OnnxTensor& constant(const OnnxNode& user, const std::string& name) {
    if (data_.count(name) == 0) {
      if (const OnnxTensor* t = g_.initializer(name)) return *t;
    }
    if (auto it = constants_.find(name); it != constants_.end()) return it->second;
    // A constant computed from itself, or from a chain deeper than any exporter writes, would
    // recurse without end.
    if (!evaluating_.insert(name).second || evaluating_.size() > kMaxConstantDepth) {
      refuse(user, fmt::format("its input '{}' is computed from itself or through more than {} "
                               "nodes",
                               name, kMaxConstantDepth));
    }
    OnnxTensor value = evaluate(user, name);
    evaluating_.erase(name);
    evaluated_ += static_cast<int64_t>(value.floats.size() + value.ints.size());
    if (evaluated_ > kMaxEvaluatedTotal) {
      refuse(user, "its constant inputs add up to more values than crossover evaluates");
    }
    return constants_[name] = std::move(value);
  }

  OnnxTensor evaluate(const OnnxNode& user, const std::string& name) {
    if (data_.count(name)) {
      refuse(user, fmt::format("takes the data '{}' where a constant is expected (only the data's "
                               "shape may feed a constant)",
                               name));
    }
    if (const OnnxTensor* t = g_.initializer(name)) return *t;
    const auto p = producer_.find(name);
    if (p == producer_.end()) {
      refuse(user,
             fmt::format("its input '{}' is neither an initializer nor computed by a node", name));
    }
    used_[p->second] = true;
    const OnnxNode& n = g_.nodes[p->second];
    if (!n.domain.empty() && n.domain != "ai.onnx") {
      refuse(n, fmt::format("operator of domain '{}' (not supported)", n.domain));
    }
    const std::string& op = n.op_type;
    OnnxTensor out;
    out.name = name;
    if (op == "Constant") {
      if (const OnnxAttribute* v = attr(n, "value", OnnxAttribute::Kind::Tensor)) {
        out = *v->tensor;
      } else if (const OnnxAttribute* f = attr(n, "value_float", OnnxAttribute::Kind::Float)) {
        out.floats = {static_cast<float>(f->f)};
      } else if (const OnnxAttribute* i = attr(n, "value_int", OnnxAttribute::Kind::Int)) {
        out.type = kOnnxInt64;
        out.ints = {i->i};
      } else if (const OnnxAttribute* is = attr(n, "value_ints", OnnxAttribute::Kind::Ints)) {
        out.type = kOnnxInt64;
        out.ints = is->ints;
        out.dims = {static_cast<int64_t>(is->ints.size())};
      } else if (const OnnxAttribute* fs = attr(n, "value_floats", OnnxAttribute::Kind::Floats)) {
        out.floats = fs->floats;
        out.dims = {static_cast<int64_t>(fs->floats.size())};
      } else {
        refuse(n,
               "a Constant without a value crossover reads (value, value_float(s), value_int(s))");
      }
    } else if (op == "Shape") {
      const std::string& of = input(n, 0);
      if (!shapes_.count(of)) refuse(n, fmt::format("the shape of '{}' is not known here", of));
      const std::vector<int64_t>& s = shapes_[of];
      const auto rank = static_cast<int64_t>(s.size());
      int64_t start =
          std::clamp(normalise_axis(attr_int(n, "start", 0), s.size()), int64_t{0}, rank);
      int64_t end =
          std::clamp(normalise_axis(attr_int(n, "end", rank), s.size()), int64_t{0}, rank);
      out.type = kOnnxInt64;
      out.ints.assign(s.begin() + start, s.begin() + std::max(start, end));
      out.dims = {static_cast<int64_t>(out.ints.size())};
    } else if (op == "Identity") {
      out = constant(n, input(n, 0));
    } else if (op == "Cast") {
      out = constant(n, input(n, 0));
      const int64_t to = attr_int(n, "to", 0);
      if (to == kOnnxFloat || to == kOnnxDouble) {
        if (out.is_integer()) out.floats.assign(out.ints.begin(), out.ints.end());
        out.ints.clear();
        out.type = kOnnxFloat;
      } else if (to == kOnnxInt64 || to == kOnnxInt32) {
        if (out.is_float()) {
          for (float f : out.floats) out.ints.push_back(static_cast<int64_t>(f));
        }
        out.floats.clear();
        out.type = kOnnxInt64;
      } else {
        refuse(n, fmt::format("a Cast to {} (crossover evaluates casts to FLOAT and INT64)",
                              onnx_element_type_name(static_cast<int32_t>(to))));
      }
    } else if (op == "Unsqueeze" || op == "Squeeze") {
      out = constant(n, input(n, 0));
      const std::vector<int64_t> axes = axes_of(n);
      if (op == "Unsqueeze") {
        const size_t rank = out.dims.size() + axes.size();
        std::vector<int64_t> dims;
        size_t next = 0;
        for (size_t d = 0; d < rank; ++d) {
          const bool inserted = std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
            return normalise_axis(a, rank) == static_cast<int64_t>(d);
          });
          if (inserted) {
            dims.push_back(1);
          } else if (next < out.dims.size()) {
            dims.push_back(out.dims[next++]);
          }
        }
        out.dims = dims;
      } else {
        std::vector<int64_t> dims;
        for (size_t d = 0; d < out.dims.size(); ++d) {
          const bool removed =
              axes.empty() ? out.dims[d] == 1
                           : std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
                               return normalise_axis(a, out.dims.size()) == static_cast<int64_t>(d);
                             });
          if (!removed) dims.push_back(out.dims[d]);
        }
        out.dims = dims;
      }
    } else if (op == "Concat") {
      std::vector<OnnxTensor> parts;
      for (const std::string& in : n.inputs) parts.push_back(constant(n, in));
      out = concat(n, parts, attr_int(n, "axis", 0));
    } else if (op == "Transpose") {
      const OnnxTensor& in = constant(n, input(n, 0));
      std::vector<int64_t> perm = attr_ints(n, "perm", {});
      if (perm.empty()) {
        for (size_t d = in.dims.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
      }
      out = transposed(n, in, perm);
    } else if (op == "Gather") {
      const OnnxTensor& data = constant(n, input(n, 0));
      const OnnxTensor& index = constant(n, input(n, 1));
      if (!data.is_integer() || data.dims.size() != 1 || !index.is_integer() ||
          index.dims.size() > 1 || attr_int(n, "axis", 0) != 0) {
        refuse(n, "a Gather crossover evaluates picks entries of a 1-D integer shape");
      }
      out.type = kOnnxInt64;
      out.dims = index.dims;
      for (int64_t i : index.ints) {
        const int64_t at = i < 0 ? i + static_cast<int64_t>(data.ints.size()) : i;
        if (at < 0 || at >= static_cast<int64_t>(data.ints.size())) {
          refuse(n, fmt::format("index {} is outside a shape of {} entries", i, data.ints.size()));
        }
        out.ints.push_back(data.ints[static_cast<size_t>(at)]);
      }
    } else if (op == "Slice") {
      const OnnxTensor& data = constant(n, input(n, 0));
      const SliceBounds b = slice_bounds(n);
      out = sliced(n, data, b.starts, b.ends, b.axes, b.steps);
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const OnnxTensor& a = constant(n, input(n, 0));
      const OnnxTensor& b = constant(n, input(n, 1));
      if (!a.is_integer() || !b.is_integer() ||
          (a.ints.size() != b.ints.size() && a.ints.size() != 1 && b.ints.size() != 1)) {
        refuse(n, "arithmetic crossover evaluates is on integer shapes");
      }
      out.type = kOnnxInt64;
      out.dims = a.ints.size() >= b.ints.size() ? a.dims : b.dims;
      const size_t count = std::max(a.ints.size(), b.ints.size());
      for (size_t i = 0; i < count; ++i) {
        const int64_t x = a.ints[a.ints.size() == 1 ? 0 : i],
                      y = b.ints[b.ints.size() == 1 ? 0 : i];
        int64_t r = 0;
        bool overflow = false;
        if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
        if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
        if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
        if (op == "Div") {
          if (y == 0) refuse(n, "divides by zero");
          r = x / y;
        }
        if (overflow) refuse(n, "overflows 64-bit integers");
        out.ints.push_back(r);
      }
    } else if (op == "ConstantOfShape") {
      const OnnxTensor& shape = constant(n, input(n, 0));
      if (!shape.is_integer()) refuse(n, "its shape is not an integer tensor");
      int64_t count = 1;
      for (int64_t d : shape.ints) {
        if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > kMaxEvaluated) {
          refuse(n, fmt::format("a constant of shape [{}] is larger than crossover evaluates",
                                shape_text(shape.ints)));
        }
      }
      const OnnxAttribute* v = attr(n, "value", OnnxAttribute::Kind::Tensor);
      out.dims = shape.ints;
      if (v && v->tensor->is_integer()) {
        out.type = kOnnxInt64;
        out.ints.assign(static_cast<size_t>(count),
                        v->tensor->ints.empty() ? 0 : v->tensor->ints[0]);
      } else {
        out.floats.assign(static_cast<size_t>(count),
                          v && !v->tensor->floats.empty() ? v->tensor->floats[0] : 0.0f);
      }
    } else {
      refuse(n, fmt::format("computes the input '{}' of {}, and crossover evaluates only shape "
                            "arithmetic and weight rearrangement (Constant, Shape, Gather, "
                            "Slice, Concat, Transpose, Unsqueeze, Squeeze, Cast, Add, Sub, Mul, "
                            "Div, ConstantOfShape) there",
                            name, user.described()));
    }
    return out;
  }

  // -- N-dimensional constants: row-major tensors of floats or integers --------------------
  static std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
    // A tensor with a zero dimension has no elements, whatever its other dimensions: their
    // products may not fit, and are never used (saturated here rather than overflowed).
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;) {
      if (__builtin_mul_overflow(strides[d], dims[d], &strides[d - 1])) {
        strides[d - 1] = std::numeric_limits<int64_t>::max();
      }
    }
    return strides;
  }
  // out[i] = in[source(i)] for every element of the output shape `dims`.
  template <typename Source>
  static OnnxTensor gathered(const OnnxTensor& in, std::vector<int64_t> dims, Source source) {
    OnnxTensor out;
    out.type = in.type;
    out.dims = std::move(dims);
    const int64_t count = product(out.dims);
    const std::vector<int64_t> strides = strides_of(out.dims);
    std::vector<int64_t> at(out.dims.size());
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i;
      for (size_t d = 0; d < at.size(); ++d) {
        at[d] = rest / strides[d];
        rest %= strides[d];
      }
      const auto from = static_cast<size_t>(source(at));
      if (in.is_float()) {
        out.floats.push_back(in.floats[from]);
      } else {
        out.ints.push_back(in.ints[from]);
      }
    }
    return out;
  }

  void check_materialised(const OnnxNode& n, const OnnxTensor& t) const {
    if (t.is_float() ? t.floats.size() != static_cast<size_t>(t.size())
                     : !t.is_integer() || t.ints.size() != static_cast<size_t>(t.size())) {
      refuse(n, fmt::format("an input of type {} without values crossover can read",
                            onnx_element_type_name(t.type)));
    }
  }

  OnnxTensor concat(const OnnxNode& n, const std::vector<OnnxTensor>& parts, int64_t axis_attr) {
    if (parts.empty()) refuse(n, "a Concat of nothing");
    const size_t rank = parts[0].dims.size();
    const int64_t axis = normalise_axis(axis_attr, rank);
    if (rank == 0 || axis < 0 || axis >= static_cast<int64_t>(rank)) {
      refuse(n, fmt::format("axis {} of a rank-{} tensor", axis_attr, rank));
    }
    // The concatenation along `axis` is the parts' blocks of `inner` elements interleaved.
    OnnxTensor out = parts[0];
    out.floats.clear();
    out.ints.clear();
    out.dims[static_cast<size_t>(axis)] = 0;
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= parts[0].dims[static_cast<size_t>(d)];
    for (const OnnxTensor& p : parts) {
      check_materialised(n, p);
      bool same = p.dims.size() == rank && p.is_float() == parts[0].is_float();
      for (size_t d = 0; same && d < rank; ++d) {
        same = static_cast<int64_t>(d) == axis || p.dims[d] == parts[0].dims[d];
      }
      if (!same) refuse(n, "its inputs' shapes or types do not concatenate");
      out.dims[static_cast<size_t>(axis)] += p.dims[static_cast<size_t>(axis)];
    }
    for (int64_t o = 0; o < outer; ++o) {
      for (const OnnxTensor& p : parts) {
        const int64_t block = p.size() / std::max<int64_t>(outer, 1);
        if (p.is_float()) {
          out.floats.insert(out.floats.end(), p.floats.begin() + o * block,
                            p.floats.begin() + (o + 1) * block);
        } else {
          out.ints.insert(out.ints.end(), p.ints.begin() + o * block,
                          p.ints.begin() + (o + 1) * block);
        }
      }
    }
    return out;
  }

  OnnxTensor transposed(const OnnxNode& n, const OnnxTensor& in, const std::vector<int64_t>& perm) {
    check_materialised(n, in);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t d = 0; d < sorted.size(); ++d) {
      if (sorted[d] != static_cast<int64_t>(d) || perm.size() != in.dims.size()) {
        refuse(n, fmt::format("perm [{}] is not a permutation of {} axes", fmt::join(perm, ", "),
                              in.dims.size()));
      }
    }
    std::vector<int64_t> dims;
    for (int64_t p : perm) dims.push_back(in.dims[static_cast<size_t>(p)]);
    const std::vector<int64_t> strides = strides_of(in.dims);
    return gathered(in, dims, [&](const std::vector<int64_t>& at) {
      int64_t from = 0;
      for (size_t d = 0; d < at.size(); ++d) from += at[d] * strides[static_cast<size_t>(perm[d])];
      return from;
    });
  }

  OnnxTensor sliced(const OnnxNode& n, const OnnxTensor& in, const std::vector<int64_t>& starts,
                    const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                    const std::vector<int64_t>& steps) {
    check_materialised(n, in);
    if (axes.empty()) {
      for (size_t d = 0; d < starts.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    }
    const bool unit_steps =
        std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
    if (starts.size() != ends.size() || starts.size() != axes.size() || !unit_steps ||
        (!steps.empty() && steps.size() != starts.size())) {
      refuse(n, "a Slice crossover evaluates has one start and end per axis and steps of 1");
    }
    std::vector<int64_t> from(in.dims.size(), 0), dims = in.dims;
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t axis = normalise_axis(axes[k], in.dims.size());
      if (axis < 0 || axis >= static_cast<int64_t>(in.dims.size())) {
        refuse(n, fmt::format("axis {} of a rank-{} tensor", axes[k], in.dims.size()));
      }
      const int64_t size = in.dims[static_cast<size_t>(axis)];
      auto clamp_index = [&](int64_t i) {
        return std::clamp(i < 0 ? i + size : i, int64_t{0}, size);
      };
      const int64_t begin = clamp_index(starts[k]), end = clamp_index(ends[k]);
      from[static_cast<size_t>(axis)] = begin;
      dims[static_cast<size_t>(axis)] = std::max<int64_t>(end - begin, 0);
    }
    const std::vector<int64_t> strides = strides_of(in.dims);
    return gathered(in, dims, [&](const std::vector<int64_t>& at) {
      int64_t offset = 0;
      for (size_t d = 0; d < at.size(); ++d) offset += (at[d] + from[d]) * strides[d];
      return offset;
    });
  }

  // Whether a non-data input is all zeros (an LSTM's initial state), without building it: a
  // ConstantOfShape of 0 and reshapes or slices of it.
  bool is_zero(const OnnxNode& user, const std::string& name, size_t depth = 0) {
    if (data_.count(name) || depth > kMaxConstantDepth) return false;
    auto all_zero = [](const OnnxTensor& t) {
      return std::all_of(t.floats.begin(), t.floats.end(), [](float v) { return v == 0.0f; }) &&
             std::all_of(t.ints.begin(), t.ints.end(), [](int64_t v) { return v == 0; });
    };
    if (const OnnxTensor* t = g_.initializer(name)) return all_zero(*t);
    const auto p = producer_.find(name);
    if (p == producer_.end()) return false;
    const OnnxNode& n = g_.nodes[p->second];
    static const std::set<std::string> kViews = {"Slice",  "Squeeze",  "Unsqueeze", "Reshape",
                                                 "Expand", "Identity", "Transpose", "Cast"};
    if (n.op_type == "ConstantOfShape") {
      const OnnxAttribute* v = attr(n, "value", OnnxAttribute::Kind::Tensor);
      if (v && !all_zero(*v->tensor)) return false;
      used_[p->second] = true;
      constant(n, input(n, 0));  // the shape: evaluated to check it is shape arithmetic
      return true;
    }
    if (kViews.count(n.op_type)) {
      if (!is_zero(n, input(n, 0), depth + 1)) return false;
      used_[p->second] = true;
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        if (!n.inputs[i].empty()) constant(n, n.inputs[i]);
      }
      return true;
    }
    if (n.op_type == "Constant") return all_zero(constant(user, name));
    return false;
  }

  // A Slice's bounds: attributes before opset 10, constant inputs from 10 on (axes and steps
  // optional; empty when absent).
  struct SliceBounds {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  SliceBounds slice_bounds(const OnnxNode& n) {
    SliceBounds b;
    if (g_.opset < 10) {
      b.starts = attr_ints(n, "starts", {});
      b.ends = attr_ints(n, "ends", {});
      b.axes = attr_ints(n, "axes", {});
    } else {
      b.starts = constant(n, input(n, 1)).ints;
      b.ends = constant(n, input(n, 2)).ints;
      if (!input(n, 3).empty()) b.axes = constant(n, input(n, 3)).ints;
      if (!input(n, 4).empty()) b.steps = constant(n, input(n, 4)).ints;
    }
    return b;
  }

  // Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13 on.
  std::vector<int64_t> axes_of(const OnnxNode& n) {
    if (g_.opset < 13 || input(n, 1).empty()) return attr_ints(n, "axes", {});
    return constant(n, input(n, 1)).ints;
  }
  // ReduceMean/ReduceMax axes: an attribute (an input from opset 18 on).
  std::vector<int64_t> reduce_axes(const OnnxNode& n) {
    if (!input(n, 1).empty()) return constant(n, input(n, 1)).ints;
    return attr_ints(n, "axes", {});
  }

  // A float tensor that becomes a parameter: an initializer (or a Constant).
  const OnnxTensor& weight(const OnnxNode& n, size_t index, std::string_view what) {
    const std::string& name = input(n, index);
    if (name.empty()) refuse(n, fmt::format("has no {}", what));
    if (data_.count(name)) {
      refuse(n, fmt::format("its {} is the data '{}' (crossover's layers take weights there)", what,
                            name));
    }
    const OnnxTensor& t = constant(n, name);
    if (!t.is_float()) {
      refuse(n, fmt::format("its {} '{}' holds {} (expected FLOAT weights)", what, name,
                            onnx_element_type_name(t.type)));
    }
    return t;
  }

  void no_users(const OnnxNode& n, size_t from_output, std::string_view what) const {
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

  void takes_data_first(const OnnxNode& n) const {
    if (input(n, 0) != current_) {
      refuse(n, fmt::format("takes the data '{}' as another input than its first", current_));
    }
  }

  // -- layers --------------------------------------------------------------------------------
  using Weights = std::map<std::string, NamedTensor>;

  static NamedTensor tensor(std::vector<int64_t> shape, std::vector<float> data) {
    NamedTensor t;
    t.shape = std::move(shape);
    t.data = std::move(data);
    return t;
  }

  void add_layer(LayerSpec l, const OnnxNode& n, Weights weights, Layout layout) {
    out_.spec.layers.push_back(l);
    const size_t index = out_.spec.layers.size() - 1;
    std::vector<int64_t> shape = layer_output_shape(out_.spec, index, sample_);
    layer_inputs_.push_back(sample_);
    weights_.push_back(std::move(weights));
    out_.sources.push_back(n.name.empty() ? n.described() : n.name);
    module_.push_back(module_index(n.name));
    lstm_layer_ = -1;
    set_current(output_of(n), layout, std::move(shape));
  }

  // "/3/Gemm" → 3: the index of the torch.nn.Sequential module the node came from; -1 for none.
  static int64_t module_index(const std::string& name) {
    if (name.size() < 3 || name[0] != '/') return -1;
    const size_t end = name.find('/', 1);
    if (end == std::string::npos || end == 1) return -1;
    int64_t v = 0;
    for (size_t i = 1; i < end; ++i) {
      if (name[i] < '0' || name[i] > '9' || v > 1'000'000) return -1;
      v = v * 10 + (name[i] - '0');
    }
    return v;
  }

  void step(const OnnxNode& n) {
    if (used_[&n - g_.nodes.data()]) {
      refuse(n, "is reached twice from the input: the graph has a cycle");
    }
    used_[&n - g_.nodes.data()] = true;
    output_of(n);  // every node on the chain has an output
    if (!n.domain.empty() && n.domain != "ai.onnx") {
      refuse(n,
             fmt::format("operator of domain '{}' (crossover supports the standard operators: {})",
                         n.domain, kSupported));
    }
    const std::string& op = n.op_type;
    if (pending_pad_ > 0 && op != "Conv" && op != "AveragePool") {
      refuse(n, "follows a Pad: crossover folds a Pad only into the Conv or AveragePool after it");
    }
    if (op == "Gather") return gather(n);
    if (ids_ && out_.spec.layers.empty()) {
      refuse(n,
             "the input holds token ids, so the first node must be a Gather on a weight (an "
             "embedding)");
    }
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul") return matmul(n);
    if (op == "Conv") return conv(n);
    if (op == "Relu" || op == "Tanh")
      return activation(n, op == "Relu" ? LayerType::ReLU : LayerType::Tanh);
    if (op == "Sigmoid") return sigmoid(n);
    if (op == "MaxPool" || op == "AveragePool") return pool(n);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return global_pool(n);
    if (op == "Flatten") return flatten(n);
    if (op == "Reshape") return reshape(n);
    if (op == "Dropout") return dropout(n);
    if (op == "BatchNormalization") return batch_norm(n);
    if (op == "LSTM") return lstm(n);
    if (op == "Transpose") return transpose(n);
    if (op == "Squeeze") return squeeze(n);
    if (op == "ReduceMean" || op == "ReduceMax") return reduce(n);
    if (op == "Softmax" || op == "LogSoftmax") return softmax(n);
    if (op == "Pad") return pad(n);
    if (op == "Slice") return slice_last_step(n);
    if (op == "Identity") {
      takes_data_first(n);
      return set_current(output_of(n), layout_, sample_);
    }
    if (op == "Add") {
      refuse(n,
             "crossover maps an Add only as the bias of a MatMul (a linear layer); an Add of "
             "two branches is a residual connection, which is not supported");
    }
    refuse(n, fmt::format("operator {} is not supported (crossover maps: {})", op, kSupported));
  }

  void need(const OnnxNode& n, bool ok, const std::string& expected) const {
    if (!ok) {
      refuse(n, fmt::format("{} (the data here is [{}] per sample)", expected,
                            fmt::join(sample_, ", ")));
    }
  }

  void gemm(const OnnxNode& n) {
    known_attributes(n, {"alpha", "beta", "transA", "transB"});
    takes_data_first(n);
    need(n, layout_ == Layout::Batch && sample_.size() == 1, "a Gemm takes flat features [F]");
    if (attr_int(n, "transA", 0) != 0) refuse(n, "transA = 1 (the data transposed) is not a layer");
    if (attr_float(n, "alpha", 1.0) != 1.0 || attr_float(n, "beta", 1.0) != 1.0) {
      refuse(n, "alpha and beta other than 1 are not supported (crossover's linear is x·Wᵀ + b)");
    }
    linear(n, weight(n, 1, "weight B"), attr_int(n, "transB", 0) != 0,
           input(n, 2).empty() ? std::nullopt : std::optional(weight(n, 2, "bias C")), n);
  }

  // `w` is [out, in] when `out_first`, else [in, out] (transposed here to PyTorch's layout).
  void linear(const OnnxNode& n, const OnnxTensor& w, bool out_first,
              const std::optional<OnnxTensor>& bias, const OnnxNode& last) {
    if (w.dims.size() != 2) {
      refuse(n, fmt::format("weight '{}' has the shape [{}] (expected a matrix)", w.name,
                            fmt::join(w.dims, ", ")));
    }
    const int64_t in = out_first ? w.dims[1] : w.dims[0];
    const int64_t out = out_first ? w.dims[0] : w.dims[1];
    if (in != sample_[0]) {
      refuse(n, fmt::format("weight '{}' [{}] takes {} features, the data has {}", w.name,
                            fmt::join(w.dims, ", "), in, sample_[0]));
    }
    std::vector<float> data = w.floats;
    if (!out_first) {
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) data[o * in + i] = w.floats[i * out + o];
      }
    }
    Weights weights{{"weight", tensor({out, in}, std::move(data))}};
    if (bias) {
      if (bias->size() != out || bias->dims.size() > 2 ||
          (bias->dims.size() == 2 && bias->dims[0] != 1)) {
        refuse(last, fmt::format("bias '{}' has the shape [{}] (expected [{}], one per output)",
                                 bias->name, fmt::join(bias->dims, ", "), out));
      }
      weights["bias"] = tensor({out}, bias->floats);
    }
    LayerSpec l;
    l.type = LayerType::Linear;
    l.out = out;
    l.bias = bias.has_value();
    add_layer(l, last, std::move(weights), Layout::Batch);
  }

  void matmul(const OnnxNode& n) {
    known_attributes(n, {});
    takes_data_first(n);
    need(
        n, layout_ == Layout::Batch && sample_.size() == 1,
        "a MatMul is a linear layer on flat features [F] (crossover has no linear layer over every "
        "step of a sequence)");
    const OnnxTensor& w = weight(n, 1, "right-hand matrix");
    // A following Add of a constant vector is the bias.
    const auto& users = consumers_[output_of(n)];
    if (users.size() == 1 && n.outputs[0] != output_) {
      const OnnxNode& add = g_.nodes[users[0]];
      const std::string& other = input(add, 0) == n.outputs[0] ? input(add, 1) : input(add, 0);
      if (add.op_type == "Add" && add.inputs.size() == 2 && !data_.count(other) &&
          (g_.initializer(other) || producer_.count(other))) {
        used_[users[0]] = true;
        data_.insert(n.outputs[0]);
        return linear(n, w, false, weight(add, input(add, 0) == n.outputs[0] ? 1 : 0, "bias"), add);
      }
    }
    linear(n, w, false, std::nullopt, n);
  }

  // Square windows with equal strides and equal padding on every side, as crossover's layers have.
  struct Window {
    int64_t kernel = 0, stride = 1, padding = 0;
  };
  Window window(const OnnxNode& n, std::vector<int64_t> kernel, int64_t default_stride) {
    if (kernel.size() != 2 || kernel[0] != kernel[1]) {
      refuse(n, fmt::format("kernel [{}]: crossover's windows are square over two dimensions",
                            fmt::join(kernel, ", ")));
    }
    const std::vector<int64_t> strides = attr_ints(n, "strides", {default_stride, default_stride});
    if (strides.size() != 2 || strides[0] != strides[1]) {
      refuse(n, fmt::format("strides [{}]: crossover's windows have one stride for both dimensions",
                            fmt::join(strides, ", ")));
    }
    const std::vector<int64_t> dilations = attr_ints(n, "dilations", {1, 1});
    if (std::any_of(dilations.begin(), dilations.end(), [](int64_t d) { return d != 1; })) {
      refuse(n, fmt::format("dilations [{}] are not supported", fmt::join(dilations, ", ")));
    }
    const std::vector<int64_t> pads_attr = attr_ints(n, "pads", {});
    const std::pair<const char*, const std::vector<int64_t>*> extents[] = {
        {"kernel", &kernel}, {"strides", &strides}, {"pads", &pads_attr}};
    for (const auto& [what, values] : extents) {
      const int64_t least = std::string_view(what) == "pads" ? 0 : 1;
      for (int64_t x : *values) {
        if (x < least || x > kMaxExtent) {
          refuse(n, fmt::format("{} [{}] (expected sizes from {} to 2^24)", what,
                                fmt::join(*values, ", "), least));
        }
      }
    }
    Window w{kernel[0], strides[0], 0};
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    if (pending_pad_ > 0 && auto_pad != "NOTSET") refuse(n, "auto_pad after a Pad node");
    if (auto_pad == "VALID") return w;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      if (w.stride != 1 || w.kernel % 2 == 0) {
        refuse(n, fmt::format("auto_pad {} with a {}x{} kernel and stride {} pads unevenly, which "
                              "crossover's layers do not",
                              auto_pad, w.kernel, w.kernel, w.stride));
      }
      w.padding = (w.kernel - 1) / 2;
      return w;
    }
    if (auto_pad != "NOTSET") refuse(n, fmt::format("auto_pad '{}' is not supported", auto_pad));
    const std::vector<int64_t> pads = attr_ints(n, "pads", {0, 0, 0, 0});
    if (pads.size() != 4 ||
        std::any_of(pads.begin(), pads.end(), [&](int64_t p) { return p != pads[0]; })) {
      refuse(n, fmt::format("pads [{}]: crossover pads every side equally", fmt::join(pads, ", ")));
    }
    w.padding = pads[0];
    if (pending_pad_ > 0) {  // the Pad node before this one
      if (w.padding != 0) refuse(n, "pads of its own after a Pad node");
      w.padding = pending_pad_;
      pending_pad_ = 0;
    }
    return w;
  }

  void conv(const OnnxNode& n) {
    known_attributes(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
    takes_data_first(n);
    need(n, layout_ == Layout::Batch && sample_.size() == 3,
         "a Conv crossover maps is 2-D, on [channels, height, width]");
    if (attr_int(n, "group", 1) != 1) {
      refuse(n, fmt::format("group = {} (grouped or depthwise convolutions are not supported)",
                            attr_int(n, "group", 1)));
    }
    const OnnxTensor& w = weight(n, 1, "weight W");
    if (w.dims.size() != 4 || w.dims[1] != sample_[0]) {
      refuse(n, fmt::format("weight '{}' has the shape [{}] (expected [out, {}, k, k])", w.name,
                            fmt::join(w.dims, ", "), sample_[0]));
    }
    const std::vector<int64_t> kernel = attr_ints(n, "kernel_shape", {w.dims[2], w.dims[3]});
    if (kernel != std::vector<int64_t>{w.dims[2], w.dims[3]}) {
      refuse(n, fmt::format("kernel_shape [{}] differs from its weight's [{}, {}]",
                            fmt::join(kernel, ", "), w.dims[2], w.dims[3]));
    }
    const Window win = window(n, kernel, 1);
    Weights weights{{"weight", tensor(w.dims, w.floats)}};
    LayerSpec l;
    l.type = LayerType::Conv2d;
    l.out = w.dims[0];
    l.kernel = win.kernel;
    l.stride = win.stride;
    l.padding = win.padding;
    l.bias = !input(n, 2).empty();
    if (l.bias) {
      const OnnxTensor& b = weight(n, 2, "bias B");
      if (b.dims != std::vector<int64_t>{l.out}) {
        refuse(n, fmt::format("bias '{}' has the shape [{}] (expected [{}])", b.name,
                              fmt::join(b.dims, ", "), l.out));
      }
      weights["bias"] = tensor({l.out}, b.floats);
    }
    add_layer(l, n, std::move(weights), Layout::Batch);
  }

  void activation(const OnnxNode& n, LayerType type) {
    known_attributes(n, {});
    takes_data_first(n);
    need(n, layout_ == Layout::Batch, "an activation here is not on a layer's output");
    LayerSpec l;
    l.type = type;
    add_layer(l, n, {}, Layout::Batch);
  }

  // The tensor leads to the graph's output through nothing but Squeeze and Identity nodes.
  bool leads_to_output(const std::string& tensor, std::vector<int>& through) const {
    if (tensor == output_) return true;
    const auto it = consumers_.find(tensor);
    if (it == consumers_.end() || it->second.size() != 1) return false;
    const OnnxNode& next = g_.nodes[it->second[0]];
    if (next.op_type != "Squeeze" && next.op_type != "Identity") return false;
    through.push_back(it->second[0]);
    return leads_to_output(output_of(next), through);
  }

  void end_in_loss(const OnnxNode& n, LossType loss, std::vector<int>& through, std::string note) {
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

  void sigmoid(const OnnxNode& n) {
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

  void softmax(const OnnxNode& n) {
    known_attributes(n, {"axis"});
    takes_data_first(n);
    std::vector<int> through;
    need(n,
         layout_ == Layout::Batch && sample_.size() == 1 && leads_to_output(output_of(n), through),
         fmt::format("{} is supported only as the last node, over the class scores", n.op_type));
    const int64_t axis = normalise_axis(attr_int(n, "axis", g_.opset >= 13 ? -1 : 1), 2);
    if (axis != 1) refuse(n, fmt::format("axis {} is not the class axis", attr_int(n, "axis", 0)));
    end_in_loss(n, LossType::CrossEntropy, through,
                fmt::format("the final {} is part of the cross_entropy loss (which applies a "
                            "softmax to the scores, as PyTorch's CrossEntropyLoss does)",
                            n.op_type));
  }

  void pool(const OnnxNode& n) {
    const bool max = n.op_type == "MaxPool";
    if (max) {
      known_attributes(n, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                           "storage_order", "strides"});
      no_users(n, 1, "the arg-max indices");
    } else {
      known_attributes(
          n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
    }
    takes_data_first(n);
    need(n, layout_ == Layout::Batch && sample_.size() == 3,
         "a pool crossover maps is 2-D, on [channels, height, width]");
    if (attr_int(n, "ceil_mode", 0) != 0) refuse(n, "ceil_mode = 1 is not supported");
    const bool padded_before = pending_pad_ > 0;  // zeros of a Pad node are data: counted
    const Window win = window(n, attr_ints(n, "kernel_shape", {}), 1);
    if (!max && !padded_before && win.padding > 0 && attr_int(n, "count_include_pad", 0) == 0) {
      refuse(n,
             "an average over padding that leaves the padding out of the count "
             "(count_include_pad = 0) is not supported: crossover's avgpool2d counts it, as "
             "PyTorch's default");
    }
    LayerSpec l;
    l.type = max ? LayerType::MaxPool2d : LayerType::AvgPool2d;
    l.kernel = win.kernel;
    l.stride = win.stride;
    l.padding = win.padding;
    add_layer(l, n, {}, Layout::Batch);
  }

  // A pool over the whole (square) map: [C, H, H] → [C, 1, 1].
  void whole_map_pool(const OnnxNode& n, bool max, const std::string& output) {
    if (sample_[1] != sample_[2]) {
      refuse(n, fmt::format("a pool over a {}x{} map: crossover's pools are square", sample_[1],
                            sample_[2]));
    }
    LayerSpec l;
    l.type = max ? LayerType::MaxPool2d : LayerType::AvgPool2d;
    l.kernel = l.stride = sample_[1];
    OnnxNode named = n;
    named.outputs = {output};
    add_layer(l, named, {}, Layout::Batch);
  }

  void global_pool(const OnnxNode& n) {
    known_attributes(n, {});
    takes_data_first(n);
    need(n, layout_ == Layout::Batch && sample_.size() == 3,
         "a global pool crossover maps is over the map of [channels, height, width]");
    whole_map_pool(n, n.op_type == "GlobalMaxPool", output_of(n));
  }

  void flatten(const OnnxNode& n) {
    known_attributes(n, {"axis"});
    takes_data_first(n);
    need(n, layout_ == Layout::Batch, "a Flatten here would mix the batch with the sequence");
    const int64_t axis = normalise_axis(attr_int(n, "axis", 1), sample_.size() + 1);
    if (axis != 1) refuse(n, fmt::format("axis {}: crossover flattens each sample (axis 1)", axis));
    LayerSpec l;
    l.type = LayerType::Flatten;
    add_layer(l, n, {}, Layout::Batch);
  }

  void reshape(const OnnxNode& n) {
    known_attributes(n, {"allowzero"});
    takes_data_first(n);
    const OnnxTensor& target = constant(n, input(n, 1));
    if (!target.is_integer()) refuse(n, "its shape is not an integer tensor");
    std::vector<int64_t> in = full_shape();
    // Exported with a fixed batch, x.view(x.size(0), -1) folds to [2, -1]: the -1 is inferred
    // from that batch, not from the number standing for a dynamic one.
    if (export_batch_ > 0 && !target.ints.empty() && target.ints[0] == export_batch_) {
      std::replace(in.begin(), in.end(), kBatch, export_batch_);
    }
    std::vector<int64_t> out;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < target.ints.size(); ++i) {
      int64_t d = target.ints[i];
      if (d == 0 && attr_int(n, "allowzero", 0) == 0 && i < in.size()) d = in[i];
      if (d == -1) {
        infer = static_cast<int64_t>(i);
      } else if (d < 0 || __builtin_mul_overflow(known, d, &known)) {
        refuse(n, fmt::format("reshapes to [{}]", fmt::join(target.ints, ", ")));
      }
      out.push_back(d);
    }
    const int64_t total = product(in);
    if (infer >= 0 && known > 0 && total % known == 0)
      out[static_cast<size_t>(infer)] = total / known;
    const int64_t features = product(sample_);
    // A model exported with a fixed batch may carry its batch folded into the target.
    const bool batch_first =
        !out.empty() && (out[0] == kBatch || (export_batch_ > 0 && out[0] == export_batch_));
    const bool flat = out.size() == 2 && batch_first && out[1] == features;
    if (!flat || (layout_ != Layout::Batch && layout_ != Layout::LstmState)) {
      refuse(n, fmt::format("reshapes [{}] to [{}]: crossover maps a Reshape only to flatten each "
                            "sample to [N, {}]",
                            shape_text(in), shape_text(target.ints), features));
    }
    if (layout_ == Layout::LstmState || sample_.size() == 1) {
      return set_current(output_of(n), Layout::Batch, {features});  // already flat per sample
    }
    LayerSpec l;
    l.type = LayerType::Flatten;
    add_layer(l, n, {}, Layout::Batch);
  }

  // PyTorch exports a pool's padding as a Pad before it: zeros on the spatial sides, folded into
  // the next Conv or AveragePool (whose average counts them, as crossover's does).
  void pad(const OnnxNode& n) {
    known_attributes(n, {"mode", "pads", "value"});
    takes_data_first(n);
    if (attr_string(n, "mode", "constant") != "constant") {
      refuse(n,
             fmt::format("mode '{}' (crossover pads with zeros only)", attr_string(n, "mode", "")));
    }
    const std::vector<int64_t> pads =
        g_.opset < 11 ? attr_ints(n, "pads", {}) : constant(n, input(n, 1)).ints;
    double value = attr_float(n, "value", 0.0);
    if (g_.opset >= 11 && !input(n, 2).empty()) {
      const OnnxTensor& v = constant(n, input(n, 2));
      value = v.is_float() && !v.floats.empty() ? v.floats[0] : v.ints.empty() ? 0.0 : v.ints[0];
    }
    const bool none = std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
    if (none) return set_current(output_of(n), layout_, sample_);
    const std::vector<int64_t> shape = full_shape();
    if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0 || p > kMaxExtent; })) {
      refuse(n, fmt::format("pads [{}] (expected 0 to 2^24 each)", fmt::join(pads, ", ")));
    }
    const bool spatial = layout_ == Layout::Batch && sample_.size() == 3 && pads.size() == 8 &&
                         pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0 &&
                         pads[2] > 0 && pads[2] == pads[3] && pads[2] == pads[6] &&
                         pads[2] == pads[7];
    if (!spatial || value != 0.0) {
      refuse(n, fmt::format("pads [{}] with {} on data laid out [{}] (crossover folds equal zero "
                            "padding of height and width into the next layer)",
                            fmt::join(pads, ", "), value, fmt::join(shape, ", ")));
    }
    pending_pad_ = pads[2];
    set_current(output_of(n), layout_, sample_);
  }

  void dropout(const OnnxNode& n) {
    known_attributes(n, {"ratio", "seed"});
    takes_data_first(n);
    no_users(n, 1, "the dropout mask");
    double ratio = attr_float(n, "ratio", 0.5);
    if (!input(n, 1).empty()) {
      const OnnxTensor& r = constant(n, input(n, 1));
      if (!r.is_float() || r.floats.size() != 1) refuse(n, "its ratio is not one number");
      ratio = r.floats[0];
    }
    if (!input(n, 2).empty()) constant(n, input(n, 2));  // training_mode: crossover trains
    if (!(ratio >= 0 && ratio < 1)) refuse(n, fmt::format("ratio {} (expected [0, 1))", ratio));
    LayerSpec l;
    l.type = LayerType::Dropout;
    l.p = shortest_float(ratio);
    add_layer(l, n, {}, layout_);
  }

  void batch_norm(const OnnxNode& n) {
    known_attributes(n, {"epsilon", "momentum", "training_mode", "spatial"});
    takes_data_first(n);
    no_users(n, 1, "the running statistics of training mode");
    need(n, layout_ == Layout::Batch && sample_.size() >= 1 && sample_.size() <= 3,
         "a BatchNormalization crossover maps normalises [C], [C, L] or [C, H, W]");
    if (attr_int(n, "spatial", 1) != 1) refuse(n, "spatial = 0 is not supported");
    const int64_t channels = sample_[0];
    Weights weights;
    const char* names[] = {"weight", "bias", "running_mean", "running_var"};
    const char* what[] = {"scale", "bias B", "input_mean", "input_var"};
    for (size_t i = 0; i < 4; ++i) {
      const OnnxTensor& t = weight(n, i + 1, what[i]);
      if (t.dims != std::vector<int64_t>{channels}) {
        refuse(n, fmt::format("its {} '{}' has the shape [{}] (expected [{}])", what[i], t.name,
                              fmt::join(t.dims, ", "), channels));
      }
      weights[names[i]] = tensor({channels}, t.floats);
    }
    NamedTensor batches = tensor({}, {0.0f});
    batches.dtype = "I64";
    weights["num_batches_tracked"] = batches;
    LayerSpec l;
    l.type = sample_.size() == 3 ? LayerType::BatchNorm2d : LayerType::BatchNorm1d;
    l.eps = shortest_float(attr_float(n, "epsilon", 1e-5));
    // ONNX keeps `momentum` of the running statistics; PyTorch weights the batch by 1 - that.
    const float onnx_momentum = static_cast<float>(attr_float(n, "momentum", 0.9));
    l.momentum = 1.0 - onnx_momentum;
    for (int digits = 1; digits <= 9; ++digits) {
      const double candidate =
          std::strtod(fmt::format("{:.{}g}", 1.0 - onnx_momentum, digits).c_str(), nullptr);
      if (static_cast<float>(1.0 - candidate) == onnx_momentum) {
        l.momentum = candidate;
        break;
      }
    }
    add_layer(l, n, std::move(weights), Layout::Batch);
  }

  void transpose(const OnnxNode& n) {
    known_attributes(n, {"perm"});
    takes_data_first(n);
    const std::vector<int64_t> perm = attr_ints(n, "perm", {});
    const std::vector<int64_t> swap{1, 0, 2};
    const bool sequence =
        (layout_ == Layout::Batch && sample_.size() == 2) || layout_ == Layout::Time;
    const bool channels =
        perm == std::vector<int64_t>{0, 3, 1, 2} || perm == std::vector<int64_t>{0, 2, 3, 1};
    if (channels) {
      refuse(n, fmt::format("perm [{}] moves the channels (the channels-last layout of a Keras "
                            "model converted by tf2onnx): crossover's layers are channels-first, "
                            "as PyTorch's, and a channels-last graph is not supported",
                            fmt::join(perm, ", ")));
    }
    if (!sequence || perm != swap) {
      refuse(n,
             fmt::format("perm [{}] on data laid out [{}]: crossover maps a Transpose only as the "
                         "swap of batch and time around an LSTM (perm [1, 0, 2])",
                         fmt::join(perm, ", "), shape_text(full_shape())));
    }
    const int keep = lstm_layer_;
    set_current(output_of(n), layout_ == Layout::Time ? Layout::Batch : Layout::Time, sample_);
    lstm_layer_ = keep;
  }

  void squeeze(const OnnxNode& n) {
    known_attributes(n, {"axes"});
    takes_data_first(n);
    std::vector<int64_t> axes = axes_of(n);
    const std::vector<int64_t> shape = full_shape();
    for (int64_t& a : axes) a = normalise_axis(a, shape.size());
    const int keep = lstm_layer_;
    if (layout_ == Layout::LstmY && axes == std::vector<int64_t>{1}) {
      set_current(output_of(n), Layout::Time, sample_);
    } else if (layout_ == Layout::LstmYBatch && axes == std::vector<int64_t>{2}) {
      set_current(output_of(n), Layout::Batch, sample_);
    } else if (layout_ == Layout::LstmState && axes == std::vector<int64_t>{0}) {
      set_current(output_of(n), Layout::Batch, sample_);
    } else if (layout_ == Layout::Batch && sample_ == std::vector<int64_t>{1} &&
               (axes.empty() || axes == std::vector<int64_t>{1})) {
      set_current(output_of(n), Layout::Squeezed, sample_);
    } else {
      refuse(n, fmt::format("squeezes axes [{}] of data laid out [{}] (crossover maps a Squeeze of "
                            "an LSTM's direction axis, or of a final single score)",
                            fmt::join(axes, ", "), shape_text(shape)));
    }
    lstm_layer_ = keep;
  }

  void lstm(const OnnxNode& n) {
    known_attributes(n, {"activations", "direction", "hidden_size", "layout"});
    const OnnxAttribute* acts = attr(n, "activations", OnnxAttribute::Kind::Strings);
    if (acts && acts->strings != std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}) {
      refuse(n, fmt::format("activations [{}] (crossover's lstm is PyTorch's: Sigmoid, Tanh, Tanh)",
                            fmt::join(acts->strings, ", ")));
    }
    const std::string direction = attr_string(n, "direction", "forward");
    if (direction != "forward") {
      refuse(n, fmt::format("direction '{}' (crossover's lstm runs forward only; a bidirectional "
                            "LSTM is not supported)",
                            direction));
    }
    const int64_t layout = attr_int(n, "layout", 0);
    takes_data_first(n);
    const bool time_first = layout == 0;
    need(n,
         sample_.size() == 2 &&
             ((time_first && layout_ == Layout::Time) || (!time_first && layout_ == Layout::Batch)),
         time_first ? "an LSTM with layout 0 reads a sequence stored [T, N, F] (after a Transpose "
                      "of batch and time)"
                    : "an LSTM with layout 1 reads a sequence stored [N, T, F]");
    for (size_t i : {size_t{4}, size_t{7}}) {
      if (!input(n, i).empty()) {
        refuse(n, i == 4 ? "sequence_lens (sequences of several lengths) is not supported"
                         : "peepholes (input P) are not supported");
      }
    }
    for (size_t i : {size_t{5}, size_t{6}}) {
      if (!input(n, i).empty() && !is_zero(n, input(n, i))) {
        refuse(n, fmt::format("its initial {} state '{}' is not zero (crossover's lstm starts from "
                              "zeros, as PyTorch's does without h0, c0)",
                              i == 5 ? "hidden" : "cell", input(n, i)));
      }
    }
    const int64_t input_size = sample_[1];
    const OnnxTensor& w = weight(n, 1, "weight W");
    const OnnxTensor& r = weight(n, 2, "recurrence weight R");
    const int64_t hidden = attr_int(n, "hidden_size", w.dims.size() == 3 ? w.dims[1] / 4 : 0);
    if (hidden <= 0 || hidden > kMaxExtent) {
      refuse(n, fmt::format("hidden_size {} (expected 1 to 2^24)", hidden));
    }
    if (w.dims != std::vector<int64_t>{1, 4 * hidden, input_size}) {
      refuse(n, fmt::format("W '{}' has the shape [{}] (expected [1, {}, {}])", w.name,
                            fmt::join(w.dims, ", "), 4 * hidden, input_size));
    }
    if (r.dims != std::vector<int64_t>{1, 4 * hidden, hidden}) {
      refuse(n, fmt::format("R '{}' has the shape [{}] (expected [1, {}, {}])", r.name,
                            fmt::join(r.dims, ", "), 4 * hidden, hidden));
    }
    // crossover's lstm always trains biases (nn.LSTM's bias=True): zeros in place of a missing B
    // would train into a different model.
    if (input(n, 3).empty()) {
      refuse(n,
             "has no bias B: crossover's lstm has trained biases (nn.LSTM with bias=True), so "
             "an LSTM without them is not supported");
    }
    const OnnxTensor& b = weight(n, 3, "bias B");
    if (b.dims != std::vector<int64_t>{1, 8 * hidden}) {
      refuse(n, fmt::format("B '{}' has the shape [{}] (expected [1, {}])", b.name,
                            fmt::join(b.dims, ", "), 8 * hidden));
    }
    const std::vector<float>& bias = b.floats;
    // Y continues (every step), or Y_h (the last step); Y_c is never used.
    no_users(n, 2, "the final cell state Y_c");
    auto used = [&](size_t i) {
      if (i >= n.outputs.size() || n.outputs[i].empty()) return false;
      if (n.outputs[i] == output_) return true;
      const auto it = consumers_.find(n.outputs[i]);
      if (it == consumers_.end()) return false;
      return std::any_of(it->second.begin(), it->second.end(),
                         [&](int c) { return g_.nodes[c].op_type != "Shape"; });
    };
    const bool every_step = used(0), last_state = used(1);
    if (every_step && last_state) {
      refuse(n,
             "uses both Y (every step) and Y_h (the last state): crossover's lstm continues "
             "with one of them (for h_n[-1] of a stacked LSTM, take out[:, -1] instead)");
    }
    const std::string& next = n.outputs.at(last_state ? 1 : 0);
    Weights layer{{"weight_ih_l", tensor({4 * hidden, input_size},
                                         pytorch_gate_order(w.floats.data(), hidden, input_size))},
                  {"weight_hh_l", tensor({4 * hidden, hidden},
                                         pytorch_gate_order(r.floats.data(), hidden, hidden))},
                  {"bias_ih_l", tensor({4 * hidden}, pytorch_gate_order(bias.data(), hidden, 1))},
                  {"bias_hh_l",
                   tensor({4 * hidden}, pytorch_gate_order(bias.data() + 4 * hidden, hidden, 1))}};
    const bool stacked =
        lstm_layer_ >= 0 && out_.spec.layers[static_cast<size_t>(lstm_layer_)].out == hidden;
    int64_t k = 0;
    if (stacked) {
      LayerSpec& l = out_.spec.layers[static_cast<size_t>(lstm_layer_)];
      k = l.layers++;
      out_.sources.back() += ", " + (n.name.empty() ? n.described() : n.name);
    } else {
      LayerSpec l;
      l.type = LayerType::LSTM;
      l.out = hidden;
      l.sequence = true;
      add_layer(l, n, {}, Layout::Batch);
    }
    for (auto& [suffix, t] : layer) weights_.back()[fmt::format("{}{}", suffix, k)] = std::move(t);
    const std::vector<int64_t> steps{sample_[0], hidden};
    if (last_state) {
      out_.spec.layers.back().sequence = false;
      set_current(next, Layout::LstmState, {hidden});
      lstm_layer_ = -1;
    } else {
      set_current(next, time_first ? Layout::LstmY : Layout::LstmYBatch, steps);
      lstm_layer_ = static_cast<int>(out_.spec.layers.size() - 1);
    }
  }

  void gather(const OnnxNode& n) {
    known_attributes(n, {"axis"});
    const int64_t axis = attr_int(n, "axis", 0);
    if (input(n, 1) == current_) {  // a lookup of the data's ids in a weight: an embedding
      if (!ids_ || !out_.spec.layers.empty()) {
        refuse(n,
               "looks up the data in a table: crossover maps that only as an embedding, the "
               "first layer, on the integer input");
      }
      if (axis != 0) refuse(n, fmt::format("axis {} (an embedding gathers rows, axis 0)", axis));
      const OnnxTensor& table = weight(n, 0, "table");
      if (table.dims.size() != 2) {
        refuse(n, fmt::format("its table '{}' has the shape [{}] (expected [vocabulary, width])",
                              table.name, fmt::join(table.dims, ", ")));
      }
      LayerSpec l;
      l.type = LayerType::Embedding;
      l.vocab = table.dims[0];
      l.out = table.dims[1];
      return add_layer(l, n, {{"weight", tensor(table.dims, table.floats)}}, Layout::Batch);
    }
    takes_data_first(n);
    const OnnxTensor& index = constant(n, input(n, 1));
    const std::vector<int64_t> shape = full_shape();
    const int64_t along = normalise_axis(axis, shape.size());
    const bool scalar = index.is_integer() && index.ints.size() == 1 && index.dims.empty();
    if (layout_ == Layout::LstmState && scalar && along == 0 &&
        (index.ints[0] == 0 || index.ints[0] == -1)) {
      return set_current(output_of(n), Layout::Batch, sample_);
    }
    const bool over_time = (layout_ == Layout::Batch && sample_.size() == 2 && along == 1) ||
                           (layout_ == Layout::Time && along == 0);
    const bool last =
        scalar && over_time && (index.ints[0] == -1 || index.ints[0] == sample_[0] - 1);
    if (!last || lstm_layer_ < 0) {
      refuse(n, fmt::format("gathers [{}] along axis {} of data laid out [{}] (crossover maps a "
                            "Gather as an embedding or as an LSTM's last step, out[:, -1])",
                            fmt::join(index.ints, ", "), axis, shape_text(shape)));
    }
    take_last_step(output_of(n));
  }

  // The LSTM before outputs its last step only (sequence = false).
  void take_last_step(const std::string& output) {
    out_.spec.layers[static_cast<size_t>(lstm_layer_)].sequence = false;
    set_current(output, Layout::Batch, {sample_[1]});
    lstm_layer_ = -1;
  }

  // Older opsets export out[:, -1] as a Slice of the last step and a Squeeze of its axis.
  void slice_last_step(const OnnxNode& n) {
    known_attributes(n, {"starts", "ends", "axes"});
    takes_data_first(n);
    const SliceBounds bounds = slice_bounds(n);
    const std::vector<int64_t>& starts = bounds.starts;
    const std::vector<int64_t>& ends = bounds.ends;
    const std::vector<int64_t>& axes = bounds.axes;
    const std::vector<int64_t>& steps = bounds.steps;
    const std::vector<int64_t> shape = full_shape();
    const int64_t axis = axes.size() == 1 ? normalise_axis(axes[0], shape.size()) : -1;
    const bool over_time = (layout_ == Layout::Batch && sample_.size() == 2 && axis == 1) ||
                           (layout_ == Layout::Time && axis == 0);
    const int64_t steps_count = over_time ? sample_[0] : 0;
    const bool last = over_time && starts.size() == 1 && ends.size() == 1 &&
                      (starts[0] == -1 || starts[0] == steps_count - 1) && ends[0] >= steps_count &&
                      (steps.empty() || steps == std::vector<int64_t>{1});
    const auto users = consumers_.find(output_of(n));
    const OnnxNode* squeeze = users != consumers_.end() && users->second.size() == 1
                                  ? &g_.nodes[users->second[0]]
                                  : nullptr;
    if (!last || lstm_layer_ < 0 || !squeeze || squeeze->op_type != "Squeeze") {
      refuse(n, fmt::format("slices [{}:{}] along axis {} of data laid out [{}] (crossover maps a "
                            "Slice only as an LSTM's last step, out[:, -1])",
                            fmt::join(starts, ","), fmt::join(ends, ","), fmt::join(axes, ","),
                            fmt::join(shape, ", ")));
    }
    std::vector<int64_t> squeezed = axes_of(*squeeze);
    for (int64_t& a : squeezed) a = normalise_axis(a, shape.size());
    if (squeezed != std::vector<int64_t>{axis}) {
      refuse(*squeeze, "squeezes another axis than the step the Slice before it kept");
    }
    used_[users->second[0]] = true;
    take_last_step(output_of(*squeeze));
  }

  void reduce(const OnnxNode& n) {
    known_attributes(n, {"axes", "keepdims", "noop_with_empty_axes"});
    takes_data_first(n);
    const bool max = n.op_type == "ReduceMax";
    const bool keep = attr_int(n, "keepdims", 1) != 0;
    std::vector<int64_t> axes = reduce_axes(n);
    const std::vector<int64_t> shape = full_shape();
    for (int64_t& a : axes) a = normalise_axis(a, shape.size());
    std::sort(axes.begin(), axes.end());
    const bool over_time =
        (layout_ == Layout::Batch && sample_.size() == 2 && axes == std::vector<int64_t>{1}) ||
        (layout_ == Layout::Time && axes == std::vector<int64_t>{0});
    if (over_time && !keep) {
      LayerSpec l;
      l.type = max ? LayerType::GlobalMaxPool : LayerType::GlobalAvgPool;
      return add_layer(l, n, {}, Layout::Batch);
    }
    if (layout_ == Layout::Batch && sample_.size() == 3 && axes == std::vector<int64_t>{2, 3}) {
      if (keep) return whole_map_pool(n, max, output_of(n));
      // [C, H, H] → pool to [C, 1, 1] → flatten to [C]
      whole_map_pool(n, max, n.name + "#pooled");
      LayerSpec flat;
      flat.type = LayerType::Flatten;
      return add_layer(flat, n, {}, Layout::Batch);
    }
    refuse(n, fmt::format("reduces axes [{}]{} of data laid out [{}] (crossover maps a mean or max "
                          "over a sequence's steps, keepdims = 0, or over a whole map)",
                          fmt::join(axes, ", "), keep ? " keeping them" : "", shape_text(shape)));
  }

  // -- the result ----------------------------------------------------------------------------
  void finish() {
    ModelSpec& spec = out_.spec;
    if (spec.layers.empty()) fail("the graph maps to no layer");
    const std::vector<int64_t>& last = sample_;
    spec.loss = loss_hint_                        ? *loss_hint_
                : last == std::vector<int64_t>{1} ? LossType::BinaryCrossEntropy
                                                  : LossType::CrossEntropy;
    // The weights in the order and shapes the model lays them out (layer_parameters).
    for (size_t i = 0; i < spec.layers.size(); ++i) {
      Weights& w = weights_[i];
      std::vector<std::string> order;
      for (const ParamShape& p : layer_parameters(spec.layers[i], layer_inputs_[i])) {
        order.push_back(p.suffix);
        XO_ASSERT(w.count(p.suffix) && w[p.suffix].shape == p.shape);
      }
      for (const char* buffer : {"running_mean", "running_var", "num_batches_tracked"}) {
        if (w.count(buffer)) order.push_back(buffer);
      }
      XO_ASSERT(order.size() == w.size());
      for (const std::string& suffix : order) {
        NamedTensor t = std::move(w[suffix]);
        t.name = fmt::format("{}.{}", i, suffix);
        out_.weights.push_back(std::move(t));
      }
    }
    // Modules an eval-mode export leaves out (Dropout; BatchNormalization folded into the
    // convolution before it) shift the numbering of what follows.
    const bool numbered =
        std::all_of(module_.begin(), module_.end(), [](int64_t m) { return m >= 0; });
    for (size_t i = 0; numbered && i < module_.size(); ++i) {
      if (module_[i] == static_cast<int64_t>(i)) continue;
      spec.notes.push_back(fmt::format(
          "the graph's modules are numbered with gaps ({} is module {} of the exported model): an "
          "export in eval mode leaves out Dropout and folds BatchNorm into the layer before it. "
          "crossover numbers the layers it imports 0, 1, 2, …, so weights saved with --save carry "
          "its numbering; export with training=torch.onnx.TrainingMode.TRAINING (and "
          "do_constant_folding=False) to keep every module",
          out_.sources[i], module_[i]));
      break;
    }
  }

  const OnnxGraph& g_;
  std::map<std::string, int> producer_;
  std::map<std::string, std::vector<int>> consumers_;
  std::vector<bool> used_;
  std::set<std::string> data_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, OnnxTensor> constants_;
  std::set<std::string> evaluating_;  // constants being evaluated (a cycle check)
  int64_t evaluated_ = 0;             // values evaluated so far
  std::string output_, current_;
  Layout layout_ = Layout::Batch;
  std::vector<int64_t> sample_;
  bool ids_ = false;
  int64_t export_batch_ = 0;
  int lstm_layer_ = -1;      // the LSTM layer whose every-step output the data is, if any
  int64_t pending_pad_ = 0;  // a Pad's zeros, for the Conv or AveragePool after it
  std::optional<LossType> loss_hint_;
  std::vector<Weights> weights_;
  std::vector<std::vector<int64_t>> layer_inputs_;
  std::vector<int64_t> module_;
  OnnxImport out_;
};

bool has_extension(const std::filesystem::path& path, std::string_view ext) {
  std::string e = path.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

}  // namespace

OnnxImport import_onnx(const OnnxGraph& graph) {
  OnnxImport out = Importer(graph).run();
  out.spec.origin = graph.origin;
  out.spec.name = std::filesystem::path(graph.origin).stem().string();
  return out;
}

ModelSpec onnx_training_spec(OnnxImport imported, const std::filesystem::path& path) {
  ModelSpec spec = std::move(imported.spec);
  spec.init = path.string();
  // The weights were read with the graph: the model starts from them without reading it again.
  spec.init_weights = std::make_shared<const std::vector<NamedTensor>>(std::move(imported.weights));
  spec.data.source.clear();  // none until the training file names one (or --data)
  std::filesystem::path training = path;
  training.replace_extension(".toml");
  std::error_code ec;
  if (std::filesystem::is_regular_file(training, ec)) {
    apply_training_file(spec, training, path.string());
  } else {
    spec.notes.push_back(fmt::format(
        "no {} beside it: training with crossover's defaults ({} lr {}, batch {}, {} epochs); set "
        "[train] and [data] there as in a spec, or use --epochs, --batch, --lr, --data",
        training.filename().string(), optimizer_type_name(spec.train.optimizer.type),
        spec.train.optimizer.lr, spec.train.batch, spec.train.epochs));
  }
  infer_shapes(spec);  // the loss against the output, with the training file's say
  return spec;
}

ModelSpec load_onnx_spec(const std::filesystem::path& path) {
  return onnx_training_spec(import_onnx(read_onnx(path)), path);
}

std::vector<NamedTensor> load_initial_weights(const std::filesystem::path& path) {
  if (has_extension(path, ".onnx")) return import_onnx(read_onnx(path)).weights;
  return load_safetensors(path);
}

}  // namespace xo

// The ONNX importer's constants: the inputs of a node that are not the data. Initializers are read
// where they are; Constant nodes and the arithmetic over them and the data's shape (the target of
// a Reshape, an LSTM's initial state, a weight sliced or concatenated) are evaluated here, with
// the batch dimension standing as kBatch. One fold_* function per operator evaluated; the N-d
// tensor rearrangements they use are in onnx_tensor_ops.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "model/onnx_importer.h"

namespace xo::onnx_importer {

// The value of a non-data input: an initializer, a Constant, or arithmetic over those and the
// data's shape.
// A reference to the initializer itself or to the evaluated value (kept for the whole import): a
// weight of tens of megabytes is never copied on its way to the layer.
const OnnxTensor& Importer::constant(const OnnxNode& user, const std::string& name) {
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

OnnxTensor Importer::evaluate(const OnnxNode& user, const std::string& name) {
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
  const ConstantHandler fold = constant_handler(n.op_type);
  if (!fold) {
    refuse(n, fmt::format("computes the input '{}' of {}, and crossover evaluates only shape "
                          "arithmetic and weight rearrangement (Constant, Shape, Gather, "
                          "Slice, Concat, Transpose, Unsqueeze, Squeeze, Cast, Add, Sub, Mul, "
                          "Div, ConstantOfShape) there",
                          name, user.described()));
  }
  OnnxTensor out;
  out.name = name;
  fold(*this, n, out);
  return out;
}

// -- the operators evaluated -----------------------------------------------------------------
void Importer::fold_constant(const OnnxNode& n, OnnxTensor& out) {
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
    refuse(n, "a Constant without a value crossover reads (value, value_float(s), value_int(s))");
  }
}

void Importer::fold_shape(const OnnxNode& n, OnnxTensor& out) {
  const std::string& of = input(n, 0);
  if (!shapes_.count(of)) refuse(n, fmt::format("the shape of '{}' is not known here", of));
  const std::vector<int64_t>& s = shapes_[of];
  const auto rank = static_cast<int64_t>(s.size());
  int64_t start = std::clamp(normalise_axis(attr_int(n, "start", 0), s.size()), int64_t{0}, rank);
  int64_t end = std::clamp(normalise_axis(attr_int(n, "end", rank), s.size()), int64_t{0}, rank);
  out.type = kOnnxInt64;
  out.ints.assign(s.begin() + start, s.begin() + std::max(start, end));
  out.dims = {static_cast<int64_t>(out.ints.size())};
}

void Importer::fold_identity(const OnnxNode& n, OnnxTensor& out) { out = constant(n, input(n, 0)); }

void Importer::fold_cast(const OnnxNode& n, OnnxTensor& out) {
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
}

void Importer::fold_unsqueeze(const OnnxNode& n, OnnxTensor& out) {
  out = constant(n, input(n, 0));
  const std::vector<int64_t> axes = axes_of(n);
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
}

void Importer::fold_squeeze(const OnnxNode& n, OnnxTensor& out) {
  out = constant(n, input(n, 0));
  const std::vector<int64_t> axes = axes_of(n);
  std::vector<int64_t> dims;
  for (size_t d = 0; d < out.dims.size(); ++d) {
    const bool removed =
        axes.empty() ? out.dims[d] == 1 : std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
          return normalise_axis(a, out.dims.size()) == static_cast<int64_t>(d);
        });
    if (!removed) dims.push_back(out.dims[d]);
  }
  out.dims = dims;
}

void Importer::fold_concat(const OnnxNode& n, OnnxTensor& out) {
  std::vector<OnnxTensor> parts;
  for (const std::string& in : n.inputs) parts.push_back(constant(n, in));
  out = concat(n, parts, attr_int(n, "axis", 0));
}

void Importer::fold_transpose(const OnnxNode& n, OnnxTensor& out) {
  const OnnxTensor& in = constant(n, input(n, 0));
  std::vector<int64_t> perm = attr_ints(n, "perm", {});
  if (perm.empty()) {
    for (size_t d = in.dims.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  out = transposed(n, in, perm);
}

// Entries of a 1-D integer shape (the batch size of Shape's output, say).
void Importer::fold_gather(const OnnxNode& n, OnnxTensor& out) {
  const OnnxTensor& data = constant(n, input(n, 0));
  const OnnxTensor& index = constant(n, input(n, 1));
  if (!data.is_integer() || data.dims.size() != 1 || !index.is_integer() || index.dims.size() > 1 ||
      attr_int(n, "axis", 0) != 0) {
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
}

void Importer::fold_slice(const OnnxNode& n, OnnxTensor& out) {
  const OnnxTensor& data = constant(n, input(n, 0));
  const SliceBounds b = slice_bounds(n);
  out = sliced(n, data, b.starts, b.ends, b.axes, b.steps);
}

// Add, Sub, Mul and Div of integer shapes, one of them possibly a single number; an overflow or a
// division by zero is refused rather than wrapped.
void Importer::fold_arithmetic(const OnnxNode& n, OnnxTensor& out) {
  const std::string& op = n.op_type;
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
    const int64_t x = a.ints[a.ints.size() == 1 ? 0 : i], y = b.ints[b.ints.size() == 1 ? 0 : i];
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
}

void Importer::fold_constant_of_shape(const OnnxNode& n, OnnxTensor& out) {
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
    out.ints.assign(static_cast<size_t>(count), v->tensor->ints.empty() ? 0 : v->tensor->ints[0]);
  } else {
    out.floats.assign(static_cast<size_t>(count),
                      v && !v->tensor->floats.empty() ? v->tensor->floats[0] : 0.0f);
  }
}

// -- constants as a node's operands ----------------------------------------------------------
// Whether a non-data input is all zeros (an LSTM's initial state), without building it: a
// ConstantOfShape of 0 and reshapes or slices of it.
bool Importer::is_zero(const OnnxNode& user, const std::string& name, size_t depth) {
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

Importer::SliceBounds Importer::slice_bounds(const OnnxNode& n) {
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
std::vector<int64_t> Importer::axes_of(const OnnxNode& n) {
  if (g_.opset < 13 || input(n, 1).empty()) return attr_ints(n, "axes", {});
  return constant(n, input(n, 1)).ints;
}

// ReduceMean/ReduceMax axes: an attribute (an input from opset 18 on).
std::vector<int64_t> Importer::reduce_axes(const OnnxNode& n) {
  if (!input(n, 1).empty()) return constant(n, input(n, 1)).ints;
  return attr_ints(n, "axes", {});
}

// A float tensor that becomes a parameter: an initializer (or a Constant).
const OnnxTensor& Importer::weight(const OnnxNode& n, size_t index, std::string_view what) {
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

}  // namespace xo::onnx_importer

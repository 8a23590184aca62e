// The ONNX importer's linear layers: Gemm, and MatMul with the Add after it as its bias. Both
// become crossover's linear, y = x·Wᵀ + b, with W stored [out, in] as PyTorch's nn.Linear does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::gemm(const OnnxNode& n) {
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

void Importer::matmul(const OnnxNode& n) {
  known_attributes(n, {});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch && sample_.size() == 1,
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

// `w` is [out, in] when `out_first`, else [in, out] (transposed here to PyTorch's layout).
void Importer::linear(const OnnxNode& n, const OnnxTensor& w, bool out_first,
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

// An Add that is not a MatMul's bias (that one is taken with its MatMul).
void Importer::lone_add(const OnnxNode& n) {
  refuse(n,
         "crossover maps an Add only as the bias of a MatMul (a linear layer); an Add of "
         "two branches is a residual connection, which is not supported");
}

}  // namespace xo::onnx_importer

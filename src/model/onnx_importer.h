// The ONNX importer's private state and pieces, shared by the model/onnx_*.cpp files (the public
// API is model/onnx_import.h). One Importer walks one graph; its member functions are defined by
// concern: the walk and its result (onnx_graph.cpp), the op tables (onnx_ops.cpp), the graph,
// shape and attribute checks (onnx_checks.cpp), constant folding (onnx_constants.cpp and
// onnx_tensor_ops.cpp), and one file per family of layers (onnx_linear.cpp, onnx_conv_pool.cpp,
// onnx_activation.cpp, onnx_shape_ops.cpp, onnx_batch_norm.cpp, onnx_dropout.cpp,
// onnx_embedding.cpp, onnx_lstm.cpp).
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "io/onnx.h"
#include "io/safetensors.h"
#include "model/onnx_import.h"
#include "model/spec.h"

namespace xo::onnx_importer {

// The batch dimension in evaluated shapes: a prime no real dimension of these models takes.
inline constexpr int64_t kBatch = 1000003;
// Constants materialised by the evaluator (an all-zero initial state is checked, not built): one
// ConstantOfShape, and all evaluated values together (weights rearranged by Slice and Concat
// count).
inline constexpr int64_t kMaxEvaluated = int64_t{1} << 20;
inline constexpr int64_t kMaxEvaluatedTotal = int64_t{1} << 30;
inline constexpr size_t kMaxConstantDepth = 256;
// Bounds on the sizes a graph declares, so that no shape arithmetic downstream (2 x padding,
// 8 x hidden) can overflow: windows, strides, padding and hidden sizes of at most 2^24, ...
inline constexpr int64_t kMaxExtent = int64_t{1} << 24;
// ... and a sample of at most 2^31 values, the reader's bound on a tensor.
inline constexpr int64_t kMaxSize = int64_t{1} << 31;

inline constexpr std::string_view kSupported =
    "Gemm, MatMul (+ Add as its bias), Conv, Relu, LeakyRelu, Tanh, Sigmoid, MaxPool, "
    "AveragePool, "
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
std::string shape_text(const std::vector<int64_t>& shape);
int64_t product(const std::vector<int64_t>& v);
// The shortest decimal that rounds to the same float: 0.1 for the float nearest 0.1, 1e-05 for
// BatchNormalization's float epsilon, so that specs read as PyTorch's arguments were written.
double shortest_float(double v);
inline int64_t normalise_axis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}
// An input's name, or "" where the node leaves it out.
const std::string& input(const OnnxNode& n, size_t i);
NamedTensor tensor(std::vector<int64_t> shape, std::vector<float> data);

// A layer's parameters by suffix ("weight", "bias", "weight_ih_l0", …).
using Weights = std::map<std::string, NamedTensor>;

struct Importer;
// Maps a node on the chain onto a layer (or a change of the data's layout).
using LayerHandler = void (*)(Importer&, const OnnxNode&);
// Evaluates a node computing a constant into `out` (which arrives named for the tensor).
using ConstantHandler = void (*)(Importer&, const OnnxNode&, OnnxTensor& out);
// The handler for an operator on the chain, or for one computing a constant; nullptr for none.
LayerHandler layer_handler(std::string_view op_type);
ConstantHandler constant_handler(std::string_view op_type);
// The operators each table maps, in name order (for tests and messages).
std::vector<std::string_view> layer_ops();
std::vector<std::string_view> constant_ops();

struct Importer {
  explicit Importer(const OnnxGraph& g);
  OnnxImport run();

  // -- messages (onnx_checks.cpp) ------------------------------------------------------------
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void refuse(const OnnxNode& n, const std::string& what) const;

  // -- attributes and checks (onnx_checks.cpp) -----------------------------------------------
  const OnnxAttribute* attr(const OnnxNode& n, std::string_view name,
                            OnnxAttribute::Kind kind) const;
  int64_t attr_int(const OnnxNode& n, std::string_view name, int64_t fallback) const;
  double attr_float(const OnnxNode& n, std::string_view name, double fallback) const;
  std::string attr_string(const OnnxNode& n, std::string_view name, std::string fallback) const;
  std::vector<int64_t> attr_ints(const OnnxNode& n, std::string_view name,
                                 std::vector<int64_t> fallback) const;
  void known_attributes(const OnnxNode& n, std::initializer_list<std::string_view> known) const;
  const std::string& output_of(const OnnxNode& n) const;
  void check_graph() const;
  void check_order() const;
  void check_all_used() const;
  void need(const OnnxNode& n, bool ok, const std::string& expected) const;
  void takes_data_first(const OnnxNode& n) const;
  void no_users(const OnnxNode& n, size_t from_output, std::string_view what) const;

  // -- the walk (onnx_graph.cpp) -------------------------------------------------------------
  std::vector<int64_t> full_shape() const;
  void set_current(const std::string& tensor, Layout layout, std::vector<int64_t> sample);
  const OnnxNode& next_node();
  void step(const OnnxNode& n);
  void add_layer(LayerSpec l, const OnnxNode& n, Weights weights, Layout layout);
  void finish();

  // -- constants (onnx_constants.cpp, onnx_tensor_ops.cpp) ------------------------------------
  const OnnxTensor& constant(const OnnxNode& user, const std::string& name);
  OnnxTensor evaluate(const OnnxNode& user, const std::string& name);
  void fold_constant(const OnnxNode& n, OnnxTensor& out);
  void fold_shape(const OnnxNode& n, OnnxTensor& out);
  void fold_identity(const OnnxNode& n, OnnxTensor& out);
  void fold_cast(const OnnxNode& n, OnnxTensor& out);
  void fold_unsqueeze(const OnnxNode& n, OnnxTensor& out);
  void fold_squeeze(const OnnxNode& n, OnnxTensor& out);
  void fold_concat(const OnnxNode& n, OnnxTensor& out);
  void fold_transpose(const OnnxNode& n, OnnxTensor& out);
  void fold_gather(const OnnxNode& n, OnnxTensor& out);
  void fold_slice(const OnnxNode& n, OnnxTensor& out);
  void fold_arithmetic(const OnnxNode& n, OnnxTensor& out);
  void fold_constant_of_shape(const OnnxNode& n, OnnxTensor& out);
  void check_materialised(const OnnxNode& n, const OnnxTensor& t) const;
  OnnxTensor concat(const OnnxNode& n, const std::vector<OnnxTensor>& parts, int64_t axis_attr);
  OnnxTensor transposed(const OnnxNode& n, const OnnxTensor& in, const std::vector<int64_t>& perm);
  OnnxTensor sliced(const OnnxNode& n, const OnnxTensor& in, const std::vector<int64_t>& starts,
                    const std::vector<int64_t>& ends, std::vector<int64_t> axes,
                    const std::vector<int64_t>& steps);
  bool is_zero(const OnnxNode& user, const std::string& name, size_t depth = 0);
  // A Slice's bounds: attributes before opset 10, constant inputs from 10 on (axes and steps
  // optional; empty when absent).
  struct SliceBounds {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  SliceBounds slice_bounds(const OnnxNode& n);
  std::vector<int64_t> axes_of(const OnnxNode& n);
  std::vector<int64_t> reduce_axes(const OnnxNode& n);
  const OnnxTensor& weight(const OnnxNode& n, size_t index, std::string_view what);

  // -- layers (one file per family) ----------------------------------------------------------
  void gemm(const OnnxNode& n);
  void linear(const OnnxNode& n, const OnnxTensor& w, bool out_first,
              const std::optional<OnnxTensor>& bias, const OnnxNode& last);
  void matmul(const OnnxNode& n);
  void lone_add(const OnnxNode& n);
  // Square windows with equal strides and equal padding on every side, as crossover's layers have.
  struct Window {
    int64_t kernel = 0, stride = 1, padding = 0;
  };
  Window window(const OnnxNode& n, std::vector<int64_t> kernel, int64_t default_stride);
  void conv(const OnnxNode& n);
  void pool(const OnnxNode& n);
  void whole_map_pool(const OnnxNode& n, bool max, const std::string& output);
  void global_pool(const OnnxNode& n);
  void pad(const OnnxNode& n);
  void reduce(const OnnxNode& n);
  void activation(const OnnxNode& n, LayerType type);
  void leaky_relu(const OnnxNode& n);
  bool leads_to_output(const std::string& tensor, std::vector<int>& through) const;
  void end_in_loss(const OnnxNode& n, LossType loss, std::vector<int>& through, std::string note);
  void sigmoid(const OnnxNode& n);
  void softmax(const OnnxNode& n);
  void identity(const OnnxNode& n);
  void flatten(const OnnxNode& n);
  void reshape(const OnnxNode& n);
  void transpose(const OnnxNode& n);
  void squeeze(const OnnxNode& n);
  void dropout(const OnnxNode& n);
  void batch_norm(const OnnxNode& n);
  void gather(const OnnxNode& n);
  void embedding(const OnnxNode& n, int64_t axis);
  void lstm(const OnnxNode& n);
  bool check_lstm(const OnnxNode& n);
  Weights lstm_weights(const OnnxNode& n, int64_t& hidden);
  bool lstm_continues_with_last_state(const OnnxNode& n) const;
  void take_last_step(const std::string& output);
  void slice_last_step(const OnnxNode& n);

  // -- state ---------------------------------------------------------------------------------
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

}  // namespace xo::onnx_importer

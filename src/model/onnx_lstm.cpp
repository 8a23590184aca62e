// The ONNX importer's LSTM: one forward LSTM node as crossover's lstm (PyTorch's nn.LSTM), its
// gates reordered to PyTorch's; consecutive LSTM nodes of one width become one lstm of several
// layers. Its last step, out[:, -1], is taken by a Gather (onnx_embedding.cpp) or, in older
// opsets, by a Slice and a Squeeze (here).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

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

}  // namespace

void Importer::lstm(const OnnxNode& n) {
  const bool time_first = check_lstm(n);
  int64_t hidden = 0;
  Weights layer = lstm_weights(n, hidden);
  // Y continues (every step), or Y_h (the last step); Y_c is never used.
  no_users(n, 2, "the final cell state Y_c");
  const bool last_state = lstm_continues_with_last_state(n);
  const std::string& next = n.outputs.at(last_state ? 1 : 0);
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

// What crossover's lstm computes: PyTorch's activations, forward only, one length, no peepholes,
// a zero initial state, on a sequence laid out as the node's `layout` says. Returns whether the
// sequence is stored time first (layout 0).
bool Importer::check_lstm(const OnnxNode& n) {
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
  return time_first;
}

// W, R and B checked against the hidden size and the data's width, in PyTorch's gate order under
// nn.LSTM's names less the layer number ("weight_ih_l"); `hidden` set from the node.
Weights Importer::lstm_weights(const OnnxNode& n, int64_t& hidden) {
  const int64_t input_size = sample_[1];
  const OnnxTensor& w = weight(n, 1, "weight W");
  const OnnxTensor& r = weight(n, 2, "recurrence weight R");
  hidden = attr_int(n, "hidden_size", w.dims.size() == 3 ? w.dims[1] / 4 : 0);
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
  return {
      {"weight_ih_l",
       tensor({4 * hidden, input_size}, pytorch_gate_order(w.floats.data(), hidden, input_size))},
      {"weight_hh_l",
       tensor({4 * hidden, hidden}, pytorch_gate_order(r.floats.data(), hidden, hidden))},
      {"bias_ih_l", tensor({4 * hidden}, pytorch_gate_order(bias.data(), hidden, 1))},
      {"bias_hh_l", tensor({4 * hidden}, pytorch_gate_order(bias.data() + 4 * hidden, hidden, 1))}};
}

// Whether the chain continues with Y_h (the last state) rather than Y (every step); one of them.
bool Importer::lstm_continues_with_last_state(const OnnxNode& n) const {
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
  return last_state;
}

// The LSTM before outputs its last step only (sequence = false).
void Importer::take_last_step(const std::string& output) {
  out_.spec.layers[static_cast<size_t>(lstm_layer_)].sequence = false;
  set_current(output, Layout::Batch, {sample_[1]});
  lstm_layer_ = -1;
}

// Older opsets export out[:, -1] as a Slice of the last step and a Squeeze of its axis.
void Importer::slice_last_step(const OnnxNode& n) {
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

}  // namespace xo::onnx_importer

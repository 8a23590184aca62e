// The ONNX importer's walk: from the graph's input, one node at a time, to its output. It keeps
// what the data is at each point (its tensor, crossover's per-sample shape and how ONNX lays it
// out) and hands each node on the chain to its operator's handler (onnx_ops.cpp), which adds a
// layer or changes the layout. At the end the layers' weights are put in the model's order.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "model/onnx_importer.h"

namespace xo::onnx_importer {
namespace {

// "/3/Gemm" → 3: the index of the torch.nn.Sequential module the node came from; -1 for none.
int64_t module_index(const std::string& name) {
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

}  // namespace

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t d : v) n *= d;
  return n;
}

double shortest_float(double v) {
  const float target = static_cast<float>(v);
  for (int digits = 1; digits <= 9; ++digits) {
    const double candidate = std::strtod(fmt::format("{:.{}g}", v, digits).c_str(), nullptr);
    if (static_cast<float>(candidate) == target) return candidate;
  }
  return v;
}

NamedTensor tensor(std::vector<int64_t> shape, std::vector<float> data) {
  NamedTensor t;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

// Who computes each tensor and who reads it, for the walk and the constant evaluator.
Importer::Importer(const OnnxGraph& g) : g_(g) {
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

// The walk: the graph checked whole, then one node at a time from the input until the data is the
// graph's output; what reads only the output's shape is used, every other node must have been.
OnnxImport Importer::run() {
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

// -- the data --------------------------------------------------------------------------------
std::vector<int64_t> Importer::full_shape() const {
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

void Importer::set_current(const std::string& tensor, Layout layout, std::vector<int64_t> sample) {
  current_ = tensor;
  layout_ = layout;
  sample_ = std::move(sample);
  data_.insert(tensor);
  shapes_[tensor] = full_shape();
}

// The one node that computes with the current data (Shape nodes only read its shape).
const OnnxNode& Importer::next_node() {
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

// One node on the chain, handed to its operator's handler once the checks every node passes are
// done.
void Importer::step(const OnnxNode& n) {
  if (used_[&n - g_.nodes.data()]) {
    refuse(n, "is reached twice from the input: the graph has a cycle");
  }
  used_[&n - g_.nodes.data()] = true;
  output_of(n);  // every node on the chain has an output
  if (!n.domain.empty() && n.domain != "ai.onnx") {
    refuse(n, fmt::format("operator of domain '{}' (crossover supports the standard operators: {})",
                          n.domain, kSupported));
  }
  const std::string& op = n.op_type;
  if (pending_pad_ > 0 && op != "Conv" && op != "AveragePool") {
    refuse(n, "follows a Pad: crossover folds a Pad only into the Conv or AveragePool after it");
  }
  // Token ids reach no layer but an embedding (a Gather on a weight).
  if (op != "Gather" && ids_ && out_.spec.layers.empty()) {
    refuse(n,
           "the input holds token ids, so the first node must be a Gather on a weight (an "
           "embedding)");
  }
  if (const LayerHandler handler = layer_handler(op)) return handler(*this, n);
  refuse(n, fmt::format("operator {} is not supported (crossover maps: {})", op, kSupported));
}

void Importer::add_layer(LayerSpec l, const OnnxNode& n, Weights weights, Layout layout) {
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

// -- the result ------------------------------------------------------------------------------
void Importer::finish() {
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

}  // namespace xo::onnx_importer

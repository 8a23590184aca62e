// The ONNX importer's shape operators: Flatten and Reshape (to [N, -1]) as crossover's flatten,
// and the Transposes, Squeezes and Identities that change only how ONNX lays out the data (batch
// and time swapped around an LSTM, its direction axis, a final single score).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::flatten(const OnnxNode& n) {
  known_attributes(n, {"axis"});
  takes_data_first(n);
  need(n, layout_ == Layout::Batch, "a Flatten here would mix the batch with the sequence");
  const int64_t axis = normalise_axis(attr_int(n, "axis", 1), sample_.size() + 1);
  if (axis != 1) refuse(n, fmt::format("axis {}: crossover flattens each sample (axis 1)", axis));
  LayerSpec l;
  l.type = LayerType::Flatten;
  add_layer(l, n, {}, Layout::Batch);
}

void Importer::reshape(const OnnxNode& n) {
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

void Importer::transpose(const OnnxNode& n) {
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
    refuse(n, fmt::format("perm [{}] on data laid out [{}]: crossover maps a Transpose only as the "
                          "swap of batch and time around an LSTM (perm [1, 0, 2])",
                          fmt::join(perm, ", "), shape_text(full_shape())));
  }
  const int keep = lstm_layer_;
  set_current(output_of(n), layout_ == Layout::Time ? Layout::Batch : Layout::Time, sample_);
  lstm_layer_ = keep;
}

void Importer::squeeze(const OnnxNode& n) {
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

void Importer::identity(const OnnxNode& n) {
  takes_data_first(n);
  set_current(output_of(n), layout_, sample_);
}

}  // namespace xo::onnx_importer

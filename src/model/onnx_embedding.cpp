// The ONNX importer's Gather: the lookup of the input's token ids in a weight is an embedding (the
// first layer); a Gather of the data itself picks an LSTM's last step, out[:, -1] (or the one
// layer of its final state Y_h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::gather(const OnnxNode& n) {
  known_attributes(n, {"axis"});
  const int64_t axis = attr_int(n, "axis", 0);
  // a lookup of the data's ids in a weight: an embedding
  if (input(n, 1) == current_) return embedding(n, axis);
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
  const bool last = scalar && over_time && (index.ints[0] == -1 || index.ints[0] == sample_[0] - 1);
  if (!last || lstm_layer_ < 0) {
    refuse(n, fmt::format("gathers [{}] along axis {} of data laid out [{}] (crossover maps a "
                          "Gather as an embedding or as an LSTM's last step, out[:, -1])",
                          fmt::join(index.ints, ", "), axis, shape_text(shape)));
  }
  take_last_step(output_of(n));
}

void Importer::embedding(const OnnxNode& n, int64_t axis) {
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
  add_layer(l, n, {{"weight", tensor(table.dims, table.floats)}}, Layout::Batch);
}

}  // namespace xo::onnx_importer

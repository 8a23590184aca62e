// The ONNX importer's normalisation: BatchNormalization as batchnorm1d or batchnorm2d, its
// running statistics as the layer's buffers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "model/onnx_importer.h"

namespace xo::onnx_importer {

void Importer::batch_norm(const OnnxNode& n) {
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

}  // namespace xo::onnx_importer

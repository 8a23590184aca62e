#include "job/predict.h"

#include <algorithm>
#include <cmath>

#include "core/interrupt.h"
#include "train/plan.h"

namespace xo {
namespace {

// One row's prediction from its outputs, into `p` (the row's columns); returns its class.
int32_t predict_row(const Model& model, const float* outputs, double* p) {
  const int64_t n = model.outputs();
  if (model.regression()) {
    p[0] = outputs[0];
    return 0;
  }
  if (model.loss_kind() == LossKind::BinaryCrossEntropy) {
    p[0] = 1.0 / (1.0 + std::exp(-static_cast<double>(outputs[0])));
    return p[0] >= 0.5 ? 1 : 0;
  }
  const float* top = std::max_element(outputs, outputs + n);
  double sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += std::exp(static_cast<double>(outputs[c] - *top));
  for (int64_t c = 0; c < n; ++c) p[c] = std::exp(static_cast<double>(outputs[c] - *top)) / sum;
  return static_cast<int32_t>(top - outputs);
}

}  // namespace

std::optional<Predictions> predict_rows(const Model& model, const Dataset& rows) {
  Backend& be = model.backend();
  const int64_t batch = evaluation_batch(model, rows.samples);
  Network full(model, NetworkOptions{.batch = batch, .training = false, .shards = 1});
  std::optional<Network> tail;  // the last, partial batch's
  if (const int64_t rest = rows.samples % batch) {
    tail.emplace(model, NetworkOptions{.batch = rest, .training = false, .shards = 1});
  }
  const DeviceBuffer x = to_device(be, rows.inputs(), rows.owner);
  Predictions p;
  p.rows = rows.samples;
  p.columns =
      model.regression() || model.loss_kind() == LossKind::BinaryCrossEntropy ? 1 : model.outputs();
  p.values.resize(static_cast<size_t>(p.rows * p.columns));
  if (!model.regression()) p.labels.resize(static_cast<size_t>(p.rows));
  std::vector<float> out(static_cast<size_t>(batch * model.outputs()));
  for (int64_t start = 0; start < rows.samples; start += batch) {
    if (stop_requested()) return std::nullopt;
    Network& net = start + batch <= rows.samples ? full : *tail;
    const float* y = net.forward(x.as<float>() + start * rows.features);
    be.synchronize();
    be.download(out.data(), y, sizeof(float) * net.batch() * model.outputs());
    for (int64_t r = 0; r < net.batch(); ++r) {
      const int32_t label =
          predict_row(model, &out[r * model.outputs()], &p.values[(start + r) * p.columns]);
      if (!p.labels.empty()) p.labels[start + r] = label;
    }
  }
  return p;
}

}  // namespace xo

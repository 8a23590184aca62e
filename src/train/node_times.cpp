// Per-node timing: Network::timed_step repeated, BatchNorm's running statistics put back.
#include "train/node_times.h"

#include <vector>

#include "core/interrupt.h"
#include "train/stats.h"

namespace xo {

void time_nodes(Model& model, const DeviceBuffer& x, const DeviceBuffer& y, int64_t batch,
                   int steps, TrainResult& r) {
  Backend& be = model.backend();
  Network net(model, {.batch = batch, .shards = 1});
  DeviceBuffer stats = be.allocate(sizeof(LossStats));
  // Profiled steps run the forward pass in training mode, which moves BatchNorm's running
  // statistics: they are put back afterwards, so the trained model is that of the epochs alone.
  std::vector<float> state(static_cast<size_t>(model.state_size()));
  if (!state.empty()) be.download(state.data(), model.state(), sizeof(float) * state.size());
  struct Restore {
    Backend& be;
    const Model& model;
    const std::vector<float>& state;
    ~Restore() {
      if (!state.empty()) be.upload(model.state(), state.data(), sizeof(float) * state.size());
    }
  } restore{be, model, state};
  const size_t nodes = model.nodes().size();
  std::vector<std::vector<double>> fwd(nodes), bwd(nodes);
  std::vector<double> loss;
  Network::NodeTimes p;
  for (int i = 0; i < steps + 2; ++i) {
    if (stop_requested()) return;
    net.timed_step(x.as<float>(), y.as<int32_t>(), stats.as<LossStats>(), p);
    if (i < 2) continue;  // warm-up
    for (size_t k = 0; k < nodes; ++k) {
      fwd[k].push_back(p.forward_ms[k]);
      bwd[k].push_back(p.backward_ms[k]);
    }
    loss.push_back(p.loss_ms);
  }
  r.node_timed_steps = steps;
  r.node_forward_ms.resize(nodes);
  r.node_backward_ms.resize(nodes);
  for (size_t k = 0; k < nodes; ++k) {
    r.node_forward_ms[k] = summarize(fwd[k]).median;
    r.node_backward_ms[k] = summarize(bwd[k]).median;
  }
  r.loss_ms = summarize(loss).median;
}

}  // namespace xo

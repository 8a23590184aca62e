// Fused trials' own work on the GPU (Backend::trials_step): each trial's gather, loss, optimizer
// step and step count, each one launch (or two) for all the trials of a group, where trial by
// trial each would be K launches and K nodes of the recorded step. The trials' pointers are
// uploaded once, when the group is planned.
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

class CudaTrialsStep final : public TrialsStepKernel {
 public:
  CudaTrialsStep(CudaBackend& be, const TrialsStepShape& shape,
                 std::unique_ptr<TrialsUpdate> update)
      : be_(be),
        trials_(static_cast<int>(shape.trials.size())),
        rows_(shape.rows),
        row_floats_(shape.row_floats),
        update_(std::move(update)) {
    std::vector<TrialBatchSource> sources;
    std::vector<LossStats*> stats;
    std::vector<uint64_t*> counters;
    for (const TrialsStepShape::Trial& t : shape.trials) {
      sources.push_back({t.x, t.y, t.order, t.position});
      stats.push_back(t.stats);
      counters.push_back(t.step_counter);
    }
    sources_ = upload(sources);
    counters_ = upload(counters);
    loss_ = make_trials_loss(be, shape.loss, shape.rows, shape.classes, stats);
  }

  void gather(float* dst, int32_t* dst_labels) override {
    launch_trials_next_batch(be_.stream(), sources_.as<TrialBatchSource>(), trials_, rows_,
                             row_floats_, dst, dst_labels);
  }
  void loss(const float* logits, const int32_t* labels, float* d_logits) override {
    loss_->run(logits, labels, d_logits);
  }
  void update() override {
    update_->run();
    launch_trials_increment(be_.stream(), counters_.as<uint64_t*>(), trials_);
  }

 private:
  template <typename T>
  DeviceBuffer upload(const std::vector<T>& host) {
    DeviceBuffer buffer = be_.allocate(host.size() * sizeof(T));
    be_.upload(buffer.as<T>(), host.data(), host.size() * sizeof(T));
    return buffer;
  }

  CudaBackend& be_;
  int trials_;
  int64_t rows_, row_floats_;
  std::unique_ptr<TrialsUpdate> update_;
  std::unique_ptr<TrialsLoss> loss_;
  DeviceBuffer sources_;   // [trials] TrialBatchSource
  DeviceBuffer counters_;  // [trials] step counters
};

}  // namespace

std::unique_ptr<TrialsStepKernel> CudaBackend::trials_step(const TrialsStepShape& shape) {
  XO_ASSERT(!shape.trials.empty() && shape.rows > 0);
  // Trials whose optimizers differ in kind step one by one (their own kernels).
  std::unique_ptr<TrialsUpdate> update = make_trials_update(*this, shape.trials);
  if (!update) return nullptr;
  return std::make_unique<CudaTrialsStep>(*this, shape, std::move(update));
}

}  // namespace xo::cuda

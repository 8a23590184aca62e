// Fused models' own work on the GPU (Backend::fused_step): each model's gather, loss, optimizer
// step and step count, each one launch (or two) for all the models of a group, where model by
// model each would be K launches and K nodes of the recorded step. The models' pointers are
// uploaded once, when the group is planned.
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace xo::cuda {
namespace {

class CudaFusedStep final : public FusedStepKernel {
 public:
  CudaFusedStep(CudaBackend& be, const FusedStepShape& shape, std::unique_ptr<FusedUpdate> update)
      : be_(be),
        models_(static_cast<int>(shape.models.size())),
        rows_(shape.rows),
        row_floats_(shape.row_floats),
        update_(std::move(update)) {
    std::vector<ModelBatchSource> sources;
    std::vector<LossStats*> stats;
    std::vector<uint64_t*> counters;
    for (const FusedStepShape::Member& t : shape.models) {
      sources.push_back({t.x, t.y, t.order, t.position});
      stats.push_back(t.stats);
      counters.push_back(t.step_counter);
    }
    sources_ = upload(sources);
    counters_ = upload(counters);
    loss_ = make_fused_loss(be, shape.loss, shape.rows, shape.classes, stats);
  }

  void gather(float* dst, int32_t* dst_labels) override {
    launch_fused_next_batch(be_.stream(), sources_.as<ModelBatchSource>(), models_, rows_,
                            row_floats_, dst, dst_labels);
  }
  void loss(const float* logits, const int32_t* labels, float* d_logits) override {
    loss_->run(logits, labels, d_logits);
  }
  void update() override {
    update_->run();
    launch_fused_increment(be_.stream(), counters_.as<uint64_t*>(), models_);
  }

 private:
  template <typename T>
  DeviceBuffer upload(const std::vector<T>& host) {
    DeviceBuffer buffer = be_.allocate(host.size() * sizeof(T));
    be_.upload(buffer.as<T>(), host.data(), host.size() * sizeof(T));
    return buffer;
  }

  CudaBackend& be_;
  int models_;
  int64_t rows_, row_floats_;
  std::unique_ptr<FusedUpdate> update_;
  std::unique_ptr<FusedLoss> loss_;
  DeviceBuffer sources_;   // [models] ModelBatchSource
  DeviceBuffer counters_;  // [models] step counters
};

}  // namespace

std::unique_ptr<FusedStepKernel> CudaBackend::fused_step(const FusedStepShape& shape) {
  XO_ASSERT(!shape.models.empty() && shape.rows > 0);
  // Models whose optimizers differ in kind step one by one (their own kernels).
  std::unique_ptr<FusedUpdate> update = make_fused_update(*this, shape.models);
  if (!update) return nullptr;
  return std::make_unique<CudaFusedStep>(*this, shape, std::move(update));
}

}  // namespace xo::cuda

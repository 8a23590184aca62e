// Data-parallel training across the ranks of an MPI job (`mpirun -np N crossover train ...`):
// every rank holds the whole model and data, trains on its slice of each global batch, and the
// gradients are summed across the ranks before the optimizer, so that N ranks take exactly the
// step one process takes on the whole batch. As in PyTorch DDP and Horovod, the gradients are
// summed in buckets, each started (non-blocking) as soon as backward has finished its layers, so
// that the communication hides behind the backward of the layers below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/mpi.h"
#include "model/model.h"

namespace xo {

// A rank's rows of a batch: [offset, offset + rows). The first `rows % ranks` ranks take one row
// more (as a batch's shards are split), so a rank may have none of a batch smaller than the job.
struct RankSlice {
  int64_t offset = 0, rows = 0;
};
RankSlice rank_slice(int64_t rows, int rank, int ranks);

// The gradient buckets: ranges of the flat gradient buffer cut at layer boundaries, each at least
// `bucket_bytes` (the last, at the buffer's start, takes what is left). Backward finishes the last
// layer first, so buckets run from the buffer's end down; bucket k is complete once node
// `ready_after` has run backward. Deterministic: the same cuts on every rank and every step.
struct GradientBucket {
  int64_t offset = 0, size = 0;  // floats
  size_t ready_after = 0;        // the node whose backward completes it
};
std::vector<GradientBucket> plan_buckets(const Model& model, int64_t bucket_bytes);

// When the buckets are summed.
enum class ReduceMode {
  // Each bucket, blocking, once backward has finished: on a machine whose cores all compute, MPI
  // moves shared-memory messages only inside its calls, and this measured fastest (2 ranks x 1
  // thread on the 2-core EPYC: disc-12 29.2 ms per step against 34.1-38.2 overlapped, mnist-cnn
  // 32.2 against 32.6; docs/benchmarks.md).
  AfterBackward,
  // Each bucket started (MPI_Iallreduce) as backward finishes its layers and pushed on between
  // layers (MPI_Testall), as PyTorch DDP and Horovod do: for links that progress by themselves
  // (a network adapter's offload) or ranks with cores to spare.
  Overlap,
};
const char* reduce_mode_name(ReduceMode mode);  // "after-backward", "overlap"

class DataParallel : public BackwardObserver {
 public:
  // PyTorch DDP's default bucket is 25 MiB; smaller ones start communicating sooner in a model
  // whose gradients are a few megabytes (mnist-cnn's are 4.8 MB), and stay in the caches.
  static constexpr int64_t kDefaultBucketBytes = 4 << 20;

  explicit DataParallel(const mpi::World& world, ReduceMode mode = ReduceMode::AfterBackward,
                        int64_t bucket_bytes = kDefaultBucketBytes);
  ReduceMode mode() const { return mode_; }

  int rank() const { return world_.rank(); }
  int ranks() const { return world_.size(); }
  const mpi::World& world() const { return world_; }

  // Before training. Every rank must train the same thing: `fingerprint` (spec, data, settings)
  // equal on every rank, else a UserError on every rank naming those that differ from rank 0.
  void check_same(const std::string& fingerprint) const;
  // Rank 0's parameters and state (BatchNorm's running statistics) on every rank.
  void share_model(Model& model) const;
  // Rank 0's state alone: each rank's BatchNorm normalises with its own slice's statistics (as
  // PyTorch DDP without SyncBatchNorm), and rank 0's running statistics are the model's (as DDP
  // broadcasts rank 0's buffers), given to every rank before each evaluation.
  void share_state(Model& model) const;
  // The buckets of `model`'s gradients; before the first step.
  void plan(const Model& model);

  // One step's gradient sum: node_backward_done as backward finishes each layer (when the rank's
  // step runs unsharded; in Overlap mode it starts the buckets then complete), then finish_step,
  // after which every rank holds the sum of the ranks' gradients. A rank without rows in a batch
  // calls finish_step alone (its gradients are zeros).
  void node_backward_done(size_t node) override;
  void finish_step();
  // Floats of gradient summed per step.
  int64_t floats_per_step() const { return flat_size_; }

  // In place across ranks.
  void sum(double* values, int64_t n) const { world_.sum(values, n); }
  // Whether `flag` holds on any rank: every rank takes the same decision (stop, skip).
  bool any(bool flag) const;

 private:
  const mpi::World& world_;
  ReduceMode mode_;
  int64_t bucket_bytes_;
  float* grads_ = nullptr;
  int64_t flat_size_ = 0;
  std::vector<GradientBucket> buckets_;
  size_t started_ = 0;  // buckets started this step
  mpi::PendingSums pending_;
};

}  // namespace xo

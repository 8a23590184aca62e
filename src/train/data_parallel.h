// Data-parallel training across the ranks of an MPI job (`mpirun -np N crossover train ...`):
// every rank holds the whole model and data, trains on its slice of each global batch, and the
// gradients are summed across the ranks before the optimizer, so that N ranks take exactly the
// step one process takes on the whole batch. The ranks of one machine sum through memory they
// share, each its part, and step the optimizer on that part alone (ReduceMode::Shared); across
// machines, as in PyTorch DDP and Horovod, the gradients are summed by MPI in buckets, which may
// start (non-blocking) as soon as backward has finished their layers, so that the communication
// hides behind the backward of the layers below.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/mpi.h"
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

// How the gradients are summed.
enum class ReduceMode {
  // The ranks of one machine share their gradient buffers, one parameter buffer and one copy of
  // the optimizer's state (MPI-3 shared memory): after backward each rank sums its part of the
  // gradients over the ranks' buffers, in rank order, and steps the optimizer over that part alone
  // (ZeRO's sharded optimizer step); no gradient or parameter is copied through MPI. As NCCL does
  // within a machine: through memory both sides map rather than messages (on 2 ranks of one
  // machine, disc-12's sum and optimizer together took less than after-backward's all-reduce alone:
  // docs/benchmarks.md, "Ranks that share memory"). Across machines of the same number of ranks
  // each, as NCCL's hierarchical all-reduce: each machine shares memory so, and each rank, having
  // summed its part over its machine, sums that part with the same part of every other machine by
  // MPI (one all-reduce of 1/K of the gradients per rank, K ranks a machine) before stepping it.
  Shared,
  // Buckets of the gradient buffer summed by MPI's all-reduce, each bucket, blocking, once backward
  // has finished: on a machine whose cores all compute, MPI moves shared-memory messages only
  // inside its calls, and this measured faster than overlap (docs/benchmarks.md, "One model on
  // several processes: data-parallel training over MPI"). The default across machines.
  AfterBackward,
  // Each bucket started (MPI_Iallreduce) as backward finishes its layers and pushed on between
  // layers (MPI_Testall), as PyTorch DDP and Horovod do: for links that progress by themselves
  // (a network adapter's offload) or ranks with cores to spare.
  Overlap,
  // The gradients of ranks whose buffers are in a GPU's memory: copied whole to a host buffer
  // (page-locked, allocated at plan time), summed there by MPI's all-reduce in the same buckets as
  // after-backward, and copied back before the optimizer steps on the GPU. Works for any number
  // of ranks per GPU and any MPI (no CUDA-aware MPI needed); on the CPU the copies are memcpy,
  // which is how the CPU tests check it. The step is launched, not recorded (its sum is an MPI
  // call on the host).
  HostStaged,
  // The gradients of ranks with a GPU each, summed where they are by NCCL's all-reduce (the
  // backend's Collective), bucket by bucket on the GPU's stream after backward: no copy through
  // the host, and the whole step, the sum included, recorded as one CUDA Graph. Opt-in until it
  // has been measured on GPUs (docs/benchmarks.md, "Not yet run on a GPU").
  Nccl,
};
// "shared", "after-backward", "overlap", "host-staged", "nccl"
const char* reduce_mode_name(ReduceMode mode);
// The mode `name` asks for on `world` for ranks on `device` ("auto", or a mode's name): auto is
// host-staged for GPU ranks, else shared where every rank is on one machine or every machine has
// the same number of ranks, more than one, else after-backward. Refused before any work: shared
// across machines of unequal rank counts; for GPU ranks any mode but host-staged and nccl; nccl
// for CPU ranks, and where ranks share a GPU (`gpus_here`: the GPUs of this rank's machine). Chosen
// by auto, a shared mode whose memory does not fit where MPI maps it falls back to after-backward.
struct ReduceChoice {
  ReduceMode mode = ReduceMode::AfterBackward;
  bool automatic = false;
};
ReduceChoice reduce_mode_for(const std::string& name, const mpi::World& world,
                             DeviceKind device = DeviceKind::Cpu, int gpus_here = 0);

// Where OpenMPI maps the memory the ranks of a machine share (/dev/shm, or its MCA parameter
// osc_sm_backing_directory), and the bytes free there; nullopt where it cannot be read.
std::string shared_memory_dir();
std::optional<int64_t> shared_memory_free_bytes();

class DataParallel : public BackwardObserver {
 public:
  // PyTorch DDP's default bucket is 25 MiB; smaller ones start communicating sooner in a model
  // whose gradients are a few megabytes (mnist-cnn's are 4.8 MB), and stay in the caches.
  static constexpr int64_t kDefaultBucketBytes = 4 << 20;

  explicit DataParallel(const mpi::World& world, ReduceChoice reduce = {},
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
  // The buckets of `model`'s gradients (host-staged: and the host buffer they are summed in; nccl:
  // and the ranks' communicator, made and tried once); before the first step.
  void plan(const Model& model);
  // Whether the step, its sum included, can be recorded (a CUDA Graph): only where the sum is
  // queued on the device (nccl); the other modes call MPI from the host.
  bool recordable() const { return mode_ == ReduceMode::Nccl; }

  // Shared mode, around the step loop (no-ops in the others). share_gradients: before the
  // plan's Networks exist (they hold the gradient buffer); where the shared memory of this model
  // and `optimizer` does not fit in shared_memory_dir(), a UserError naming the sizes, or after
  // auto chose shared, after-backward from then on with a warning. share_parameters: once the
  // parameters and the optimizer's state are final (initialised, shared by share_model, or restored
  // from a checkpoint): rank 0's become the ranks' one copy. unshare: after the last step, every
  // rank's own buffers again, holding the shared values (a checkpoint or the results read them
  // after).
  void share_gradients(Model& model, const OptimizerSettings& optimizer);
  void share_parameters(Model& model, OptimizerKernel& optimizer);
  void unshare(Model& model, OptimizerKernel& optimizer);

  // One step's gradient sum: node_backward_done as backward finishes each layer (when the rank's
  // step runs unsharded; in Overlap mode it starts the buckets then complete), then finish_step,
  // after which every rank holds the sum of the ranks' gradients (Shared: after which every
  // rank's gradients are complete, for update to sum). A rank without rows in a batch calls
  // finish_step alone (its gradients are zeros).
  void node_backward_done(size_t node) override;
  void finish_step();
  // The optimizer's step on the summed gradients: in Shared mode over this rank's part, summing
  // it there (the communicate phase is then the wait for the slowest rank's backward alone), then
  // a fence (the next forward reads every part); else over the whole buffer.
  void update(OptimizerKernel& optimizer, float* params, float* grads);
  // Floats of gradient summed per step.
  int64_t floats_per_step() const { return flat_size_; }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  // In place across ranks.
  void sum(double* values, int64_t n) const { world_.sum(values, n); }
  // Whether `flag` holds on any rank: every rank takes the same decision (stop, skip).
  bool any(bool flag) const;

 private:
  const mpi::World& world_;
  ReduceMode mode_;
  bool automatic_;
  int64_t bucket_bytes_;
  float* grads_ = nullptr;
  int64_t flat_size_ = 0;
  std::vector<GradientBucket> buckets_;
  size_t started_ = 0;  // buckets started this step
  mpi::PendingSums pending_;
  // Shared mode across machines: the ranks of this machine (they share memory), and the ranks of
  // this local rank on every machine (they sum their part over the network). One machine: none.
  std::unique_ptr<mpi::World> machine_, across_;
  const mpi::World& sharing() const { return machine_ ? *machine_ : world_; }
  // Shared mode: each rank's gradients; the parameters and the optimizer's state (rank 0's part
  // of the memory, one flat buffer each, then the weights' bf16 copy where the optimizer keeps
  // one); the buffers they replaced; this rank's part.
  Backend* backend_ = nullptr;
  std::unique_ptr<mpi::SharedMemory> grads_memory_, params_memory_;
  DeviceBuffer own_grads_, own_params_;
  std::vector<DeviceBuffer> own_state_;
  DeviceBuffer own_copy_;
  std::vector<const float*> others_;  // the other ranks' gradients, in rank order
  int64_t part_begin_ = 0, part_end_ = 0;
  // Host-staged mode: the gradients' host copy (page-locked on a GPU), where MPI sums them.
  DeviceBuffer staged_;
  // Nccl mode: this rank's member of the ranks' collective.
  std::unique_ptr<Collective> collective_;
};

}  // namespace xo

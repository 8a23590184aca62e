// Data-parallel training across MPI ranks: slices, buckets, the step's gradient sum (see
// data_parallel.h).
#include "train/data_parallel.h"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "train/memory.h"

namespace xo {

RankSlice rank_slice(int64_t rows, int rank, int ranks) {
  const int64_t base = rows / ranks, extra = rows % ranks;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::vector<GradientBucket> plan_buckets(const Model& model, int64_t bucket_bytes) {
  const int64_t flat = model.flat_size();
  const int64_t bucket_floats = std::max<int64_t>(1, bucket_bytes / int64_t{sizeof(float)});
  // Each node's lowest gradient offset; the layout is in node order (Model lays its tensors out
  // node by node), which the cuts rely on: a layout out of order gets one bucket.
  const auto& nodes = model.nodes();
  std::vector<int64_t> first(nodes.size(), -1);
  int64_t previous_end = 0;
  bool in_order = true;
  for (size_t i = 0; i < nodes.size(); ++i) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
    for (const int t : nodes[i].params) {
      const ParamTensor& p = model.tensors()[static_cast<size_t>(t)];
      lo = std::min(lo, p.offset);
      hi = std::max(hi, p.offset + p.size);
    }
    if (hi < 0) continue;
    if (lo < previous_end) in_order = false;
    first[i] = lo;
    previous_end = hi;
  }
  std::vector<GradientBucket> buckets;
  if (flat == 0) return buckets;
  if (!in_order) return {{0, flat, 0}};
  int64_t end = flat;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (first[i] < 0) continue;
    if (i == 0 || end - first[i] >= bucket_floats) {
      // The first layer's bucket takes the buffer's start too (alignment padding).
      const int64_t begin = i == 0 ? 0 : first[i];
      buckets.push_back({begin, end - begin, i});
      end = begin;
    }
  }
  if (end > 0) {
    // The rest of the buffer below the last cut (layers without parameters at the bottom): ready
    // when the lowest layer with parameters has run backward.
    size_t lowest = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (first[i] >= 0) {
        lowest = i;
        break;
      }
    }
    buckets.push_back({0, end, lowest});
  }
  return buckets;
}

const char* reduce_mode_name(ReduceMode mode) {
  switch (mode) {
    case ReduceMode::Shared:
      return "shared";
    case ReduceMode::AfterBackward:
      return "after-backward";
    case ReduceMode::Overlap:
      return "overlap";
    case ReduceMode::HostStaged:
      return "host-staged";
    case ReduceMode::Nccl:
      return "nccl";
  }
  return "?";
}

ReduceChoice reduce_mode_for(const std::string& name, const mpi::World& world, DeviceKind device,
                             int gpus_here) {
  const bool one_machine = world.local_size() == world.size();
  // Machines of K ranks each (K > 1): shared within each, the parts summed across them.
  const bool even_machines =
      world.hosts() * world.ranks_per_host() == world.size() && world.ranks_per_host() > 1;
  const bool gpu = device != DeviceKind::Cpu;
  if (name == "auto") {
    if (gpu) return {ReduceMode::HostStaged, true};
    return {one_machine || even_machines ? ReduceMode::Shared : ReduceMode::AfterBackward, true};
  }
  for (const ReduceMode m : {ReduceMode::Shared, ReduceMode::AfterBackward, ReduceMode::Overlap,
                             ReduceMode::HostStaged, ReduceMode::Nccl}) {
    if (name != reduce_mode_name(m)) continue;
    if (gpu && m != ReduceMode::HostStaged && m != ReduceMode::Nccl) {
      throw UserError(fmt::format(
          "--reduce {}: the gradients of GPU ranks are in the GPU's memory, which {} does not "
          "reach: use --reduce host-staged (or auto) or nccl",
          name, m == ReduceMode::Shared ? "the ranks' shared memory" : "MPI's all-reduce"));
    }
    if (!gpu && m == ReduceMode::Nccl) {
      throw UserError(
          "--reduce nccl: NCCL sums GPU memory, and these ranks train on the CPU: use auto, "
          "shared, after-backward or overlap (or --device cuda)");
    }
    if (m == ReduceMode::Nccl && world.local_size() > gpus_here) {
      throw UserError(fmt::format(
          "--reduce nccl: {} ranks share {} GPU{} on {}, and NCCL needs a GPU per rank: use "
          "--reduce host-staged (or auto), or at most {} rank{} per machine",
          world.local_size(), gpus_here, gpus_here == 1 ? "" : "s", world.host(), gpus_here,
          gpus_here == 1 ? "" : "s"));
    }
    if (m == ReduceMode::Shared && !one_machine && !even_machines) {
      throw UserError(fmt::format(
          "--reduce shared: the {} ranks of this job are on {} machines, not as many on each ({} "
          "on {}), and each rank sums its part of the gradients with the same part of every "
          "other machine: use --reduce after-backward or overlap, or as many ranks on each "
          "machine",
          world.size(), world.hosts(), world.local_size(), world.host()));
    }
    return {m, false};
  }
  throw UserError(fmt::format(
      "--reduce {}: expected auto, shared, after-backward, overlap, host-staged or nccl", name));
}

std::string shared_memory_dir() {
  const char* set = std::getenv("OMPI_MCA_osc_sm_backing_directory");
  return set && *set ? set : "/dev/shm";
}

std::optional<int64_t> shared_memory_free_bytes() {
  // A test's stand-in for a small folder (a container's 64 MB /dev/shm).
  if (const char* test = std::getenv("CROSSOVER_TEST_SHARED_MEMORY_FREE")) {
    return std::strtoll(test, nullptr, 10);
  }
  struct statvfs fs {};
  if (statvfs(shared_memory_dir().c_str(), &fs) != 0) return std::nullopt;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

DataParallel::DataParallel(const mpi::World& world, ReduceChoice reduce, int64_t bucket_bytes)
    : world_(world),
      mode_(reduce.mode),
      automatic_(reduce.automatic),
      bucket_bytes_(bucket_bytes),
      pending_(world) {}

namespace {

// The first line where two texts differ, or "" where they are equal.
std::string first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream a(mine), b(theirs);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la));
    const bool hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "";
    if (!ha || !hb || la != lb) {
      return fmt::format("line {}: '{}' where rank 0 has '{}'", line, ha ? la : "(nothing)",
                         hb ? lb : "(nothing)");
    }
  }
}

}  // namespace

void DataParallel::check_same(const std::string& fingerprint) const {
  const std::string rank0 = world_.broadcast(fingerprint);
  const std::string mine = rank() == 0 ? "" : first_difference(fingerprint, rank0);
  const std::vector<std::string> all = world_.gather(mine);
  std::string differing;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) differing += fmt::format("\n  rank {}: {}", r, all[r]);
  }
  differing = world_.broadcast(differing);
  if (!differing.empty()) {
    throw UserError(fmt::format(
        "the ranks of this job do not train the same thing (the spec, its data or the settings "
        "differ from rank 0's; every rank must run the same command on the same files):{}",
        differing));
  }
}

void DataParallel::share_model(Model& model) const {
  Backend& be = model.backend();
  std::vector<float> host(static_cast<size_t>(model.flat_size()));
  be.download(host.data(), model.params(), sizeof(float) * model.flat_size());
  world_.broadcast(host.data(), static_cast<int64_t>(sizeof(float)) * model.flat_size());
  be.upload(model.params(), host.data(), sizeof(float) * model.flat_size());
  share_state(model);
}

void DataParallel::share_state(Model& model) const {
  Backend& be = model.backend();
  if (model.state_size() > 0) {
    std::vector<float> host(static_cast<size_t>(model.state_size()));
    be.download(host.data(), model.state(), sizeof(float) * model.state_size());
    world_.broadcast(host.data(), static_cast<int64_t>(sizeof(float)) * model.state_size());
    be.upload(model.state(), host.data(), sizeof(float) * model.state_size());
  }
  be.synchronize();
}

void DataParallel::plan(const Model& model) {
  grads_ = model.grads();
  flat_size_ = model.flat_size();
  buckets_ = plan_buckets(model, bucket_bytes_);
  started_ = 0;
  if (mode_ == ReduceMode::HostStaged) {
    backend_ = &model.backend();
    staged_ = backend_->allocate_host(sizeof(float) * static_cast<size_t>(flat_size_));
  }
  if (mode_ == ReduceMode::Nccl) {
    backend_ = &model.backend();
    // Rank 0 draws the id (empty: its build has no NCCL, which every rank then says).
    const std::string id = world_.broadcast(rank() == 0 ? backend_->collective_id() : "");
    if (id.empty()) {
      throw UserError(
          "--reduce nccl: rank 0's crossover was built without NCCL (none beside its CUDA "
          "toolkit): use --reduce host-staged");
    }
    collective_ = backend_->collective(id, rank(), ranks());
    // Once before the step is recorded: NCCL sets up its channels on the first call, and a
    // communicator that cannot sum fails here, before any training.
    collective_->sum(grads_, flat_size_);
    backend_->synchronize();
  }
}

namespace {

// Memory of `rank`'s part of `shared`, `floats` floats from float `at`, as a buffer that does not
// own it. It starts on a cache line, as the backend's own buffers do (the model's tensors start on
// one from there, and products whose rows straddle lines run slower: mpi::SharedMemory).
DeviceBuffer view(const mpi::SharedMemory& shared, int rank, int64_t at, int64_t floats) {
  float* p = static_cast<float*>(shared.of(rank)) + at;
  XO_ASSERT(reinterpret_cast<uintptr_t>(p) % 64 == 0);
  return DeviceBuffer(std::shared_ptr<void>(p, [](void*) {}), sizeof(float) * floats);
}

}  // namespace

void DataParallel::share_gradients(Model& model, const OptimizerSettings& optimizer) {
  if (mode_ != ReduceMode::Shared) return;
  XO_ASSERT(model.backend().info().kind == DeviceKind::Cpu && !grads_memory_);
  if (world_.local_size() != world_.size() && !machine_) {
    machine_ = world_.machine();
    across_ = world_.split_by(world_.local_rank());
  }
  const mpi::World& machine = sharing();
  const int64_t flat = model.flat_size();
  // Every rank's gradients, and one copy of the parameters, of the optimizer's state and (at bf16)
  // of the parameters' bf16 copy. Each machine's first rank looks (its ranks share the folder),
  // and every rank takes the first machine's answer that is short, so that all decide alike.
  // (Each buffer padded to its pages: share_parameters.)
  const bool bf16_copy = keeps_bf16_weights(model.backend().info());
  const int64_t buffers = machine.size() + 1 + optimizer_state_per_parameter(optimizer);
  const int64_t need = static_cast<int64_t>(sizeof(float)) * flat * buffers +
                       (bf16_copy ? static_cast<int64_t>(sizeof(uint16_t)) * flat : 0) +
                       2 * mpi::SharedMemory::kPageBytes * (buffers + 1);
  std::string short_of;
  if (machine.rank() == 0) {
    const std::optional<int64_t> free = shared_memory_free_bytes();
    if (free && *free < need) {
      short_of = fmt::format(
          "the {} ranks of {} would share {} of memory, and {} (where MPI maps it) has {} free",
          machine.size(), machine_ ? world_.host() : std::string("this machine"),
          byte_size(static_cast<double>(need)), shared_memory_dir(),
          byte_size(static_cast<double>(*free)));
    }
  }
  std::string first_short;
  for (const std::string& s : world_.gather(short_of)) {
    if (first_short.empty()) first_short = s;
  }
  short_of = world_.broadcast(first_short);
  if (!short_of.empty()) {
    if (!automatic_) {
      throw UserError(fmt::format(
          "--reduce shared: {}: give it more (in a container, e.g. docker run --shm-size=1g) or "
          "use --reduce after-backward",
          short_of));
    }
    if (rank() == 0) {
      fmt::print(stderr,
                 "crossover: warning: {}: the gradients are summed by MPI's all-reduce instead "
                 "(--reduce after-backward; a larger {} lets the ranks share memory)\n",
                 short_of, shared_memory_dir());
    }
    mode_ = ReduceMode::AfterBackward;
    return;
  }
  backend_ = &model.backend();
  // Each rank's part of the buffers: contiguous, cut on 64-byte lines (the flat buffer's tensors
  // start on one), so that no two ranks write one cache line.
  // (Across machines the same cuts on each, whose ranks sum their parts with each other.)
  constexpr int64_t kLine = 16;
  const int n = machine.size(), me = machine.rank();
  auto cut = [&](int r) { return r == n ? flat : flat * r / n / kLine * kLine; };
  part_begin_ = cut(me);
  part_end_ = cut(me + 1);
  grads_memory_ = std::make_unique<mpi::SharedMemory>(machine, sizeof(float) * flat);
  own_grads_ = model.swap_grads(view(*grads_memory_, me, 0, flat));
  others_.clear();
  for (int k = 0; k < n; ++k) {
    if (k != me) others_.push_back(static_cast<const float*>(grads_memory_->of(k)));
  }
}

void DataParallel::share_parameters(Model& model, OptimizerKernel& optimizer) {
  if (mode_ != ReduceMode::Shared) return;
  XO_ASSERT(grads_memory_ && !params_memory_);
  const int64_t flat = model.flat_size();
  const std::vector<OptimizerStateBuffer> state = optimizer.state_buffers();
  const auto buffers = static_cast<int64_t>(1 + state.size());
  // The parameters' bf16 copy the optimizer keeps (the CPU at bf16) is shared too, after the
  // rest: each rank writes its part of it.
  const auto copy_floats =
      static_cast<int64_t>((optimizer.weights_copy_bytes() + sizeof(float) - 1) / sizeof(float));
  const bool first = sharing().rank() == 0;  // of its machine: holds the machine's copy
  // Each buffer starts on a page, as each rank's gradients do (mpi::SharedMemory).
  constexpr int64_t kPageFloats = mpi::SharedMemory::kPageBytes / sizeof(float);
  const int64_t stride = (flat + kPageFloats - 1) / kPageFloats * kPageFloats;
  params_memory_ = std::make_unique<mpi::SharedMemory>(
      sharing(),
      first ? static_cast<int64_t>(sizeof(float)) * (stride * buffers + copy_floats) : 0);
  const size_t bytes = sizeof(float) * flat;
  if (first) {
    auto* shared = static_cast<float*>(params_memory_->of(0));
    backend_->download(shared, model.params(), bytes);
    for (size_t k = 0; k < state.size(); ++k) {
      backend_->download(shared + stride * static_cast<int64_t>(1 + k), state[k].data, bytes);
    }
  }
  params_memory_->fence();
  own_params_ = model.swap_params(view(*params_memory_, 0, 0, flat));
  std::vector<DeviceBuffer> shared_state;
  for (int64_t k = 1; k < buffers; ++k)
    shared_state.push_back(view(*params_memory_, 0, stride * k, flat));
  own_state_ = optimizer.swap_state(std::move(shared_state));
  if (copy_floats > 0)
    own_copy_ =
        optimizer.swap_weights_copy(view(*params_memory_, 0, stride * buffers, copy_floats));
}

void DataParallel::unshare(Model& model, OptimizerKernel& optimizer) {
  if (params_memory_) {
    params_memory_->fence();  // every rank's last update is done
    const size_t bytes = sizeof(float) * model.flat_size();
    backend_->download(own_params_.as<float>(), model.params(), bytes);
    const std::vector<OptimizerStateBuffer> state = optimizer.state_buffers();
    for (size_t k = 0; k < state.size(); ++k) {
      backend_->download(own_state_[k].as<float>(), state[k].data, bytes);
    }
    model.swap_params(std::move(own_params_));
    optimizer.swap_state(std::move(own_state_));
    if (own_copy_) optimizer.swap_weights_copy(std::move(own_copy_));
    params_memory_->fence();  // every rank has its copy before the memory goes
    params_memory_.reset();
  }
  if (grads_memory_) {
    model.swap_grads(std::move(own_grads_));
    others_.clear();
    grads_memory_.reset();
  }
}

void DataParallel::node_backward_done(size_t node) {
  if (mode_ != ReduceMode::Overlap) return;
  while (started_ < buckets_.size() && buckets_[started_].ready_after >= node) {
    const GradientBucket& b = buckets_[started_++];
    pending_.start(grads_ + b.offset, b.size);
  }
  pending_.progress();
}

void DataParallel::finish_step() {
  if (mode_ == ReduceMode::Shared) {
    // Every rank's gradients are complete: update() sums this rank's part of them.
    grads_memory_->fence();
    return;
  }
  if (mode_ == ReduceMode::AfterBackward) {
    // The same buckets as overlapped, one call each.
    for (const GradientBucket& b : buckets_) world_.sum(grads_ + b.offset, b.size);
    return;
  }
  if (mode_ == ReduceMode::Nccl) {
    // Queued on the GPU's stream behind backward, ahead of the optimizer: recordable.
    for (const GradientBucket& b : buckets_) collective_->sum(grads_ + b.offset, b.size);
    return;
  }
  if (mode_ == ReduceMode::HostStaged) {
    // The download waits for the step's backward; the upload is queued before the optimizer.
    const size_t bytes = sizeof(float) * static_cast<size_t>(flat_size_);
    float* host = staged_.as<float>();
    backend_->download(host, grads_, bytes);
    for (const GradientBucket& b : buckets_) world_.sum(host + b.offset, b.size);
    backend_->upload(grads_, host, bytes);
    return;
  }
  while (started_ < buckets_.size()) {
    const GradientBucket& b = buckets_[started_++];
    pending_.start(grads_ + b.offset, b.size);
  }
  pending_.wait();
  started_ = 0;
}

void DataParallel::update(OptimizerKernel& optimizer, float* params, float* grads) {
  if (mode_ != ReduceMode::Shared) {
    optimizer.step(params, grads);
    return;
  }
  // This rank's part of the gradients summed over the ranks' buffers in rank order (its own
  // first: the same additions at every step, whichever rank arrives first) and stepped on, in one
  // pass over the memory.
  if (!across_) {
    optimizer.step_part(params, grads, others_, part_begin_, part_end_);
    params_memory_->fence();
    return;
  }
  // Across machines: the part summed over this machine's buffers in the same order, then with the
  // same part of every other machine (MPI), then stepped on. No other rank reads this part of
  // this rank's buffer.
  float* part = grads + part_begin_;
  const int64_t size = part_end_ - part_begin_;
  for (const float* other : others_) {
    const float* theirs = other + part_begin_;
    for (int64_t i = 0; i < size; ++i) part[i] += theirs[i];
  }
  across_->sum(part, size);
  optimizer.step_part(params, grads, {}, part_begin_, part_end_);
  params_memory_->fence();
}

bool DataParallel::any(bool flag) const {
  int64_t v = flag ? 1 : 0;
  world_.max(&v, 1);
  return v != 0;
}

}  // namespace xo

// Data-parallel training across MPI ranks: slices, buckets, the step's gradient sum (see
// data_parallel.h).
#include "train/data_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

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
  return mode == ReduceMode::Overlap ? "overlap" : "after-backward";
}

DataParallel::DataParallel(const mpi::World& world, ReduceMode mode, int64_t bucket_bytes)
    : world_(world), mode_(mode), bucket_bytes_(bucket_bytes), pending_(world) {}

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
  if (mode_ == ReduceMode::AfterBackward) {
    // The same buckets as overlapped, one call each.
    for (const GradientBucket& b : buckets_) world_.sum(grads_ + b.offset, b.size);
    return;
  }
  while (started_ < buckets_.size()) {
    const GradientBucket& b = buckets_[started_++];
    pending_.start(grads_ + b.offset, b.size);
  }
  pending_.wait();
  started_ = 0;
}

bool DataParallel::any(bool flag) const {
  int64_t v = flag ? 1 : 0;
  world_.max(&v, 1);
  return v != 0;
}

}  // namespace xo

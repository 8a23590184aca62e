// The bf16 copies of the weights that the CPU's optimizers keep (--precision bf16): each update
// pass writes the copy of what it updated while the values are in the caches, and the products of
// the next forward and backward read it, so the weights are converted once per update instead of
// once per product, per batch shard and per data-parallel rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace xo::cpu {

// Which flat parameter buffers have a current bf16 copy, and where it is. A copy is current from
// the optimizer pass that wrote it until anything else writes the buffer or frees it (the
// backend's upload, download, fill_zero and its buffers' release call written()), or the optimizer
// moves or drops its copy. A product whose weights have no current copy converts them itself, so
// a forgotten copy costs a conversion, never a stale value.
class Bf16Weights {
 public:
  // The current copy of floats [p, p + n), or nullptr. With count > 1: of `count` blocks of n
  // floats `stride` apart (block t at p + t * stride), where their copies lie as they do (block
  // t's at the first's + t * stride), as a fused group's Linear reads its models' weights: each
  // model's optimizer keeps its own copy, in one buffer for the group (train_fused).
  const uint16_t* find(const float* p, int64_t n, int64_t count = 1, int64_t stride = 0) const {
    std::lock_guard lock(mutex_);
    const uint16_t* first = find_one(p, n);
    for (int64_t t = 1; first && t < count; ++t) {
      if (find_one(p + t * stride, n) != first + t * stride) return nullptr;
    }
    return first;
  }
  // `owner`'s copy `bits` of params[0, floats) is current; what owner kept before and any other
  // copy of those parameters (stale now) are forgotten.
  void keep(const void* owner, const float* params, int64_t floats, const uint16_t* bits) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) {
      return e.owner == owner || overlaps(e, params, sizeof(float) * static_cast<size_t>(floats));
    });
    entries_.push_back({owner, params, floats, bits});
  }
  // `owner` keeps no current copy any more.
  void forget(const void* owner) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return e.owner == owner; });
  }
  // Something other than the owner's update wrote (or freed) bytes [at, at + bytes).
  void written(const void* at, size_t bytes) {
    std::lock_guard lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return overlaps(e, at, bytes); });
  }

 private:
  struct Entry {
    const void* owner;
    const float* params;
    int64_t floats;
    const uint16_t* bits;
  };
  const uint16_t* find_one(const float* p, int64_t n) const {
    for (const Entry& e : entries_) {
      if (e.params <= p && p + n <= e.params + e.floats) return e.bits + (p - e.params);
    }
    return nullptr;
  }
  static bool overlaps(const Entry& e, const void* at, size_t bytes) {
    const auto* begin = static_cast<const char*>(at);
    const auto* first = reinterpret_cast<const char*>(e.params);
    const auto* last = reinterpret_cast<const char*>(e.params + e.floats);
    return first < begin + bytes && begin < last;
  }

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace xo::cpu

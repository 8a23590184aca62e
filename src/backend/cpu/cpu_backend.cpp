#include "backend/cpu/cpu_backend.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "backend/cpu/dnnl_check.h"
#include "core/error.h"
#include "core/format.h"

namespace xo::cpu {
namespace {

constexpr size_t kAlignment = 64;  // one cache line, and one AVX-512 register
// Allocations from this size on are compared with the available memory before they are made.
constexpr size_t kCheckedAllocationBytes = size_t{64} << 20;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

// The kernel's estimate of the memory available to new allocations without swapping:
// /proc/meminfo's MemAvailable (in KiB there).
std::optional<int64_t> meminfo_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// What the cgroup (v2) this process runs in still lets it allocate: memory.max - memory.current;
// nullopt without a limit ("max") or without cgroup v2.
std::optional<int64_t> cgroup_room_bytes() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"),
      current_file("/sys/fs/cgroup/memory.current");
  int64_t max = 0, current = 0;
  if (!(max_file >> max) || !(current_file >> current)) return std::nullopt;
  return std::max<int64_t>(max - current, 0);
}

// What limits oneDNN's instruction set: the CPU itself, or ONEDNN_MAX_CPU_ISA (DNNL_MAX_CPU_ISA).
std::string cpu_isa_note() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    if (const char* v = std::getenv(name); v && *v) return fmt::format("{}={}", name, v);
  }
  return "its instruction set";
}

}  // namespace

std::string cpu_bf16_unit() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "AMX";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 BF16";
    default:
      return "";
  }
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return omp_get_num_procs();
}

CpuBackend::CpuBackend(int threads, Precision precision) {
  if (precision == Precision::BF16) {
    if (cpu_bf16_unit().empty()) {
      throw UserError(fmt::format(
          "--precision bf16 on the CPU needs AMX (amx_bf16) or AVX-512 BF16 (avx512_bf16); {} "
          "has neither as oneDNN sees it ({}). Use --precision f32 here",
          cpu_model_name(), cpu_isa_note()));
    }
    bf16_ = true;
    kept_ = std::make_shared<Bf16Weights>();
  }
  if (threads <= 0) threads = available_cores();
  omp_set_num_threads(threads);
  engine_ = XO_DNNL_CHECK(dnnl::engine(dnnl::engine::kind::cpu, 0));
  stream_ = XO_DNNL_CHECK(dnnl::stream(engine_));
  const dnnl_version_t* v = dnnl_version();
  info_.id = bf16_ ? kCpuBf16 : "cpu";
  info_.kind = DeviceKind::Cpu;
  info_.name = cpu_model_name();
  info_.threads = threads;
  info_.library = fmt::format("oneDNN {}.{}.{} (OpenMP)", v->major, v->minor, v->patch);
  info_.details = {{"cores", std::to_string(available_cores())}};
  info_.precision = bf16_ ? "bf16" : "f32";
  if (bf16_) info_.details.emplace_back("bf16 unit", cpu_bf16_unit());
}

DeviceBuffer CpuBackend::allocate(size_t bytes) {
  // Linux promises memory it may not have (overcommit): a big allocation beyond what is available
  // succeeds, and zeroing it below then brings the OOM killer instead of an error. Big requests
  // are compared with the available memory first (reading it costs tens of microseconds, nothing
  // beside allocating and zeroing this much).
  const auto refuse = [&] {
    const auto free = free_memory_bytes();
    return OutOfMemory(fmt::format("cpu: out of memory allocating {} ({} bytes){}",
                                   byte_size(static_cast<double>(bytes)),
                                   group_digits(static_cast<int64_t>(bytes)),
                                   free ? fmt::format("; {} are available", byte_size(*free)) : ""),
                       static_cast<int64_t>(bytes));
  };
  if (bytes > std::numeric_limits<size_t>::max() - kAlignment) throw refuse();
  if (bytes >= kCheckedAllocationBytes) {
    const auto free = free_memory_bytes();
    if (free && static_cast<int64_t>(bytes) > *free) throw refuse();
  }
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p) throw refuse();
  std::memset(p, 0, rounded);
  bytes_allocated_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  if (!kept_) return DeviceBuffer(std::shared_ptr<void>(p, std::free), bytes);
  return DeviceBuffer(std::shared_ptr<void>(p,
                                            [kept = kept_, bytes](void* at) {
                                              kept->written(at, bytes);
                                              std::free(at);
                                            }),
                      bytes);
}

std::optional<int64_t> CpuBackend::free_memory_bytes() const {
  std::optional<int64_t> available = meminfo_available_bytes();
  // In a container the cgroup's limit may be lower than what the host has available.
  if (const auto limit = cgroup_room_bytes(); limit && (!available || *limit < *available)) {
    available = limit;
  }
  return available;
}

// Each write forgets the weights' copies it makes stale (bf16).
void CpuBackend::upload(void* device_dst, const void* host_src, size_t bytes) {
  if (kept_) kept_->written(device_dst, bytes);
  std::memcpy(device_dst, host_src, bytes);
}

void CpuBackend::download(void* host_dst, const void* device_src, size_t bytes) {
  if (kept_) kept_->written(host_dst, bytes);
  std::memcpy(host_dst, device_src, bytes);
}

void CpuBackend::fill_zero(void* device_dst, size_t bytes) {
  if (kept_) kept_->written(device_dst, bytes);
  std::memset(device_dst, 0, bytes);
}

void CpuBackend::next_batch(const float* src, const int32_t* src_labels, const int32_t* order,
                            int64_t* position, int64_t rows, int64_t row_floats, float* dst,
                            int32_t* dst_labels) {
  const int32_t* index = order + *position;
  // Rows of a few floats (the disc models' 2) are copied inline: a memcpy call each costs more
  // than the copy.
  constexpr int64_t kInlineRow = 16;
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = src + int64_t{index[r]} * row_floats;
    float* to = dst + r * row_floats;
    if (row_floats <= kInlineRow) {
      for (int64_t i = 0; i < row_floats; ++i) to[i] = from[i];
    } else {
      std::memcpy(to, from, sizeof(float) * row_floats);
    }
    dst_labels[r] = src_labels[index[r]];
  }
  *position += rows;
}

namespace {
// The CPU runs each call as it is made, so a timestamp is the host clock read at once.
class HostClock final : public QueueClock {
 public:
  explicit HostClock(int marks) : marks_(static_cast<size_t>(marks)) {}
  void mark(int i) override {
    marks_.at(static_cast<size_t>(i)) = std::chrono::steady_clock::now();
  }
  double ms_between(int from, int to) override {
    return std::chrono::duration<double, std::milli>(marks_.at(static_cast<size_t>(to)) -
                                                     marks_.at(static_cast<size_t>(from)))
        .count();
  }

 private:
  std::vector<std::chrono::steady_clock::time_point> marks_;
};
}  // namespace

std::unique_ptr<QueueClock> CpuBackend::clock(int marks) {
  return std::make_unique<HostClock>(marks);
}

void CpuBackend::accumulate(float* dst, const float* src, int64_t n) {
  parallel_for(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) dst[i] += src[i];
  });
}

void CpuBackend::accumulate_stats(LossStats* dst, const LossStats* src) {
  dst->loss_sum += src->loss_sum;
  dst->correct += src->correct;
  dst->samples += src->samples;
}

ExecutionPolicy CpuBackend::execution_policy() const {
  return {.shard_threads = info_.threads,
          .min_shard_batch = kMinShardBatch,
          .min_shard_flops = kMinShardedStepFlops,
          .max_shard_flops = kMaxShardedStepFlops,
          .single_thread_flops = kSingleThreadMatmulFlops};
}

void CpuBackend::release_threads() {
  // libgomp ends this thread's pool (its workers spin GOMP_SPINCOUNT times before they sleep:
  // docs/benchmarks.md, "A fused search's serial costs"); inside a parallel region it declines,
  // and nothing is lost.
  omp_pause_resource_all(omp_pause_soft);
}

void CpuBackend::parallel_shards(int shards, FunctionRef<void(int shard)> body) {
  // Inside another parallel region (a model's own shards, its model on one of a fused group's
  // workers) a nested region would get one thread and run shard 0 alone: the shards run here, in
  // order.
  if (shards == 1 || omp_in_parallel()) {
    for (int s = 0; s < shards; ++s) body(s);
    return;
  }
#pragma omp parallel num_threads(shards)
  {
    // Each worker's kernels on its one thread (a shard's are made so; a fused group's models side
    // by side have only one-thread products and crossover's own loops: model/fused_network.h).
    omp_set_num_threads(1);
    body(omp_get_thread_num());
  }
}

std::unique_ptr<WeightedKernel> CpuBackend::linear(const LinearShape& shape) {
  return make_linear(shape, bf16_weights(), engine_, stream_);
}
std::unique_ptr<ActivationKernel> CpuBackend::activation(Activation act, int64_t elements,
                                                         float negative_slope) {
  return make_activation(act, elements, negative_slope);
}
std::unique_ptr<LossKernel> CpuBackend::loss(LossKind kind, int64_t batch, int64_t classes,
                                             int64_t normalizer) {
  return make_loss(kind, batch, classes, normalizer);
}
std::unique_ptr<WeightedKernel> CpuBackend::conv2d(const Conv2dShape& shape) {
  return make_conv2d(shape, bf16_, engine_, stream_);
}
std::unique_ptr<PoolKernel> CpuBackend::pool2d(const Pool2dShape& shape) {
  return make_pool2d(shape, engine_, stream_);
}
std::unique_ptr<PoolKernel> CpuBackend::sequence_pool(const SequencePoolShape& shape) {
  return make_sequence_pool(shape);
}
std::unique_ptr<DropoutKernel> CpuBackend::dropout(const DropoutShape& shape) {
  return make_dropout(shape);
}
std::unique_ptr<EmbeddingKernel> CpuBackend::embedding(const EmbeddingShape& shape) {
  return make_embedding(shape);
}
std::unique_ptr<LstmKernel> CpuBackend::lstm(const LstmShape& shape) {
  return make_lstm(shape, bf16_weights(), engine_, stream_);
}
std::unique_ptr<BatchNormKernel> CpuBackend::batch_norm(const BatchNormShape& shape) {
  return make_batch_norm(shape, engine_, stream_);
}
std::unique_ptr<OptimizerKernel> CpuBackend::optimizer(const OptimizerSettings& spec,
                                                       int64_t parameters) {
  return make_optimizer(*this, spec, parameters, kept_.get());
}

}  // namespace xo::cpu

// The CPU backend: oneDNN matmuls (primitives built once per shape at plan time) and vectorised
// loops for the element-wise work, parallelised with OpenMP (the runtime Debian's oneDNN uses).
#pragma once

#include <dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "backend/backend.h"

namespace xo::cpu {

// Element counts below this run on one thread: an OpenMP fork/join costs about a microsecond,
// more than the loop itself for the small layers of the disc sweep.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Runs body(begin, end) over [0, n): on the calling thread below kParallelThreshold (an OpenMP
// `if` clause would still pay for a serialized parallel region, ~1 us), else split statically
// across the OpenMP threads, so each element is always handled the same way.
template <typename Body>
void parallel_for(int64_t n, Body&& body) {
  if (n < kParallelThreshold) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = (n + threads - 1) / threads;
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, begin + chunk);
    if (begin < end) body(begin, end);
  }
}

// Matmuls below this many FLOPs run on one thread. Measured on the 2-core machine with the disc
// sweep (thresholds 1e6 ... 3.2e7 compared): disc-2 ... disc-7 run 2-3x faster single-threaded,
// disc-8 is even, and from disc-9 on both threads win.
inline constexpr double kSingleThreadMatmulFlops = 4e6;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);
  const DeviceInfo& info() const override { return info_; }

  DeviceBuffer allocate(size_t bytes) override;
  void upload(void* device_dst, const void* host_src, size_t bytes) override;
  void download(void* host_dst, const void* device_src, size_t bytes) override;
  void fill_zero(void* device_dst, size_t bytes) override;
  void gather_rows(const float* src, const int32_t* src_labels, const int32_t* index, int64_t rows,
                   int64_t row_floats, float* dst, int32_t* dst_labels) override;
  void synchronize() override {}

  std::unique_ptr<LinearKernel> linear(const LinearShape& shape) override;
  std::unique_ptr<ActivationKernel> activation(Activation act, int64_t elements) override;
  std::unique_ptr<CrossEntropyKernel> cross_entropy(int64_t batch, int64_t classes) override;
  std::unique_ptr<OptimizerKernel> optimizer(const OptimizerSpec& spec,
                                             int64_t parameters) override;

 private:
  DeviceInfo info_;
  dnnl::engine engine_;
  dnnl::stream stream_;
};

// Kernel factories, one per op-family file.
std::unique_ptr<LinearKernel> make_linear(const LinearShape& shape, const dnnl::engine& engine,
                                          const dnnl::stream& stream);
std::unique_ptr<ActivationKernel> make_activation(Activation act, int64_t elements);
std::unique_ptr<CrossEntropyKernel> make_cross_entropy(int64_t batch, int64_t classes);
std::unique_ptr<OptimizerKernel> make_optimizer(const OptimizerSpec& spec, int64_t parameters);

// d_dst[i] *= act'(.) computed from the activation's output dst, for n elements (shared by the
// fused Linear backward and the stand-alone activation).
void activation_backward_inplace(Activation act, const float* dst, float* d_dst, int64_t n);

// Number of CPU cores this process may run on.
int available_cores();

}  // namespace xo::cpu

// One checked-call macro per library (CUDA runtime, cuBLASLt, cuDNN, NCCL where built) and one for
// kernel launches:
// a failure throws InternalError with the library, the expression, the library's own message, the
// file and the line.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#if CROSSOVER_WITH_NCCL
#include <nccl.h>
#endif

#include <cstdint>

#include "core/error.h"

#define XO_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    const cudaError_t xo_status_ = (expr);                                           \
    if (xo_status_ != cudaSuccess)                                                   \
      ::xo::throw_internal(#expr, std::string("CUDA: ") + cudaGetErrorName(xo_status_) + \
                                      ": " + cudaGetErrorString(xo_status_),         \
                           __FILE__, __LINE__);                                      \
  } while (0)

#define XO_CUBLAS_CHECK(expr)                                                                 \
  do {                                                                                        \
    const cublasStatus_t xo_status_ = (expr);                                                 \
    if (xo_status_ != CUBLAS_STATUS_SUCCESS)                                                  \
      ::xo::throw_internal(#expr, std::string("cuBLASLt: ") + cublasLtGetStatusName(xo_status_) + \
                                      ": " + cublasLtGetStatusString(xo_status_),               \
                           __FILE__, __LINE__);                                               \
  } while (0)

#define XO_CUDNN_CHECK(expr)                                                                  \
  do {                                                                                        \
    const cudnnStatus_t xo_status_ = (expr);                                                  \
    if (xo_status_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::xo::throw_internal(#expr, std::string("cuDNN: ") + cudnnGetErrorString(xo_status_),  \
                           __FILE__, __LINE__);                                               \
  } while (0)

#if CROSSOVER_WITH_NCCL
#define XO_NCCL_CHECK(expr)                                                                  \
  do {                                                                                       \
    const ncclResult_t xo_status_ = (expr);                                                  \
    if (xo_status_ != ncclSuccess)                                                           \
      ::xo::throw_internal(#expr, std::string("NCCL: ") + ncclGetErrorString(xo_status_),   \
                           __FILE__, __LINE__);                                              \
  } while (0)
#endif

// Launches a kernel on a stream and checks the launch: XO_CUDA_LAUNCH(kernel, grid, block, shared
// bytes, stream, kernel arguments...).
#define XO_CUDA_LAUNCH(kernel, grid, block, shared, stream, ...)                  \
  do {                                                                            \
    kernel<<<(grid), (block), (shared), (stream)>>>(__VA_ARGS__);                 \
    const cudaError_t xo_status_ = cudaGetLastError();                            \
    if (xo_status_ != cudaSuccess)                                                \
      ::xo::throw_internal(#kernel "<<<...>>>",                                   \
                           std::string("CUDA launch: ") + cudaGetErrorString(xo_status_), \
                           __FILE__, __LINE__);                                   \
  } while (0)

namespace xo::cuda {

// Threads per block for element-wise kernels, and the blocks that cover n elements (grid-stride
// loops take the rest).
inline constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 8 ? 65535 * 8 : b));
}

}  // namespace xo::cuda

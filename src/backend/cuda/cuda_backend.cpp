// The CUDA backend's device, memory, queue and recording: one stream per backend, every call queued
// on it; CUDA Graphs for recorded steps; events for timestamps. Host code only (compiled by the C++
// compiler); the kernels are in .cu files, one per op family (linear.cu, conv.cu, ...) as in the
// CPU backend, and the backend's own in queue.cu.
#include "backend/cuda/cuda_backend.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "backend/cuda/cublaslt_loader.h"
#include "backend/cuda/entry.h"
#include "core/format.h"

namespace xo::cuda {
namespace {

// The cuBLASLt workspace: what NVIDIA recommends for Hopper (32 MiB) covers every other GPU.
constexpr size_t kMatmulWorkspaceBytes = size_t{32} << 20;

std::string version_string(int v) {  // CUDA's 1000 * major + 10 * minor
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// An instantiated CUDA Graph, launched as a whole on the backend's stream.
class Graph final : public RecordedWork {
 public:
  Graph(cudaGraph_t graph, cudaGraphExec_t exec, cudaStream_t stream)
      : graph_(graph), exec_(exec), stream_(stream) {}
  ~Graph() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  void launch() override { XO_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

// Events recorded in the stream; reading one waits only for it.
class EventClock final : public QueueClock {
 public:
  EventClock(int marks, cudaStream_t stream) : stream_(stream) {
    events_.resize(static_cast<size_t>(marks), nullptr);
    for (auto& e : events_) XO_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~EventClock() override {
    for (auto& e : events_) cudaEventDestroy(e);
  }
  void mark(int i) override {
    XO_CUDA_CHECK(cudaEventRecord(events_.at(static_cast<size_t>(i)), stream_));
  }
  double ms_between(int from, int to) override {
    cudaEvent_t a = events_.at(static_cast<size_t>(from)), b = events_.at(static_cast<size_t>(to));
    XO_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    XO_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

CudaBackend::CudaBackend(int device, Precision precision) : device_(device), precision_(precision) {
  XO_CUDA_CHECK(cudaSetDevice(device));
  XO_CUDA_CHECK(cudaGetDeviceProperties(&properties_, device));
  XO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  const std::string cublaslt_path = load_cublaslt();  // opened now, not when crossover starts
  XO_CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
  XO_CUDNN_CHECK(cudnnCreate(&cudnn_));
  XO_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  workspace_ = allocate(kMatmulWorkspaceBytes);

  int driver = 0, runtime = 0;
  XO_CUDA_CHECK(cudaDriverGetVersion(&driver));
  XO_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  const size_t lt = cublasLtGetVersion(), dnn = cudnnGetVersion();
  info_.id = fmt::format("cuda:{}", device);
  info_.kind = DeviceKind::Gpu;
  info_.name = properties_.name;
  info_.threads = 0;
  info_.library = fmt::format("cuBLASLt {}.{}.{}, cuDNN {}.{}.{}, CUDA runtime {}", lt / 10000,
                              (lt / 100) % 100, lt % 100, dnn / 10000, (dnn / 100) % 100, dnn % 100,
                              version_string(runtime));
  info_.precision = precision_name(precision);
  int clock_khz = 0;  // the peak (boost) clock; a profile carries it to other GPUs
  XO_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  info_.details = {
      {"memory", fmt::format("{:.1f} GiB", static_cast<double>(properties_.totalGlobalMem) /
                                               (1024.0 * 1024 * 1024))},
      {"compute capability", fmt::format("{}.{}", properties_.major, properties_.minor)},
      {"multiprocessors", fmt::format("{}", properties_.multiProcessorCount)},
      {"boost clock MHz", fmt::format("{}", clock_khz / 1000)},
      {"driver", fmt::format("CUDA {} (driver API)", version_string(driver))},
      {"runtime", version_string(runtime)},
      {"precision", precision_name(precision)},
      {"cuBLASLt", cublaslt_path},
  };
}

CudaBackend::~CudaBackend() {
  // Nothing here may throw: errors while tearing down are left to the driver.
  workspace_ = {};
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (stream_) cudaStreamDestroy(stream_);
}

DeviceBuffer CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = bytes == 0 ? 256 : (bytes + 255) / 256 * 256;
  const cudaError_t e = rounded < bytes ? cudaErrorMemoryAllocation : cudaMalloc(&p, rounded);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // an answer, not a broken context: clear it so later calls see success
    const auto free = free_memory_bytes();
    // The device id is in the message ("cuda:0"); the name too, while it is being set up.
    throw OutOfMemory(
        fmt::format(
            "{}: out of GPU memory allocating {} ({} bytes){}",
            info_.id.empty() ? fmt::format("cuda:{}", device_) : info_.id,
            byte_size(static_cast<double>(bytes)), group_digits(static_cast<int64_t>(bytes)),
            free ? fmt::format("; {} are free", byte_size(static_cast<double>(*free))) : ""),
        static_cast<int64_t>(bytes));
  }
  XO_CUDA_CHECK(e);
  XO_CUDA_CHECK(cudaMemsetAsync(p, 0, rounded, stream_));
  XO_CUDA_CHECK(cudaStreamSynchronize(stream_));
  bytes_allocated_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  return DeviceBuffer(std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }), bytes);
}

DeviceBuffer CudaBackend::allocate_host(size_t bytes) {
  void* p = nullptr;
  XO_CUDA_CHECK(cudaMallocHost(&p, bytes == 0 ? 1 : bytes));
  std::memset(p, 0, bytes);
  return DeviceBuffer(std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); }), bytes);
}

std::optional<int64_t> CudaBackend::free_memory_bytes() const {
  // cudaMemGetInfo answers for the current device: this one's, with the caller's put back after.
  int current = 0;
  size_t free = 0, total = 0;
  const bool ok = cudaGetDevice(&current) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess &&
                  cudaMemGetInfo(&free, &total) == cudaSuccess;
  cudaSetDevice(current);
  if (!ok) {
    cudaGetLastError();  // no answer is not an error of the calls that follow
    return std::nullopt;
  }
  return static_cast<int64_t>(free);
}

void CudaBackend::upload(void* device_dst, const void* host_src, size_t bytes) {
  XO_CUDA_CHECK(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  XO_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may go right after
}

void CudaBackend::download(void* host_dst, const void* device_src, size_t bytes) {
  XO_CUDA_CHECK(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_));
  XO_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::fill_zero(void* device_dst, size_t bytes) {
  XO_CUDA_CHECK(cudaMemsetAsync(device_dst, 0, bytes, stream_));
}

void CudaBackend::next_batch(const float* src, const int32_t* src_labels, const int32_t* order,
                             int64_t* position, int64_t rows, int64_t row_floats, float* dst,
                             int32_t* dst_labels) {
  launch_next_batch(stream_, src, src_labels, order, position, rows, row_floats, dst, dst_labels);
}

void CudaBackend::increment(uint64_t* counter) { launch_increment(stream_, counter); }

void CudaBackend::synchronize() { XO_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::unique_ptr<RecordedWork> CudaBackend::capture(FunctionRef<void()> body) {
  XO_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);  // leaves the stream usable
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  XO_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) {
    cudaGraphDestroy(graph);
    XO_CUDA_CHECK(e);
  }
  // Uploading now keeps the first launch from paying for it.
  XO_CUDA_CHECK(cudaGraphUpload(exec, stream_));
  return std::make_unique<Graph>(graph, exec, stream_);
}

std::unique_ptr<QueueClock> CudaBackend::clock(int marks) {
  return std::make_unique<EventClock>(marks, stream_);
}

void CudaBackend::accumulate(float* dst, const float* src, int64_t n) {
  launch_accumulate(stream_, dst, src, n);
}

void CudaBackend::accumulate_stats(LossStats* dst, const LossStats* src) {
  launch_accumulate_stats(stream_, dst, src);
}

void CudaBackend::parallel_shards(int shards, FunctionRef<void(int shard)> body) {
  for (int k = 0; k < shards; ++k) body(k);
}

std::unique_ptr<WeightedKernel> CudaBackend::linear(const LinearShape& shape) {
  return make_linear(*this, shape);
}
std::unique_ptr<ActivationKernel> CudaBackend::activation(Activation act, int64_t elements,
                                                          float negative_slope) {
  return make_activation(*this, act, elements, negative_slope);
}
std::unique_ptr<LossKernel> CudaBackend::loss(LossKind kind, int64_t batch, int64_t classes,
                                              int64_t normalizer) {
  return make_loss(*this, kind, batch, classes, normalizer);
}
std::unique_ptr<WeightedKernel> CudaBackend::conv2d(const Conv2dShape& shape) {
  return make_conv2d(*this, shape);
}
std::unique_ptr<PoolKernel> CudaBackend::pool2d(const Pool2dShape& shape) {
  return make_pool2d(*this, shape);
}
std::unique_ptr<PoolKernel> CudaBackend::sequence_pool(const SequencePoolShape& shape) {
  return make_sequence_pool(*this, shape);
}
std::unique_ptr<DropoutKernel> CudaBackend::dropout(const DropoutShape& shape) {
  return make_dropout(*this, shape);
}
std::unique_ptr<EmbeddingKernel> CudaBackend::embedding(const EmbeddingShape& shape) {
  return make_embedding(*this, shape);
}
std::unique_ptr<LstmKernel> CudaBackend::lstm(const LstmShape& shape) {
  return make_lstm(*this, shape);
}
bool CudaBackend::lstm_fuses_models() const {
  const char* opt_out = std::getenv("CROSSOVER_GPU_FUSE_LSTM");
  return opt_out == nullptr || std::string_view(opt_out) != "0";
}
std::unique_ptr<BatchNormKernel> CudaBackend::batch_norm(const BatchNormShape& shape) {
  return make_batch_norm(*this, shape);
}
std::unique_ptr<OptimizerKernel> CudaBackend::optimizer(const OptimizerSettings& spec,
                                                        int64_t parameters) {
  return make_optimizer(*this, spec, parameters);
}

// The registry's entry points (entry.h).
std::vector<std::string> list_devices(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it: it is an answer, not a failure
    if (why) {
      if (e == cudaErrorNoDevice) {
        *why = "no NVIDIA GPU is present";
      } else if (e == cudaErrorInsufficientDriver) {
        *why =
            "no NVIDIA GPU is usable: no NVIDIA driver is loaded, or it is older than this "
            "crossover's CUDA runtime";
      } else {
        *why = fmt::format("no NVIDIA GPU is usable ({}: {})", cudaGetErrorName(e),
                           cudaGetErrorString(e));
      }
    }
    return {};
  }
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(fmt::format("cuda:{}", i));
  if (ids.empty() && why) *why = "no NVIDIA GPU is present";
  return ids;
}

std::unique_ptr<Backend> make_backend(int device_index, Precision precision) {
  std::string why;
  const auto ids = list_devices(&why);
  if (ids.empty()) throw UserError(fmt::format("--device cuda:{}: {}", device_index, why));
  if (device_index >= static_cast<int>(ids.size())) {
    throw UserError(
        fmt::format("--device cuda:{}: this machine has {} NVIDIA GPU{} (cuda:0{})", device_index,
                    ids.size(), ids.size() == 1 ? "" : "s",
                    ids.size() == 1 ? "" : fmt::format(" ... cuda:{}", ids.size() - 1)));
  }
  return std::make_unique<CudaBackend>(device_index, precision);
}

}  // namespace xo::cuda

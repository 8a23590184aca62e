// The backend interface: everything the model, trainer and CLI need from a device. A backend owns
// device memory and creates op kernels once per shape at plan time; kernels then run the training
// step without allocating. Backend code (oneDNN, CUDA) lives only under backend/<name>/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/function_ref.h"
#include "optim/optimizer.h"

namespace xo {

// What a device is, for tables, reports and results.json.
struct DeviceInfo {
  std::string id;       // "cpu", "cuda:0"
  std::string kind;     // "cpu" or "cuda"
  std::string name;     // e.g. "Intel(R) Xeon(R) Platinum 8481C"
  int threads = 0;      // CPU threads used; 0 for GPUs
  std::string library;  // e.g. "oneDNN 2.6.3 (OpenMP)"
  std::vector<std::pair<std::string, std::string>> details;  // extra key/value facts
};

// Device memory owned by a backend; freed when the last handle goes. Never resized, so views
// (pointers into it) stay valid for the buffer's lifetime.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::shared_ptr<void> memory, size_t bytes)
      : memory_(std::move(memory)), bytes_(bytes) {}
  template <typename T>
  T* as() const {
    return static_cast<T*>(memory_.get());
  }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return memory_ != nullptr; }

 private:
  std::shared_ptr<void> memory_;
  size_t bytes_ = 0;
};

enum class Activation { None, ReLU, Tanh, Sigmoid };
const char* activation_name(Activation a);

// A Linear layer with its following activation fused in: dst = act(src * weights^T + bias).
struct LinearShape {
  int64_t batch = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool has_bias = true;
  Activation activation = Activation::None;
  bool need_d_src = true;  // false for the first layer: the input needs no gradient
  bool in_shard = false;   // runs inside one worker of parallel_shards(): use one thread
};

class LinearKernel {
 public:
  virtual ~LinearKernel() = default;
  // src [batch, in], weights [out, in] (PyTorch layout), bias [out] (may be null), dst [batch,
  // out].
  virtual void forward(const float* src, const float* weights, const float* bias, float* dst) = 0;
  // d_dst [batch, out] is the gradient of the activation's output; it is used as scratch and holds
  // the pre-activation gradient afterwards. d_weights [out, in] and d_bias [out] are overwritten
  // (not accumulated); d_src [batch, in] is overwritten when need_d_src, else must be null.
  virtual void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                        float* d_weights, float* d_bias, float* d_src) = 0;
};

// An activation that is not fused into a Linear (e.g. one that follows another activation).
class ActivationKernel {
 public:
  virtual ~ActivationKernel() = default;
  virtual void forward(const float* src, float* dst) = 0;
  // The derivative is computed from dst; d_src is overwritten.
  virtual void backward(const float* dst, const float* d_dst, float* d_src) = 0;
};

// Running sums a loss kernel adds to, kept on the device so the host reads them once per epoch.
struct LossStats {
  double loss_sum = 0;  // sum over batches of the batch's mean loss (the classic "epoch loss")
  double correct = 0;   // samples whose arg-max prediction equals the label
  double samples = 0;
};

// Softmax + cross-entropy (mean over the batch, as torch.nn.CrossEntropyLoss), fused. A kernel for
// one shard of a batch divides by the whole batch (`normalizer`), so the shards' losses and
// gradients add up to the batch's.
class CrossEntropyKernel {
 public:
  virtual ~CrossEntropyKernel() = default;
  // logits [batch, classes], labels [batch]. Adds to *stats (device memory). When d_logits is not
  // null it is overwritten with d(loss)/d(logits), where loss = sum of sample losses / normalizer.
  virtual void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                                LossStats* stats) = 0;
};

// One fused pass over the flat parameter and gradient buffers; holds its own state buffers.
class OptimizerKernel {
 public:
  virtual ~OptimizerKernel() = default;
  virtual void step(float* params, const float* grads) = 0;
  // Number of steps taken (Adam's bias correction and SGD's first-step momentum depend on it).
  virtual int64_t steps() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;

  // Memory: zero-initialised, aligned for vector loads.
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void fill_zero(void* device_dst, size_t bytes) = 0;
  // Copies rows: dst[r] = src[index[r]] for r < rows, rows of row_floats floats; labels likewise.
  virtual void gather_rows(const float* src, const int32_t* src_labels, const int32_t* index,
                           int64_t rows, int64_t row_floats, float* dst, int32_t* dst_labels) = 0;
  // Waits until all queued work is done (a no-op on the CPU).
  virtual void synchronize() = 0;
  // dst[i] += src[i] for i < n (merges the gradients of batch shards).
  virtual void accumulate(float* dst, const float* src, int64_t n) = 0;
  virtual void accumulate_stats(LossStats* dst, const LossStats* src) = 0;

  // Batch sharding: a small model trains faster when each worker runs a slice of the batch on
  // its own than when every op is split across workers. How many shards this backend wants for a
  // training step of `flops` over `batch` samples (1: none), and a way to run them concurrently.
  virtual int batch_shards(int64_t batch, double flops) const = 0;
  virtual void parallel_shards(int shards, FunctionRef<void(int shard)> body) = 0;

  // Kernels, created at plan time (this is where primitives are built and cached).
  virtual std::unique_ptr<LinearKernel> linear(const LinearShape& shape) = 0;
  virtual std::unique_ptr<ActivationKernel> activation(Activation act, int64_t elements) = 0;
  virtual std::unique_ptr<CrossEntropyKernel> cross_entropy(int64_t batch, int64_t classes,
                                                            int64_t normalizer) = 0;
  virtual std::unique_ptr<OptimizerKernel> optimizer(const OptimizerSpec& spec,
                                                     int64_t parameters) = 0;
};

// A device string as users write it: "cpu", "cuda", "cuda:N", "auto".
struct DeviceRequest {
  std::string kind;  // "cpu", "cuda" or "auto"
  int index = 0;
  int threads = 0;  // CPU threads; 0 = all cores
};
DeviceRequest parse_device(const std::string& text, int threads);

// Creates the backend for a request; "auto" picks a GPU when one is present, else the CPU.
// Throws UserError saying why a device is not available (no GPU, CUDA not built).
std::unique_ptr<Backend> make_backend(const DeviceRequest& request);

// Every device this build can use on this machine, as ids ("cpu", "cuda:0", ...), and, for the
// ones it cannot, why (e.g. "cuda: this crossover was built without CUDA").
struct DeviceList {
  std::vector<std::string> available;
  std::vector<std::string> unavailable_reasons;
};
DeviceList list_devices();

}  // namespace xo

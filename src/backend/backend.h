// The backend interface: everything the model, trainer and CLI need from a device. A backend owns
// device memory and creates op kernels once per shape at plan time; kernels then run the training
// step without allocating. Backend code (oneDNN, CUDA) lives only under backend/<name>/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/function_ref.h"
#include "optim/optimizer.h"

namespace xo {

// The kind of a device, one name everywhere: "cpu" or "gpu" (a device's kind in results.json, a
// catalog entry's kind, a prediction's kind). Which GPU backend runs it is in the device id.
enum class DeviceKind { Cpu, Gpu };
const char* device_kind_name(DeviceKind kind);
// "cpu" or "gpu"; also "cuda", the name results files written before crossover 0.1.1 gave GPUs.
std::optional<DeviceKind> parse_device_kind(std::string_view name);
// The kind of the device a backend id names ("cpu", "cuda:0").
DeviceKind device_kind_of(std::string_view device_id);
// How JSON documents name a kind (io/json_in.h's `named<DeviceKind>` finds these by lookup).
inline const char* json_name(DeviceKind kind) { return device_kind_name(kind); }
inline std::optional<DeviceKind> json_name_parse(std::string_view name, DeviceKind) {
  return parse_device_kind(name);
}
inline const char* json_names_expected(DeviceKind) { return "\"cpu\" or \"gpu\""; }

// What a device is, for tables, reports and results.json.
struct DeviceInfo {
  std::string id;  // "cpu", "cuda:0"
  DeviceKind kind = DeviceKind::Cpu;
  std::string name;               // e.g. "Intel(R) Xeon(R) Platinum 8481C"
  int threads = 0;                // CPU threads used; 0 for GPUs
  std::string library;            // e.g. "oneDNN 2.6.3 (OpenMP)"
  std::string precision = "f32";  // the matmul/convolution arithmetic: f32, tf32 or bf16
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
  // Bytes [offset, offset + bytes) of this buffer, as a buffer that keeps all of it alive.
  DeviceBuffer view(size_t offset, size_t bytes) const {
    XO_ASSERT(offset + bytes <= bytes_);
    return DeviceBuffer(std::shared_ptr<void>(memory_, static_cast<char*>(memory_.get()) + offset),
                        bytes);
  }

 private:
  std::shared_ptr<void> memory_;
  size_t bytes_ = 0;
};

// LeakyReLU reads a slope for inputs below zero (torch.nn.LeakyReLU's negative_slope).
enum class Activation { None, ReLU, Tanh, Sigmoid, LeakyReLU };
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
  // Fused models (model/fused_network.h): the same layer of `models` models at once. src is
  // [models, batch, in] and dst [models, batch, out], each model's rows after the last's; model t's
  // weights and bias (and their gradients) are those of model 0 plus t * model_stride floats.
  // model_stride 0: one model's layer, not a fused model's (whose arithmetic is the same however
  // many models it runs with, so that a model ends alike in any group).
  int64_t models = 1;
  int64_t model_stride = 0;
};

// A 2-D convolution (PyTorch's Conv2d, square kernel, same stride and padding on both axes) with
// its following activation fused in. Tensors are NCHW, weights [out, in, k, k].
struct Conv2dShape {
  int64_t batch = 0;
  int64_t in_channels = 0, height = 0, width = 0;
  int64_t out_channels = 0, kernel = 0, stride = 1, padding = 0;
  bool has_bias = true;
  Activation activation = Activation::None;
  bool need_d_src = true;
  bool in_shard = false;
  int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
};

// A Linear or a Conv2d with its following activation fused in (from Backend::linear or
// Backend::conv2d: the shape says which); one contract for both. Linear: src [batch, in], weights
// [out, in] (PyTorch's layout), bias [out], dst [batch, out]. Conv2d: src and dst NCHW, weights
// [out, in, k, k], bias [out].
class WeightedKernel {
 public:
  virtual ~WeightedKernel() = default;
  // bias may be null (a layer without one).
  virtual void forward(const float* src, const float* weights, const float* bias, float* dst) = 0;
  // d_dst is the gradient of the activation's output; it is used as scratch (it may hold the
  // pre-activation gradient afterwards, or be left as it came). d_weights and d_bias are
  // overwritten (not accumulated); d_src is overwritten when need_d_src, else must be null.
  virtual void backward(const float* src, const float* weights, const float* dst, float* d_dst,
                        float* d_weights, float* d_bias, float* d_src) = 0;
};

// An activation that is not fused into a Linear or a Conv2d (e.g. one that follows another
// activation).
class ActivationKernel {
 public:
  virtual ~ActivationKernel() = default;
  virtual void forward(const float* src, float* dst) = 0;
  // The derivative is computed from dst; d_src is overwritten.
  virtual void backward(const float* dst, const float* d_dst, float* d_src) = 0;
};

// Max or average pooling over square windows of NCHW tensors (average counts the zero padding, as
// PyTorch's default count_include_pad = true), and pooling over the steps of a sequence [N, T, F]
// -> [N, F] (global average / max).
enum class PoolType { Max, Avg };
struct Pool2dShape {
  PoolType type = PoolType::Max;
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel = 0, stride = 1, padding = 0;
  bool training = true;  // keeps what backward needs (the arg-max positions)
  int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
};
struct SequencePoolShape {
  PoolType type = PoolType::Avg;
  int64_t batch = 0, steps = 0, features = 0;
};
class PoolKernel {
 public:
  virtual ~PoolKernel() = default;
  virtual void forward(const float* src, float* dst) = 0;
  // d_src is overwritten; uses what the last forward kept.
  virtual void backward(const float* d_dst, float* d_src) = 0;
};

// Inverted dropout: each element is zeroed with probability p and the others scaled by 1/(1-p).
// The mask is a pure function of (seed, step, element index + element_offset), so every backend
// and every batch sharding draws the same mask.
struct DropoutShape {
  int64_t elements = 0;        // per call (the shard's batch times the features per sample)
  int64_t element_offset = 0;  // of this shard's first element within the whole batch
  double p = 0.5;
  uint64_t seed = 0;
};
class DropoutKernel {
 public:
  virtual ~DropoutKernel() = default;
  // `step` (device memory) numbers the training step; it is read when the kernel runs, so that a
  // recorded step (Backend::capture) draws a new mask each time it is launched.
  virtual void forward(const float* src, float* dst, const uint64_t* step) = 0;
  virtual void backward(const float* d_dst, float* d_src) = 0;
};

// A lookup table: token ids (stored as floats, exact below 2^24) [batch, steps] to rows of
// table [vocab, dim]. Ids must be in [0, vocab): the trainer checks the data set before training.
struct EmbeddingShape {
  int64_t batch = 0, steps = 0, vocab = 0, dim = 0;
};
class EmbeddingKernel {
 public:
  virtual ~EmbeddingKernel() = default;
  virtual void forward(const float* ids, const float* table, float* dst) = 0;
  // d_table is overwritten: zero except the rows of ids present, which get their summed gradient.
  virtual void backward(const float* ids, const float* d_dst, float* d_table) = 0;
};

// PyTorch's nn.LSTM with batch_first = true and zero initial states: gates in the order input,
// forget, cell, output; per layer weight_ih [4H, in], weight_hh [4H, H], bias_ih and bias_hh [4H].
struct LstmShape {
  int64_t batch = 0, steps = 0, input = 0, hidden = 0, layers = 1;
  bool sequence = false;  // dst is [batch, steps, H] (true) or the last step's [batch, H]
  bool need_d_src = true;
  bool in_shard = false;
  // Fused models, as LinearShape's (where the backend's lstm_fuses_models()): src is
  // [models, batch, steps, input] and dst [models, batch, (steps,) hidden]; model t's weights and
  // gradients are model 0's plus t * model_stride floats. model_stride 0: one model's LSTM.
  int64_t models = 1;
  int64_t model_stride = 0;
};
struct LstmLayerParams {
  const float* weight_ih = nullptr;
  const float* weight_hh = nullptr;
  const float* bias_ih = nullptr;
  const float* bias_hh = nullptr;
};
struct LstmLayerGrads {
  float* weight_ih = nullptr;
  float* weight_hh = nullptr;
  float* bias_ih = nullptr;
  float* bias_hh = nullptr;
};
class LstmKernel {
 public:
  virtual ~LstmKernel() = default;
  // params: one entry per layer. Keeps the gates and states of every step for backward.
  virtual void forward(const float* src, const LstmLayerParams* params, float* dst) = 0;
  // grads are overwritten; d_dst is read only; d_src overwritten when need_d_src (else null).
  virtual void backward(const float* src, const LstmLayerParams* params, const float* d_dst,
                        const LstmLayerGrads* grads, float* d_src) = 0;
};

// Batch normalisation (PyTorch's BatchNorm1d/2d, affine, tracking running statistics) of NC or
// NC(spatial) tensors: per channel, over the batch and the spatial positions. Training normalises
// with the batch's mean and biased variance and moves the running statistics by `momentum`
// (the running variance takes the unbiased batch variance); inference uses the running ones.
struct BatchNormShape {
  int64_t batch = 0, channels = 0, spatial = 1;  // spatial: L for [C, L], H*W for [C, H, W]
  double eps = 1e-5;
  double momentum = 0.1;
  bool training = true;
};
class BatchNormKernel {
 public:
  virtual ~BatchNormKernel() = default;
  // weight, bias [C]; running_mean, running_var [C] and batches_tracked (one float: PyTorch's
  // num_batches_tracked) in device memory, updated in training.
  virtual void forward(const float* src, const float* weight, const float* bias,
                       float* running_mean, float* running_var, float* batches_tracked,
                       float* dst) = 0;
  // Uses the batch statistics of the last forward; d_src, d_weight, d_bias are overwritten
  // (d_src may be null where no gradient flows below).
  virtual void backward(const float* src, const float* weight, const float* d_dst, float* d_src,
                        float* d_weight, float* d_bias) = 0;
};

// Running sums a loss kernel adds to, kept on the device so the host reads them once per epoch.
struct LossStats {
  double loss_sum = 0;  // sum over batches of the batch's mean loss (the classic "epoch loss")
  double correct = 0;   // samples whose arg-max prediction equals the label (0 for mse)
  double samples = 0;
};

// A loss over the last layer's output, fused with its gradient: softmax + cross-entropy (as
// torch.nn.CrossEntropyLoss) or sigmoid + binary cross-entropy (torch.nn.BCEWithLogitsLoss), mean
// over the batch. A kernel for one shard of a batch divides by the whole batch (`normalizer`), so
// the shards' losses and gradients add up to the batch's.
// Mean squared error (torch.nn.MSELoss) on one output against a real target: the target travels in
// the 32-bit label slot as the bits of a float (std::bit_cast), so batches gather it as a label.
enum class LossKind { CrossEntropy, BinaryCrossEntropy, MeanSquaredError };
class LossKernel {
 public:
  virtual ~LossKernel() = default;
  // logits [batch, classes] (classes = 1 for binary), labels [batch]. Adds to *stats (device
  // memory). When d_logits is not null it is overwritten with d(loss)/d(logits), where loss = sum
  // of sample losses / normalizer.
  virtual void forward_backward(const float* logits, const int32_t* labels, float* d_logits,
                                LossStats* stats) = 0;
};

// One of an optimizer's state buffers: as many floats as the flat parameter buffer, in device
// memory, named as torch.optim names its per-parameter state.
struct OptimizerStateBuffer {
  const char* name = "";  // "momentum_buffer", "exp_avg", "exp_avg_sq", "square_avg", "acc_delta"
  float* data = nullptr;
};

// One fused pass over the flat parameter and gradient buffers; holds its own state buffers.
class OptimizerKernel {
 public:
  virtual ~OptimizerKernel() = default;
  virtual void step(float* params, const float* grads) = 0;
  // One step over floats [begin, end) of the buffers alone (a data-parallel rank's part of the
  // buffers the ranks of a machine share), counted as a step, on the gradient `grads` plus each of
  // `add` in order: the sum is written into `grads` piece by piece and updated on while the piece
  // is in the caches. Not pure: the CPU's optimizers have it, and the data-parallel code that calls
  // it runs on the CPU alone (a call elsewhere is a bug).
  virtual void step_part(float* params, float* grads, const std::vector<const float*>& add,
                         int64_t begin, int64_t end) {
    (void)params, (void)grads, (void)add, (void)end;
    throw_internal("OptimizerKernel::step_part",
                   "this backend's optimizer steps whole buffers (part from " +
                       std::to_string(begin) + " asked)",
                   __FILE__, __LINE__);
  }
  // The state buffers moved to `memory` (one for each of state_buffers(), in its order, each as
  // large as the flat buffer; values not copied), e.g. memory the data-parallel ranks of a machine
  // share: returns the buffers replaced. CPU only, as step_part.
  virtual std::vector<DeviceBuffer> swap_state(std::vector<DeviceBuffer> memory) {
    throw_internal("OptimizerKernel::swap_state",
                   "this backend's optimizer keeps its state where it allocated it (" +
                       std::to_string(memory.size()) + " buffers offered)",
                   __FILE__, __LINE__);
  }
  // The bytes of the parameters' bf16 copy this optimizer writes as it updates them (the CPU at
  // --precision bf16; 0: none).
  virtual size_t weights_copy_bytes() const { return 0; }
  // That copy moved to `memory` (weights_copy_bytes() long; values not copied, so forgotten until
  // the next update writes it): memory the data-parallel ranks of a machine share, each writing its
  // part, or a fused group's one buffer of its models' copies, laid out as their parameters are.
  // Returns the buffer replaced. Only where weights_copy_bytes() is not 0.
  virtual DeviceBuffer swap_weights_copy(DeviceBuffer memory) {
    throw_internal("OptimizerKernel::swap_weights_copy",
                   "this optimizer keeps no bf16 copy of the weights (" +
                       std::to_string(memory.bytes()) + " bytes offered)",
                   __FILE__, __LINE__);
  }
  // Number of steps taken (Adam's bias correction and SGD's first-step momentum depend on it).
  virtual int64_t steps() const = 0;
  // What a checkpoint saves and a resumed run restores: the state buffers (none for plain SGD) and
  // the step count. set_steps is queued like a step, so a recorded step launched after it sees it.
  virtual std::vector<OptimizerStateBuffer> state_buffers() = 0;
  virtual void set_steps(int64_t steps) = 0;
  // The learning rate of the steps from the next one on (a schedule, between epochs; the GPU's
  // recorded step reads it from device memory). Not pure: a backend that cannot change its rate
  // must not be given a schedule, and a call that gets here is a bug, never a rate silently kept.
  virtual void set_learning_rate(double lr) {
    throw_internal("OptimizerKernel::set_learning_rate",
                   "this backend's optimizer takes its learning rate at record time (lr " +
                       std::to_string(lr) + " asked)",
                   __FILE__, __LINE__);
  }
};

// A sum across the ranks of a job, queued on a backend's queue like its kernels, so that a recorded
// step records it too (NCCL's all-reduce on GPUs). Made by Backend::collective on every rank from
// the id rank 0's Backend::collective_id drew, which the job's launcher (MPI) carries to the rest.
class Collective {
 public:
  virtual ~Collective() = default;
  // data[0, n) summed in place over the ranks, in queue order.
  virtual void sum(float* data, int64_t n) = 0;
};

// Work recorded by Backend::capture, launched as a whole (one launch for a whole training step).
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  virtual void launch() = 0;  // the recorded work, queued again as a whole
};

// Numbered timestamps in a backend's queue: mark(i) when the work queued so far is done.
class QueueClock {
 public:
  virtual ~QueueClock() = default;
  virtual void mark(int i) = 0;
  // Milliseconds between two marks; waits for both to be reached.
  virtual double ms_between(int from, int to) = 0;
};

// The arithmetic of matmuls and convolutions. f32 everywhere by default, so that the CPU and the
// GPU compute the same thing; on a GPU tf32 and bf16 trade accuracy for tensor-core speed (inputs
// rounded to 10 or 7 mantissa bits inside the matmul, f32 accumulation, f32 master weights).
enum class Precision { F32, TF32, BF16 };
const char* precision_name(Precision p);
Precision parse_precision(const std::string& text);  // throws UserError naming the choices

// Fused models (model/fused_network.h): the work each model of a group does on its own in a step -
// its batch gathered, its loss, its optimizer's step and its step counter - batched over the
// models, where the backend would otherwise run it model by model: on a GPU one kernel for all of
// them, where each model's would be a launch and a node of the recorded step. Every pointer is the
// model's own, in device memory, fixed for the kernel's life (built again when the group is).
struct FusedStepShape {
  struct Member {
    const float* x = nullptr;          // the model's data set: samples [samples, row_floats]
    const int32_t* y = nullptr;        // and their labels
    const int32_t* order = nullptr;    // the model's order of the samples
    int64_t* position = nullptr;       // where in it its next batch starts (advanced by rows)
    LossStats* stats = nullptr;        // what its loss adds to
    uint64_t* step_counter = nullptr;  // its step (dropout masks), counted after each step
    OptimizerKernel* optimizer = nullptr;
    float* params = nullptr;  // its flat buffers, as the optimizer steps them
    const float* grads = nullptr;
  };
  std::vector<Member> models;
  int64_t rows = 0, row_floats = 0;  // a batch of each model
  LossKind loss = LossKind::CrossEntropy;
  int64_t classes = 0;
};
class FusedStepKernel {
 public:
  virtual ~FusedStepKernel() = default;
  // Model t's next batch (as Backend::next_batch) into rows [t rows, (t + 1) rows) of dst and
  // dst_labels.
  virtual void gather(float* dst, int32_t* dst_labels) = 0;
  // Each model's loss (as LossKernel::forward_backward, normalised by its rows) over its rows of
  // logits [models, rows, classes] and labels [models, rows]; its gradient into d_logits.
  virtual void loss(const float* logits, const int32_t* labels, float* d_logits) = 0;
  // Each model's optimizer step on its buffers, then its step counter incremented.
  virtual void update() = 0;
};

// How a backend spreads a training step over its workers, as plain figures: the batch shards it
// asks for (`shard_threads` workers, each with a slice of at least `min_shard_batch` samples, for
// steps of `min_shard_flops` to `max_shard_flops` matmul FLOPs) and the matmuls it runs on one
// thread (below `single_thread_flops`). A GPU: one shard, no single-thread rule.
struct ExecutionPolicy {
  int shard_threads = 1;
  int64_t min_shard_batch = 0;
  double min_shard_flops = 0, max_shard_flops = 0;
  double single_thread_flops = 0;
  int shards(int64_t batch, double flops) const {
    if (shard_threads < 2 || batch < shard_threads * min_shard_batch) return 1;
    if (flops < min_shard_flops || flops > max_shard_flops) return 1;
    return shard_threads;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const DeviceInfo& info() const = 0;

  // Memory: zero-initialised, aligned for vector loads. Throws OutOfMemory (core/error.h), naming
  // the device and the size, when the device cannot hold `bytes` more.
  virtual DeviceBuffer allocate(size_t bytes) = 0;
  // Bytes this device could still allocate now, as its system reports them (the host's available
  // memory for the CPU, the GPU's free memory); nullopt where it does not say. Planning compares a
  // run's needs with it before allocating anything (train/memory.h).
  virtual std::optional<int64_t> free_memory_bytes() const = 0;
  // Bytes requested through allocate() since this backend was made, freed buffers included: what
  // the tests compare with a run's planned memory.
  virtual int64_t bytes_allocated() const = 0;
  // Host memory (zeroed) that copies to and from this device stage through: page-locked on a GPU,
  // so that upload and download run at the link's rate without the driver's bounce buffer; plain
  // memory here. Not counted in bytes_allocated() (it is not the device's).
  virtual DeviceBuffer allocate_host(size_t bytes) {
    float* p = new float[(bytes + sizeof(float) - 1) / sizeof(float)]();
    return DeviceBuffer(std::shared_ptr<void>(p, [](void* q) { delete[] static_cast<float*>(q); }),
                        bytes);
  }
  // `bytes` of host memory the caller keeps alive through `owner`, as a buffer this device reads
  // in place without a copy (the CPU's); an empty buffer where it cannot (a GPU: upload a copy).
  // Only ever read: the training data of the Python module's arrays.
  virtual DeviceBuffer borrow_host(const void* /*host*/, size_t /*bytes*/,
                                   const std::shared_ptr<const void>& /*owner*/) {
    return {};
  }
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void fill_zero(void* device_dst, size_t bytes) = 0;
  // Selects the next batch: dst[r] = src[order[*position + r]] for r < rows (rows of row_floats
  // floats; labels likewise), then *position += rows. `position` lives in device memory, so a
  // recorded step picks the next batch each time it is launched, without the host.
  virtual void next_batch(const float* src, const int32_t* src_labels, const int32_t* order,
                          int64_t* position, int64_t rows, int64_t row_floats, float* dst,
                          int32_t* dst_labels) = 0;
  // *counter += 1, in device memory, in queue order (the step counter that dropout reads).
  virtual void increment(uint64_t* counter) = 0;
  // Waits until all queued work is done (a no-op on the CPU).
  virtual void synchronize() = 0;
  // A training run has ended: threads kept for the next parallel region are let go (the CPU's
  // OpenMP workers otherwise spin on a core before they sleep, taken from whatever this process or
  // another runs next: docs/benchmarks.md, "A fused search's serial costs"). The next parallel
  // region starts them again.
  virtual void release_threads() {}
  // An id for a Collective of this kind of device (drawn by rank 0); empty where this backend has
  // none (the CPU; a GPU build without NCCL).
  virtual std::string collective_id() { return {}; }
  // This rank's member of the collective `id` names, of `ranks` ranks: a collective call every rank
  // makes together. Throws UserError where it cannot be made (the message says why).
  virtual std::unique_ptr<Collective> collective(const std::string& id, int rank, int ranks) {
    (void)id;
    throw UserError(info().id + ": no collective across ranks on this device (rank " +
                    std::to_string(rank) + " of " + std::to_string(ranks) + ")");
  }
  // Records the work `body` queues as one replayable unit (a CUDA Graph). Null where the backend
  // cannot record (the CPU, whose calls run as they are made): the caller then calls body itself.
  // Everything the body touches must stay allocated while the recording lives.
  virtual std::unique_ptr<RecordedWork> capture(FunctionRef<void()> body) = 0;
  // Timestamps taken in queue order: a GPU records events and reads them when asked, so timing a
  // step does not make the host wait for it; the CPU reads its clock at once.
  virtual std::unique_ptr<QueueClock> clock(int marks) = 0;
  // dst[i] += src[i] for i < n (merges the gradients of batch shards).
  virtual void accumulate(float* dst, const float* src, int64_t n) = 0;
  virtual void accumulate_stats(LossStats* dst, const LossStats* src) = 0;

  // Batch sharding: a small model trains faster when each worker runs a slice of the batch on
  // its own than when every op is split across workers. The rules (ExecutionPolicy, recorded in a
  // device profile so that a prediction runs a model as this backend would), how many shards this
  // backend wants for a training step of `flops` over `batch` samples (1: none), and a way to run
  // them concurrently.
  virtual ExecutionPolicy execution_policy() const = 0;
  int batch_shards(int64_t batch, double flops) const {
    return execution_policy().shards(batch, flops);
  }
  virtual void parallel_shards(int shards, FunctionRef<void(int shard)> body) = 0;

  // Kernels, created at plan time (this is where primitives are built and cached).
  virtual std::unique_ptr<WeightedKernel> linear(const LinearShape& shape) = 0;
  // negative_slope: LeakyReLU's slope for inputs below zero; the other activations ignore it.
  virtual std::unique_ptr<ActivationKernel> activation(Activation act, int64_t elements,
                                                       float negative_slope) = 0;
  virtual std::unique_ptr<LossKernel> loss(LossKind kind, int64_t batch, int64_t classes,
                                           int64_t normalizer) = 0;
  virtual std::unique_ptr<WeightedKernel> conv2d(const Conv2dShape& shape) = 0;
  virtual std::unique_ptr<PoolKernel> pool2d(const Pool2dShape& shape) = 0;
  virtual std::unique_ptr<PoolKernel> sequence_pool(const SequencePoolShape& shape) = 0;
  virtual std::unique_ptr<DropoutKernel> dropout(const DropoutShape& shape) = 0;
  virtual std::unique_ptr<EmbeddingKernel> embedding(const EmbeddingShape& shape) = 0;
  virtual std::unique_ptr<LstmKernel> lstm(const LstmShape& shape) = 0;
  // Whether lstm() takes fused models (LstmShape::model_stride): a fused group's LSTM is then one
  // kernel, its per-step products batched over the models; otherwise it runs model by model.
  virtual bool lstm_fuses_models() const { return false; }
  virtual std::unique_ptr<BatchNormKernel> batch_norm(const BatchNormShape& shape) = 0;
  virtual std::unique_ptr<OptimizerKernel> optimizer(const OptimizerSettings& spec,
                                                     int64_t parameters) = 0;
  // The models' own work batched (FusedStepShape), or null where this backend runs it model by
  // model (the CPU: each model's on the worker of its group) or cannot batch these models (their
  // optimizers differ in kind): then each model's kernels run one by one.
  virtual std::unique_ptr<FusedStepKernel> fused_step(const FusedStepShape& shape) {
    (void)shape;
    return nullptr;
  }
};

// A device string as users write it: "cpu", "cpu:bf16" (the CPU at --precision bf16), "cuda",
// "cuda:N", "auto".
struct DeviceRequest {
  std::string kind;  // "cpu", "cuda" or "auto"
  int index = 0;
  int threads = 0;                       // CPU threads; 0 = all cores
  Precision precision = Precision::F32;  // the CPU takes f32 and bf16 (tf32 runs as f32 there)
  std::string note;  // set when the threads asked for were more than the cores, and clamped
};
// `precision` as users write it (f32, tf32, bf16); a bad device or precision throws UserError.
// Threads beyond the cores this process may run on are clamped to them (see `note`).
DeviceRequest parse_device(const std::string& text, int threads,
                           const std::string& precision = "f32");

// The CPU cores this process may run on (its affinity mask, as `taskset` or a container sets it).
int usable_cpu_cores();
// The unit this CPU runs bf16 products on as oneDNN sees it ("AMX", "AVX-512 BF16"), or "" where it
// has neither (or ONEDNN_MAX_CPU_ISA holds oneDNN below them): --precision bf16 needs one.
std::string cpu_bf16_unit();
// Whether the CPU runs a Linear of these widths in bf16 at --precision bf16: all but the small
// layers (widths powers of two, in x out up to 64 x 64), which stay f32 at any precision.
bool cpu_bf16_linear(int64_t in_features, int64_t out_features);
// The device id of the CPU at bf16 ("cpu:bf16"): what a CPU backend at --precision bf16 is called,
// and a --device / --devices name for it.
inline constexpr const char* kCpuBf16 = "cpu:bf16";
// The CPU threads each of `ranks_here` processes on this machine takes: `threads` when given
// (above 0), else an equal part of the usable cores, at least one. The one default of --threads for
// `train`, `sweep` and `tune` along ranks.
int threads_per_rank(int threads, int ranks_here);

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

// A model built from a spec on a backend: the parameter layout (one flat parameter buffer and one
// flat gradient buffer in device memory, layers holding views), initialisation, and weight
// exchange with PyTorch through safetensors names and shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/layer.h"
#include "model/layer_kinds.h"
#include "model/spec.h"

namespace xo {

// One named parameter tensor: a view [offset, offset + size) of the flat buffers.
struct ParamTensor {
  std::string name;            // PyTorch state_dict name, e.g. "2.weight"
  std::vector<int64_t> shape;  // e.g. {out, in}
  int64_t offset = 0;          // in floats, into params() and grads() (buffers: into state())
  int64_t size = 0;
  bool integer = false;  // a count kept as a float, exchanged as I64 (num_batches_tracked)
};

// A unit of execution (NodeKind, model/layer_kinds.h): one layer of the spec, with the activation
// that follows a Linear or a Conv2d fused into it (then `layer` is the index of the Linear/Conv2d).
struct Node {
  int layer = 0;
  NodeKind kind = NodeKind::Linear;
  LayerSpec spec;                            // the spec's layer
  Activation activation = Activation::None;  // fused (Linear, Conv2d), or the op (Activation)
  std::vector<int64_t> in_shape, out_shape;  // of one sample
  int64_t in_size = 0, out_size = 0;         // their element counts
  std::vector<int> params;   // indices into Model::tensors(), in layer_parameters() order
  std::vector<int> buffers;  // indices into Model::buffers(): state that is not trained
  // Matmul FLOPs (2 per multiply-add) of the forward pass for one sample.
  double forward_flops = 0;
  // Some node before this one has parameters, so this node must compute its input's gradient.
  bool gradient_below = false;
};

// A model's nodes and the layout of its flat buffers, worked out from the spec alone: nothing is
// allocated, so a run's memory can be checked before the Model allocates it (train/memory.h).
// The Model built from the same spec has the same tensors, nodes and sizes.
struct ModelLayout {
  std::vector<ParamTensor> tensors, buffers;
  std::vector<Node> nodes;
  int64_t input_features = 0, outputs = 0, parameter_count = 0;
  int64_t flat_size = 0, state_size = 0;  // floats, padding included (Model::flat_size)
};
// Throws UserError when the layers do not chain (infer_shapes).
ModelLayout model_layout(const ModelSpec& spec);

class Model {
 public:
  Model(ModelSpec spec, Backend& backend);

  const ModelSpec& spec() const { return spec_; }
  Backend& backend() const { return *backend_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int64_t input_features() const { return input_features_; }
  // Outputs of the last layer: the classes for cross_entropy, 1 for bce.
  int64_t outputs() const { return outputs_; }
  // Classes the labels may take: outputs() for cross_entropy, 2 for bce.
  // The classes the labels index; 0 for a regression (mse), whose targets are real numbers.
  int64_t classes() const {
    return spec_.loss == LossType::BinaryCrossEntropy ? 2
           : spec_.loss == LossType::MeanSquaredError ? 0
                                                      : outputs_;
  }
  bool regression() const { return spec_.loss == LossType::MeanSquaredError; }
  LossKind loss_kind() const {
    return spec_.loss == LossType::BinaryCrossEntropy ? LossKind::BinaryCrossEntropy
           : spec_.loss == LossType::MeanSquaredError ? LossKind::MeanSquaredError
                                                      : LossKind::CrossEntropy;
  }
  // The vocabulary when the first layer is an Embedding (inputs are token ids), else 0.
  int64_t token_vocab() const;

  // Trainable parameters (what PyTorch's sum(p.numel()) reports), without alignment padding.
  int64_t parameter_count() const { return parameter_count_; }
  // Floats in each flat buffer, padding included: each tensor starts on a 64-byte boundary.
  int64_t flat_size() const { return flat_size_; }
  float* params() const { return params_.as<float>(); }
  float* grads() const { return grads_.as<float>(); }
  // The flat parameter (or gradient) buffer moved to `memory` (at least flat_size() floats; values
  // not copied), e.g. memory the data-parallel ranks of a machine share: returns the buffer
  // replaced. A Network holds the gradient buffer from its construction on: swap it before.
  DeviceBuffer swap_params(DeviceBuffer memory);
  DeviceBuffer swap_grads(DeviceBuffer memory);
  // Buffers that are state but not parameters (BatchNorm's running statistics and batch count):
  // in PyTorch's state_dict, not trained, not counted as parameters.
  const std::vector<ParamTensor>& buffers() const { return buffers_; }
  int64_t state_size() const { return state_size_; }
  float* state() const { return state_.as<float>(); }
  // Batch statistics couple the samples of a batch: such a model trains unsharded.
  bool has_batch_norm() const { return !buffers_.empty(); }

  // PyTorch's default initialisation, in distribution: nn.Linear and nn.Conv2d draw weights from
  // kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias from the
  // same range; nn.Embedding from N(0, 1); nn.LSTM everything from U(-1/sqrt(H), 1/sqrt(H)). The
  // seed also seeds the dropout masks.
  void init(uint64_t seed);
  uint64_t seed() const { return seed_; }
  // Training steps taken (the dropout masks' counter), in device memory: kernels read it when they
  // run and Network::train_step advances it there, so a recorded step launched again gets a new
  // mask.
  uint64_t* step_counter() const { return step_counter_.as<uint64_t>(); }

  // Parameters, then buffers (PyTorch's state_dict).
  std::vector<NamedTensor> export_params() const;
  // Every tensor of the model must be present with its exact shape, and nothing else. Errors name
  // `origin` (the file) and the tensor.
  void import_params(const std::vector<NamedTensor>& tensors, const std::string& origin);
  // A hash of the flat parameter buffer (alignment padding included) and the buffers: equal
  // exactly when two models hold bit-identical state (a resumed run against an uninterrupted one,
  // a replay against the recorded run). 16 hex digits.
  std::string parameter_hash() const;

  // Matmul FLOPs (2 per multiply-add) of one training step on `batch` samples: forward, the weight
  // gradient and, where a gradient flows below, the input gradient. Element-wise work is not
  // counted.
  double train_flops(int64_t batch) const;
  double forward_flops(int64_t batch) const;

 private:
  ModelSpec spec_;
  Backend* backend_;
  std::vector<ParamTensor> tensors_, buffers_;
  std::vector<Node> nodes_;
  int64_t input_features_ = 0, outputs_ = 0, parameter_count_ = 0, flat_size_ = 0;
  int64_t state_size_ = 0;
  DeviceBuffer params_, grads_, state_, step_counter_;
  uint64_t seed_ = 0;
};

// Initialises the model as its spec says: PyTorch's default initialisation drawn from train.seed
// (which also seeds the dropout masks), then the weights of `init_file` where given, else of the
// spec's `init` (a safetensors file or an ONNX model) where it names one.
void initialize(Model& model, const std::string& init_file = "");

// How a Network reduces the loss over its batch.
enum class LossReduction {
  Mean,  // divided by the batch (each shard by the whole batch): the training loss
  Sum,   // summed over the samples: evaluation divides by the sample count itself
};

// What a Network is planned for. Designated initialisers name each field at the call site:
// Network(model, {.batch = 100, .training = false, .loss = LossReduction::Sum}).
struct NetworkOptions {
  int64_t batch = 0;
  bool training = true;  // gradient buffers, dropout on, BatchNorm on the batch's statistics
  int shards = 0;        // 0: as many as the backend wants (Backend::batch_shards); 1 in inference
  // Every kernel on one thread, as in a shard: the network steps on one worker of
  // Backend::parallel_shards (a trial of a group stepping side by side, train/trials.cpp).
  bool one_thread = false;
  LossReduction loss = LossReduction::Mean;
  // A slice of a larger batch (one rank's, in data-parallel training): its first sample's index
  // in that batch (dropout masks are drawn per sample of the whole batch) and the whole batch's
  // size, which a Mean loss divides by (0: this batch is the whole batch).
  int64_t sample_offset = 0;
  int64_t whole_batch = 0;
};

// Told as backward finishes each node (of an unsharded step): data-parallel training starts
// summing the gradients that are final while backward computes the nodes below.
class BackwardObserver {
 public:
  virtual void node_backward_done(size_t node) = 0;

 protected:
  ~BackwardObserver() = default;
};

// The execution plan of a model for one batch size: kernels built and activation and gradient
// buffers allocated up front, so that a step allocates nothing and creates no primitive. Where the
// backend asks for it, the batch is split into shards that run concurrently, each with its own
// kernels and buffers; their gradients are then merged in a fixed order (deterministic).
class Network {
 public:
  Network(const Model& model, const NetworkOptions& options);

  int64_t batch() const { return batch_; }
  int shards() const { return static_cast<int>(shards_.size()); }

  // Forward, loss and backward for a batch: src [batch, input_features] and labels [batch] in
  // device memory. Overwrites the model's flat gradient buffer with the batch's gradients and adds
  // the loss and accuracy to *stats (device memory). An unsharded step tells `observer` (if any)
  // as backward finishes each node.
  void train_step(const float* src, const int32_t* labels, LossStats* stats,
                  BackwardObserver* observer = nullptr);
  // Forward and loss only (dropout off).
  void evaluate(const float* src, const int32_t* labels, LossStats* stats);
  // Forward only, in an inference plan (training = false: dropout off, BatchNorm on its running
  // statistics): the model's outputs for the batch, [batch, outputs] in device memory, before the
  // loss's softmax or sigmoid; valid until the next call.
  const float* forward(const float* src);

  // A training step through the same code as train_step, with every node's forward and backward
  // and the loss timed apart, the backend synchronised around each: per-node times in
  // milliseconds, 0 for views. Needs an unsharded plan (shards() == 1).
  struct NodeTimes {
    std::vector<double> forward_ms, backward_ms;  // per node
    double loss_ms = 0;
  };
  void timed_step(const float* src, const int32_t* labels, LossStats* stats, NodeTimes& out);

 private:
  // A slice [offset, offset + batch) of the batch with everything it needs.
  struct Shard {
    int64_t offset = 0, batch = 0;
    std::vector<std::unique_ptr<Layer>> layers;  // one per Node; null where the node is a view
    std::vector<float*> outputs;                 // per node: [batch, out_size]
    std::vector<float*> d_outputs;               // per node: gradient of the output (training only)
    std::unique_ptr<LossKernel> loss;
    float* grads = nullptr;      // the model's buffer for shard 0, its own for the others
    LossStats* stats = nullptr;  // null for shard 0 (adds to the caller's), its own else
  };

  // One shard's forward, loss and backward (backward only when `train`). `timed(pass, node, work)`
  // runs work(), node's forward or backward or the loss: the step passes a plain call, which the
  // compiler inlines away, and timed_step one that times it.
  enum class Pass { Forward, Loss, Backward };
  template <typename Timed>
  void shard_step(Shard& s, const float* src, const int32_t* labels, LossStats* stats, bool train,
                  Timed&& timed, BackwardObserver* observer = nullptr);
  void run(const float* src, const int32_t* labels, LossStats* stats, bool train,
           BackwardObserver* observer = nullptr);

  const Model& model_;
  int64_t batch_;
  bool training_;
  std::vector<Shard> shards_;
  std::vector<DeviceBuffer> memory_;  // owns every buffer above
};

}  // namespace xo

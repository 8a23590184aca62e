// A model built from a spec on a backend: the parameter layout (one flat parameter buffer and one
// flat gradient buffer in device memory, layers holding views), initialisation, and weight
// exchange with PyTorch through safetensors names and shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/spec.h"

namespace xo {

// One named parameter tensor: a view [offset, offset + size) of the flat buffers.
struct ParamTensor {
  std::string name;            // PyTorch state_dict name, e.g. "2.weight"
  std::vector<int64_t> shape;  // e.g. {out, in}
  int64_t offset = 0;          // in floats, into params() and grads()
  int64_t size = 0;
};

// A unit of execution: a Linear with the activation that follows it fused in, or a stand-alone
// activation. `layer` is the spec index of the Linear (or of the activation).
struct Block {
  int layer = 0;
  bool is_linear = true;
  Activation activation = Activation::None;
  int64_t in_features = 0;   // the width entering the block
  int64_t out_features = 0;  // the width leaving it
  int weight = -1;           // index into tensors(), or -1
  int bias = -1;
};

class Model {
 public:
  Model(ModelSpec spec, Backend& backend);

  const ModelSpec& spec() const { return spec_; }
  Backend& backend() const { return *backend_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  const std::vector<Block>& blocks() const { return blocks_; }
  int64_t input_features() const { return input_features_; }
  int64_t classes() const { return classes_; }

  // Trainable parameters (what PyTorch's sum(p.numel()) reports), without alignment padding.
  int64_t parameter_count() const { return parameter_count_; }
  // Floats in each flat buffer, padding included: each tensor starts on a 64-byte boundary.
  int64_t flat_size() const { return flat_size_; }
  float* params() const { return params_.as<float>(); }
  float* grads() const { return grads_.as<float>(); }

  // PyTorch's default initialisation, in distribution: nn.Linear draws weights from
  // kaiming_uniform(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)), and the bias from the same
  // range.
  void init(uint64_t seed);

  std::vector<NamedTensor> export_params() const;
  // Every tensor of the model must be present with its exact shape, and nothing else. Errors name
  // `origin` (the file) and the tensor.
  void import_params(const std::vector<NamedTensor>& tensors, const std::string& origin);

  // Matmul FLOPs (2 per multiply-add) of one training step on `batch` samples: forward, the weight
  // gradient and, past the first layer, the input gradient. Element-wise work is not counted.
  double train_flops(int64_t batch) const;
  double forward_flops(int64_t batch) const;

 private:
  ModelSpec spec_;
  Backend* backend_;
  std::vector<ParamTensor> tensors_;
  std::vector<Block> blocks_;
  int64_t input_features_ = 0, classes_ = 0, parameter_count_ = 0, flat_size_ = 0;
  DeviceBuffer params_, grads_;
};

// The execution plan of a model for one batch size: kernels built and activation and gradient
// buffers allocated up front, so that a step allocates nothing and creates no primitive. Where the
// backend asks for it, the batch is split into shards that run concurrently, each with its own
// kernels and buffers; their gradients are then merged in a fixed order (deterministic).
class Network {
 public:
  // shards = 0: as many as the backend wants for this model and batch (see Backend::batch_shards).
  Network(const Model& model, int64_t batch, bool training, int shards = 0);

  int64_t batch() const { return batch_; }
  int shards() const { return static_cast<int>(shards_.size()); }

  // Forward, loss and backward for a batch: src [batch, input_features] and labels [batch] in
  // device memory. Overwrites the model's flat gradient buffer with the batch's gradients and adds
  // the loss and accuracy to *stats (device memory).
  void train_step(const float* src, const int32_t* labels, LossStats* stats);
  // Forward and loss only.
  void evaluate(const float* src, const int32_t* labels, LossStats* stats);

 private:
  struct Step {
    std::unique_ptr<LinearKernel> linear;
    std::unique_ptr<ActivationKernel> activation;
  };
  // A slice [offset, offset + batch) of the batch with everything it needs.
  struct Shard {
    int64_t offset = 0, batch = 0;
    std::vector<Step> steps;        // one per Block
    std::vector<float*> outputs;    // per block: [batch, out_features]
    std::vector<float*> d_outputs;  // per block: gradient of the output (training only)
    std::unique_ptr<CrossEntropyKernel> loss;
    float* grads = nullptr;      // the model's buffer for shard 0, its own for the others
    LossStats* stats = nullptr;  // null for shard 0 (adds to the caller's), its own else
  };

  void forward(Shard& s, const float* src);
  void backward(Shard& s, const float* src);
  void run(const float* src, const int32_t* labels, LossStats* stats, bool train);

  const Model& model_;
  int64_t batch_;
  bool training_;
  std::vector<Shard> shards_;
  std::vector<DeviceBuffer> memory_;  // owns every buffer above
};

}  // namespace xo

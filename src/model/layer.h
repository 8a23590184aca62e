// A layer of a planned network: one Node's backend kernels bound to its parameter views, behind
// one interface, so that Network runs any Sequential without knowing the op. Built at plan time
// for one batch (shard) size.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace xo {

struct Node;
struct ParamTensor;

class Layer {
 public:
  virtual ~Layer() = default;
  // src [batch, in_size], dst [batch, out_size]; params is the model's flat parameter buffer.
  // `step` (device memory) numbers the training step (dropout masks).
  virtual void forward(const float* params, const float* src, float* dst, const uint64_t* step) = 0;
  // d_dst [batch, out_size] may be used as scratch. The layer's gradients are written (not added)
  // into their views of `grads`; d_src is overwritten, or null where no gradient flows below.
  virtual void backward(const float* params, const float* src, const float* dst, float* d_dst,
                        float* grads, float* d_src) = 0;
};

struct LayerContext {
  int64_t batch = 0;          // samples in this shard
  int64_t sample_offset = 0;  // of the shard's first sample within the batch
  bool training = true;
  bool need_d_src = true;  // a gradient must flow to the layer's input
  bool in_shard = false;   // runs inside one worker of Backend::parallel_shards
  uint64_t seed = 0;       // the model's seed (dropout)
  // The model's buffers and its state memory (BatchNorm's running statistics).
  const std::vector<ParamTensor>* buffers = nullptr;
  float* state = nullptr;
  // Fused models (model/fused_network.h): a Linear (or an LSTM, where the backend's
  // lstm_fuses_models()) of `models` models at once, each one's parameters model_stride floats
  // after the last's (LinearShape, LstmShape). Every other kind of node runs one model.
  int64_t models = 1;
  int64_t model_stride = 0;
};

// Whether a node is a view of its input (Flatten; Dropout outside training): it gets no layer and
// no buffers of its own.
bool is_view(const Node& node, bool training);

// Null for nodes that are views of their input (is_view).
std::unique_ptr<Layer> make_layer(const Node& node, const std::vector<ParamTensor>& tensors,
                                  Backend& backend, const LayerContext& context);

}  // namespace xo

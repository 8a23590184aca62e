#include "model/layer.h"

#include "core/error.h"
#include "core/random.h"
#include "model/model.h"

namespace xo {
namespace {

// The offset of a node's k-th parameter tensor in the flat buffers.
int64_t offset_of(const Node& node, const std::vector<ParamTensor>& tensors, size_t k) {
  return tensors[node.params.at(k)].offset;
}

// A Linear or a Conv2d: a kernel with weights, an optional bias and a fused activation.
class WeightedLayer final : public Layer {
 public:
  WeightedLayer(const Node& n, const std::vector<ParamTensor>& t,
                std::unique_ptr<WeightedKernel> kernel)
      : weight_(offset_of(n, t, 0)),
        bias_(n.spec.bias ? offset_of(n, t, 1) : -1),
        kernel_(std::move(kernel)) {}
  void forward(const float* params, const float* src, float* dst, const uint64_t*) override {
    kernel_->forward(src, params + weight_, bias_ >= 0 ? params + bias_ : nullptr, dst);
  }
  void backward(const float* params, const float* src, const float* dst, float* d_dst, float* grads,
                float* d_src) override {
    kernel_->backward(src, params + weight_, dst, d_dst, grads + weight_,
                      bias_ >= 0 ? grads + bias_ : nullptr, d_src);
  }

 private:
  int64_t weight_, bias_;
  std::unique_ptr<WeightedKernel> kernel_;
};

Conv2dShape conv_shape(const Node& n, const LayerContext& c) {
  Conv2dShape s;
  s.batch = c.batch;
  s.in_channels = n.in_shape[0];
  s.height = n.in_shape[1];
  s.width = n.in_shape[2];
  s.out_channels = n.spec.out;
  s.kernel = n.spec.kernel;
  s.stride = n.spec.stride;
  s.padding = n.spec.padding;
  s.has_bias = n.spec.bias;
  s.activation = n.activation;
  s.need_d_src = c.need_d_src;
  s.in_shard = c.in_shard;
  return s;
}

class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const Node& n, Backend& be, const LayerContext& c)
      : kernel_(be.activation(n.activation, c.batch * n.out_size,
                              static_cast<float>(n.spec.negative_slope))) {}
  void forward(const float*, const float* src, float* dst, const uint64_t*) override {
    kernel_->forward(src, dst);
  }
  void backward(const float*, const float*, const float* dst, float* d_dst, float*,
                float* d_src) override {
    if (d_src) kernel_->backward(dst, d_dst, d_src);
  }

 private:
  std::unique_ptr<ActivationKernel> kernel_;
};

// Max/average pooling, 2-D or over a sequence's steps.
class PoolLayer final : public Layer {
 public:
  explicit PoolLayer(std::unique_ptr<PoolKernel> kernel) : kernel_(std::move(kernel)) {}
  void forward(const float*, const float* src, float* dst, const uint64_t*) override {
    kernel_->forward(src, dst);
  }
  void backward(const float*, const float*, const float*, float* d_dst, float*,
                float* d_src) override {
    if (d_src) kernel_->backward(d_dst, d_src);
  }

 private:
  std::unique_ptr<PoolKernel> kernel_;
};

class DropoutLayer final : public Layer {
 public:
  DropoutLayer(const Node& n, Backend& be, const LayerContext& c) {
    DropoutShape s;
    s.elements = c.batch * n.out_size;
    s.element_offset = c.sample_offset * n.out_size;
    s.p = n.spec.p;
    // One stream per layer: the model's seed mixed with the layer's index.
    s.seed = mix64(c.seed ^ mix64(static_cast<uint64_t>(n.layer) + 1));
    kernel_ = be.dropout(s);
  }
  void forward(const float*, const float* src, float* dst, const uint64_t* step) override {
    kernel_->forward(src, dst, step);
  }
  void backward(const float*, const float*, const float*, float* d_dst, float*,
                float* d_src) override {
    if (d_src) kernel_->backward(d_dst, d_src);
  }

 private:
  std::unique_ptr<DropoutKernel> kernel_;
};

class EmbeddingLayer final : public Layer {
 public:
  EmbeddingLayer(const Node& n, const std::vector<ParamTensor>& t, Backend& be,
                 const LayerContext& c)
      : table_(offset_of(n, t, 0)),
        kernel_(be.embedding({c.batch, n.in_shape[0], n.spec.vocab, n.spec.out})) {}
  void forward(const float* params, const float* src, float* dst, const uint64_t*) override {
    kernel_->forward(src, params + table_, dst);
  }
  void backward(const float*, const float* src, const float*, float* d_dst, float* grads,
                float*) override {
    kernel_->backward(src, d_dst, grads + table_);
  }

 private:
  int64_t table_;
  std::unique_ptr<EmbeddingKernel> kernel_;
};

class LstmLayer final : public Layer {
 public:
  LstmLayer(const Node& n, const std::vector<ParamTensor>& t, Backend& be, const LayerContext& c)
      : params_(n.spec.layers), grads_(n.spec.layers) {
    LstmShape s;
    s.batch = c.batch;
    s.steps = n.in_shape[0];
    s.input = n.in_shape[1];
    s.hidden = n.spec.out;
    s.layers = n.spec.layers;
    s.sequence = n.spec.sequence;
    s.need_d_src = c.need_d_src;
    s.in_shard = c.in_shard;
    s.models = c.models;
    s.model_stride = c.model_stride;
    kernel_ = be.lstm(s);
    for (size_t k = 0; k < n.params.size(); ++k) offsets_.push_back(offset_of(n, t, k));
  }
  void forward(const float* params, const float* src, float* dst, const uint64_t*) override {
    for (size_t k = 0; k < params_.size(); ++k) {
      const int64_t* o = &offsets_[4 * k];  // weight_ih, weight_hh, bias_ih, bias_hh
      params_[k] = {params + o[0], params + o[1], params + o[2], params + o[3]};
    }
    kernel_->forward(src, params_.data(), dst);
  }
  void backward(const float* params, const float* src, const float*, float* d_dst, float* grads,
                float* d_src) override {
    for (size_t k = 0; k < params_.size(); ++k) {
      const int64_t* o = &offsets_[4 * k];
      params_[k] = {params + o[0], params + o[1], params + o[2], params + o[3]};
      grads_[k] = {grads + o[0], grads + o[1], grads + o[2], grads + o[3]};
    }
    kernel_->backward(src, params_.data(), d_dst, grads_.data(), d_src);
  }

 private:
  std::vector<int64_t> offsets_;
  std::vector<LstmLayerParams> params_;  // sized at plan time, filled per call
  std::vector<LstmLayerGrads> grads_;
  std::unique_ptr<LstmKernel> kernel_;
};

// Batch normalisation: weight and bias are parameters; the running statistics and the batch
// count are the model's state.
class BatchNormLayer final : public Layer {
 public:
  BatchNormLayer(const Node& n, const std::vector<ParamTensor>& t, Backend& be,
                 const LayerContext& c)
      : weight_(offset_of(n, t, 0)), bias_(offset_of(n, t, 1)) {
    XO_ASSERT(c.buffers && c.state && n.buffers.size() == 3);
    running_mean_ = c.state + (*c.buffers)[n.buffers[0]].offset;
    running_var_ = c.state + (*c.buffers)[n.buffers[1]].offset;
    batches_ = c.state + (*c.buffers)[n.buffers[2]].offset;
    BatchNormShape s;
    s.batch = c.batch;
    s.channels = n.in_shape[0];
    s.spatial = n.in_size / n.in_shape[0];
    s.eps = n.spec.eps;
    s.momentum = n.spec.momentum;
    s.training = c.training;
    kernel_ = be.batch_norm(s);
  }
  void forward(const float* params, const float* src, float* dst, const uint64_t*) override {
    kernel_->forward(src, params + weight_, params + bias_, running_mean_, running_var_, batches_,
                     dst);
  }
  void backward(const float* params, const float* src, const float*, float* d_dst, float* grads,
                float* d_src) override {
    kernel_->backward(src, params + weight_, d_dst, d_src, grads + weight_, grads + bias_);
  }

 private:
  int64_t weight_, bias_;
  float *running_mean_ = nullptr, *running_var_ = nullptr, *batches_ = nullptr;
  std::unique_ptr<BatchNormKernel> kernel_;
};

}  // namespace

bool is_view(const Node& n, bool training) {
  return n.kind == NodeKind::Flatten || (n.kind == NodeKind::Dropout && !training);
}

std::unique_ptr<Layer> make_layer(const Node& n, const std::vector<ParamTensor>& tensors,
                                  Backend& be, const LayerContext& c) {
  if (is_view(n, c.training)) return nullptr;
  XO_ASSERT(c.models == 1 || n.kind == NodeKind::Linear || n.kind == NodeKind::LSTM);
  switch (n.kind) {
    case NodeKind::Linear:
      return std::make_unique<WeightedLayer>(
          n, tensors,
          be.linear({c.batch, n.in_size, n.out_size, n.spec.bias, n.activation, c.need_d_src,
                     c.in_shard, c.models, c.model_stride}));
    case NodeKind::Conv2d:
      return std::make_unique<WeightedLayer>(n, tensors, be.conv2d(conv_shape(n, c)));
    case NodeKind::Activation:
      return std::make_unique<ActivationLayer>(n, be, c);
    case NodeKind::Pool2d: {
      Pool2dShape s;
      s.type = n.spec.type == LayerType::MaxPool2d ? PoolType::Max : PoolType::Avg;
      s.batch = c.batch;
      s.channels = n.in_shape[0];
      s.height = n.in_shape[1];
      s.width = n.in_shape[2];
      s.kernel = n.spec.kernel;
      s.stride = n.spec.stride;
      s.padding = n.spec.padding;
      s.training = c.training;
      return std::make_unique<PoolLayer>(be.pool2d(s));
    }
    case NodeKind::SequencePool: {
      const PoolType type = n.spec.type == LayerType::GlobalMaxPool ? PoolType::Max : PoolType::Avg;
      return std::make_unique<PoolLayer>(
          be.sequence_pool({type, c.batch, n.in_shape[0], n.in_shape[1]}));
    }
    case NodeKind::Dropout:
      return std::make_unique<DropoutLayer>(n, be, c);
    case NodeKind::Flatten:
      return nullptr;  // a view (above)
    case NodeKind::Embedding:
      return std::make_unique<EmbeddingLayer>(n, tensors, be, c);
    case NodeKind::LSTM:
      return std::make_unique<LstmLayer>(n, tensors, be, c);
    case NodeKind::BatchNorm:
      return std::make_unique<BatchNormLayer>(n, tensors, be, c);
  }
  XO_ASSERT(false && "unknown node kind");
}

}  // namespace xo

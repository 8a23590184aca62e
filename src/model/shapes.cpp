// Shape inference for model specs: the shape after each layer, the parameters each layer owns
// (PyTorch's names and shapes), their count, and what the data must fit (data_request). Specs built
// in code are checked here too, so every error names the origin, the line (where there is one) and
// the layer's key.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "io/toml.h"
#include "model/layer_kinds.h"
#include "model/spec.h"

namespace xo {
std::vector<ParamShape> layer_parameters(const LayerSpec& l, const std::vector<int64_t>& in) {
  std::vector<ParamShape> params;
  switch (l.type) {
    case LayerType::Linear:
      params.push_back({"weight", {l.out, in.at(0)}});
      if (l.bias) params.push_back({"bias", {l.out}});
      break;
    case LayerType::Conv2d:
      params.push_back({"weight", {l.out, in.at(0), l.kernel, l.kernel}});
      if (l.bias) params.push_back({"bias", {l.out}});
      break;
    case LayerType::Embedding:
      params.push_back({"weight", {l.vocab, l.out}});
      break;
    case LayerType::BatchNorm1d:
    case LayerType::BatchNorm2d:
      params.push_back({"weight", {in.at(0)}});
      params.push_back({"bias", {in.at(0)}});
      break;
    case LayerType::LSTM:
      // PyTorch's nn.LSTM: gates stacked in the order input, forget, cell, output. LayerShape
      // refuses an `out` whose four gates overflow before this is reached.
      for (int64_t k = 0; k < l.layers; ++k) {
        const int64_t input = k == 0 ? in.at(1) : l.out;
        params.push_back({fmt::format("weight_ih_l{}", k), {4 * l.out, input}});
        params.push_back({fmt::format("weight_hh_l{}", k), {4 * l.out, l.out}});
        params.push_back({fmt::format("bias_ih_l{}", k), {4 * l.out}});
        params.push_back({fmt::format("bias_hh_l{}", k), {4 * l.out}});
      }
      break;
    default:
      break;
  }
  return params;
}

namespace {

constexpr int64_t kMinClasses = 2;  // cross_entropy over one class is always zero
constexpr int64_t kLstmGates = 4;   // input, forget, cell, output

// The most values a model may hold in its parameters, or in one layer's output for one sample:
// 2^50 floats are 4 PiB, beyond any device, and every size computed from them later (bytes, with
// gradients and optimizer state, per tensor alignment) stays far inside int64.
constexpr int64_t kMaxValues = int64_t{1} << 50;
constexpr const char* kMaxValuesText = "2^50";

// The values of a shape, or -1 when their product is above kMaxValues (or overflows int64).
int64_t checked_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxValues) return -1;
  }
  return n;
}

// The checks of one layer against its input shape, and the shape it outputs. Every failure names
// the layer's key (and field) at its line.
class LayerShape {
 public:
  LayerShape(const ModelSpec& spec, size_t index, std::vector<int64_t> in)
      : spec_(spec),
        l_(spec.layers[index]),
        index_(index),
        key_(fmt::format("model.layers[{}]", index)),
        name_(layer_type_name(l_.type)),
        in_(std::move(in)) {}

  std::vector<int64_t> output() const {
    switch (l_.type) {
      case LayerType::Linear:
        need_rank(1, "features; add a flatten layer before it");
        positive(l_.out, "out", "width");
        return {l_.out};
      case LayerType::Conv2d:
        need_rank(3, "[channels, height, width]");
        positive(l_.out, "out", "width");
        return windowed(l_.out);
      case LayerType::MaxPool2d:
      case LayerType::AvgPool2d:
        need_rank(3, "[channels, height, width]");
        return windowed(in_[0]);
      case LayerType::Flatten: {
        // Checked: a product that wrapped would read as a small feature count and build a
        // model that has nothing to do with the spec.
        const int64_t n = checked_elements(in_);
        if (n < 0) {
          fail(fmt::format("flattening [{}] gives more than {} features", fmt::join(in_, ", "),
                           kMaxValuesText));
        }
        return {n};
      }
      case LayerType::Embedding:
        if (index_ != 0) fail("embedding reads token ids, so it must be the first layer");
        need_rank(1, "[sequence length] of token ids");
        positive(l_.vocab, "vocab", "vocabulary size");
        positive(l_.out, "out", "width");
        return {in_[0], l_.out};
      case LayerType::LSTM:
        need_rank(2, "[steps, features]; e.g. after an embedding");
        positive(l_.out, "out", "width");
        positive(l_.layers, "layers", "layer count");
        if (l_.out > std::numeric_limits<int64_t>::max() / kLstmGates) {
          fail_at(spec_.origin, l_.line, key_ + ".out",
                  fmt::format("width {} is too large (its {} gates overflow a 64-bit size)", l_.out,
                              kLstmGates));
        }
        return l_.sequence ? std::vector<int64_t>{in_[0], l_.out} : std::vector<int64_t>{l_.out};
      case LayerType::GlobalAvgPool:
      case LayerType::GlobalMaxPool:
        need_rank(2, "[steps, features]; e.g. an lstm with sequence = true");
        return {in_[1]};
      case LayerType::BatchNorm1d:
        if (in_.size() != 1 && in_.size() != 2) {
          fail(fmt::format("batchnorm1d normalises [channels] or [channels, length], got [{}]",
                           fmt::join(in_, ", ")));
        }
        return in_;
      case LayerType::BatchNorm2d:
        need_rank(3, "[channels, height, width]; e.g. after a conv2d");
        return in_;
      case LayerType::Dropout:
        if (!(l_.p >= 0 && l_.p < 1)) {
          fail_at(spec_.origin, l_.line, key_ + ".p", fmt::format("{} must be in [0, 1)", l_.p));
        }
        return in_;
      default:
        break;
    }
    // The element-wise kinds (the activations) have nothing to check: their row says so.
    XO_ASSERT(layer_kind(l_.type).keeps_shape && "layer type missing from LayerShape::output");
    return in_;
  }

  // Adds the layer's parameter count to `total`, failing past kMaxValues so that no later size
  // computation can overflow. Returns whether the layer has parameters.
  bool add_parameters(int64_t& total) const {
    const std::vector<ParamShape> params = layer_parameters(l_, in_);
    for (const ParamShape& t : params) {
      const int64_t n = checked_elements(t.shape);
      if (n < 0 || (total += n) > kMaxValues) {
        fail(fmt::format("too many parameters (more than {}; {} is [{}])", kMaxValuesText, t.suffix,
                         fmt::join(t.shape, ", ")));
      }
    }
    return !params.empty();
  }

  // The layer's output must have a countable size per sample: every later size (a batch's
  // activations, the memory estimate) multiplies it.
  void check_output_size(const std::vector<int64_t>& out) const {
    if (checked_elements(out) < 0) {
      fail(fmt::format("{} outputs [{}], more than {} values per sample", name_,
                       fmt::join(out, ", "), kMaxValuesText));
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    fail_at(spec_.origin, l_.line, key_, what);
  }

  void need_rank(size_t rank, std::string_view example) const {
    if (in_.size() != rank) {
      fail(fmt::format("{} needs an input of rank {} ({}), got [{}]", name_, rank, example,
                       fmt::join(in_, ", ")));
    }
  }

  void positive(int64_t v, std::string_view field, std::string_view noun) const {
    if (v <= 0) {
      fail_at(spec_.origin, l_.line, fmt::format("{}.{}", key_, field),
              fmt::format("{} {} must be a positive integer", noun, v));
    }
  }

  // The spatial output of a window of l.kernel over [C, H, W]; every side must stay >= 1.
  std::vector<int64_t> windowed(int64_t channels) const {
    positive(l_.kernel, "kernel", "kernel size");
    positive(l_.stride, "stride", "stride");
    const bool conv = l_.type == LayerType::Conv2d;
    // `padding > kernel / 2` is `2 padding > kernel` for integers, without the doubling that
    // could overflow.
    if (l_.padding < 0 || (!conv && l_.padding > l_.kernel / 2)) {
      fail_at(spec_.origin, l_.line, key_ + ".padding",
              fmt::format("padding {} must be >= 0{}", l_.padding,
                          conv ? "" : " and at most half the kernel"));
    }
    const int64_t height = padded(in_[1]), width = padded(in_[2]);
    if (height < l_.kernel || width < l_.kernel) {
      fail(fmt::format("a {}x{} kernel does not fit the input [{}] with padding {}", l_.kernel,
                       l_.kernel, fmt::join(in_, ", "), l_.padding));
    }
    // The output side of the window: floor((n + 2 pad - k) / stride) + 1, which cannot overflow
    // once n + 2 pad does not.
    return {channels, (height - l_.kernel) / l_.stride + 1, (width - l_.kernel) / l_.stride + 1};
  }

  // A side with the padding on both ends, refused where it overflows int64.
  int64_t padded(int64_t side) const {
    int64_t n = 0;
    if (__builtin_mul_overflow(l_.padding, 2, &n) || __builtin_add_overflow(side, n, &n)) {
      fail_at(spec_.origin, l_.line, key_ + ".padding",
              fmt::format("padding {} is too large (the padded side overflows a 64-bit size)",
                          l_.padding));
    }
    return n;
  }

  const ModelSpec& spec_;
  const LayerSpec& l_;
  size_t index_;
  std::string key_;
  const char* name_;
  std::vector<int64_t> in_;
};

void check_input(const ModelSpec& spec) {
  if (spec.input.empty()) fail_at(spec.origin, kNoLine, "model.input", "empty (expected a shape)");
  for (size_t i = 0; i < spec.input.size(); ++i) {
    if (spec.input[i] <= 0) {
      fail_at(spec.origin, kNoLine, fmt::format("model.input[{}]", i),
              fmt::format("{} must be a positive integer", spec.input[i]));
    }
  }
  if (checked_elements(spec.input) < 0) {
    fail_at(spec.origin, kNoLine, "model.input",
            fmt::format("[{}] has more than {} values per sample", fmt::join(spec.input, ", "),
                        kMaxValuesText));
  }
}

// The last layer must output what the loss reads: one score per class, or one score for bce.
void check_loss(const ModelSpec& spec, const std::vector<int64_t>& shape) {
  const LayerSpec& last = spec.layers.back();
  const std::string last_key = fmt::format("model.layers[{}]", spec.layers.size() - 1);
  if (spec.loss == LossType::CrossEntropy && (shape.size() != 1 || shape[0] < kMinClasses)) {
    fail_at(spec.origin, last.line, last_key,
            fmt::format("cross_entropy needs the last layer to output one score per class, at "
                        "least {}, got [{}]",
                        kMinClasses, fmt::join(shape, ", ")));
  }
  if (spec.loss == LossType::MeanSquaredError && shape != std::vector<int64_t>{1}) {
    fail_at(spec.origin, last.line, last_key,
            fmt::format("mse needs the last layer to output one value, the prediction of the "
                        "CSV's target column (a linear with out = 1), got [{}]",
                        fmt::join(shape, ", ")));
  }
  if (spec.loss == LossType::BinaryCrossEntropy && shape != std::vector<int64_t>{1}) {
    fail_at(spec.origin, last.line, last_key,
            fmt::format("bce needs the last layer to output one score (a linear with out = 1), "
                        "got [{}]",
                        fmt::join(shape, ", ")));
  }
}

}  // namespace

std::vector<std::vector<int64_t>> infer_shapes(const ModelSpec& spec) {
  // Specs built in code (not parsed) reach here unchecked, so this validates everything it uses.
  check_input(spec);
  if (spec.layers.empty()) {
    fail_at(spec.origin, kNoLine, "model.layers", "empty (expected at least one linear layer)");
  }
  std::vector<std::vector<int64_t>> shapes;
  bool any_params = false;
  int64_t params = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerShape layer(spec, i, i == 0 ? spec.input : shapes.back());
    std::vector<int64_t> out = layer.output();
    layer.check_output_size(out);
    any_params = layer.add_parameters(params) || any_params;
    shapes.push_back(std::move(out));
  }
  if (!any_params) {
    fail_at(spec.origin, spec.layers.front().line, "model.layers",
            "no linear layer, only layers without parameters (expected at least one linear "
            "layer)");
  }
  check_loss(spec, shapes.back());
  return shapes;
}

std::vector<int64_t> layer_output_shape(const ModelSpec& spec, size_t index,
                                        const std::vector<int64_t>& in) {
  return LayerShape(spec, index, in).output();
}

int64_t parameter_count(const ModelSpec& spec) {
  const auto shapes = infer_shapes(spec);  // also guarantees the sum below cannot overflow
  int64_t params = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    for (const ParamShape& t : layer_parameters(spec.layers[i], i ? shapes[i - 1] : spec.input)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      params += n;
    }
  }
  return params;
}

DataRequest data_request(const ModelSpec& spec, int64_t classes) {
  DataRequest r;
  r.origin = spec.origin;
  r.input = spec.input;
  r.classes = classes;
  if (!spec.layers.empty() && spec.layers.front().type == LayerType::Embedding) {
    r.vocab = spec.layers.front().vocab;
  }
  r.seed = spec.train.seed;
  return r;
}

}  // namespace xo

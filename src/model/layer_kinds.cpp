// The table of layer kinds (layer_kinds.h): one row per LayerType, in its order, checked at compile
// time so that a kind added to the enum without its row does not build.
#include "model/layer_kinds.h"

#include <fmt/format.h>

#include <iterator>

#include "backend/activation_math.h"
#include "core/error.h"
#include "io/toml.h"

namespace xo {
namespace {

constexpr std::string_view kLinearKeys[] = {"out", "bias"};
constexpr std::string_view kConvKeys[] = {"out", "kernel", "stride", "padding", "bias"};
constexpr std::string_view kPoolKeys[] = {"kernel", "stride", "padding"};
constexpr std::string_view kDropoutKeys[] = {"p"};
constexpr std::string_view kEmbeddingKeys[] = {"vocab", "out"};
constexpr std::string_view kLstmKeys[] = {"out", "layers", "sequence"};
constexpr std::string_view kBatchNormKeys[] = {"eps", "momentum"};
constexpr std::string_view kLeakyReluKeys[] = {"negative_slope"};

std::string no_settings(const LayerSpec&) { return ""; }
std::string name_only(const LayerSpec& l) { return layer_type_name(l.type); }

std::string linear_toml(const LayerSpec& l) {
  return fmt::format(", out = {}{}", l.out, l.bias ? "" : ", bias = false");
}
std::string linear_text(const LayerSpec& l) {
  return fmt::format("linear {}{}", l.out, l.bias ? "" : ", no bias");
}

std::string conv_toml(const LayerSpec& l) {
  std::string out = fmt::format(", out = {}, kernel = {}", l.out, l.kernel);
  if (l.stride != 1) out += fmt::format(", stride = {}", l.stride);
  if (l.padding != 0) out += fmt::format(", padding = {}", l.padding);
  if (!l.bias) out += ", bias = false";
  return out;
}
std::string conv_text(const LayerSpec& l) {
  return fmt::format("conv2d {}, {}x{} stride {} padding {}{}", l.out, l.kernel, l.kernel, l.stride,
                     l.padding, l.bias ? "" : ", no bias");
}

// A pool's stride defaults to its kernel, as torch.nn.MaxPool2d's does.
std::string pool_toml(const LayerSpec& l) {
  std::string out = fmt::format(", kernel = {}", l.kernel);
  if (l.stride != l.kernel) out += fmt::format(", stride = {}", l.stride);
  if (l.padding != 0) out += fmt::format(", padding = {}", l.padding);
  return out;
}
std::string pool_text(const LayerSpec& l) {
  return fmt::format("{} {}x{} stride {} padding {}", layer_type_name(l.type), l.kernel, l.kernel,
                     l.stride, l.padding);
}

std::string dropout_toml(const LayerSpec& l) { return fmt::format(", p = {}", toml_float(l.p)); }
std::string dropout_text(const LayerSpec& l) { return fmt::format("dropout p = {}", l.p); }

std::string embedding_toml(const LayerSpec& l) {
  return fmt::format(", vocab = {}, out = {}", l.vocab, l.out);
}
std::string embedding_text(const LayerSpec& l) {
  return fmt::format("embedding {} x {}", l.vocab, l.out);
}

std::string lstm_toml(const LayerSpec& l) {
  const LayerSpec defaults;
  std::string out = fmt::format(", out = {}", l.out);
  if (l.layers != defaults.layers) out += fmt::format(", layers = {}", l.layers);
  if (l.sequence) out += ", sequence = true";
  return out;
}
std::string lstm_text(const LayerSpec& l) {
  return fmt::format("lstm {}, {} layer{}, {}", l.out, l.layers, l.layers == 1 ? "" : "s",
                     l.sequence ? "every step" : "last step");
}

std::string batchnorm_toml(const LayerSpec& l) {
  const LayerSpec defaults;
  std::string out;
  if (l.eps != defaults.eps) out += fmt::format(", eps = {}", toml_float(l.eps));
  if (l.momentum != defaults.momentum)
    out += fmt::format(", momentum = {}", toml_float(l.momentum));
  return out;
}
std::string batchnorm_text(const LayerSpec& l) {
  return fmt::format("{} eps {} momentum {}", layer_type_name(l.type), l.eps, l.momentum);
}

std::string leaky_relu_toml(const LayerSpec& l) {
  const LayerSpec defaults;
  return l.negative_slope == defaults.negative_slope
             ? ""
             : fmt::format(", negative_slope = {}", toml_float(l.negative_slope));
}
std::string leaky_relu_text(const LayerSpec& l) {
  return fmt::format("leaky_relu negative_slope {}", l.negative_slope);
}

// Rows of the kinds that share a shape: an element-wise activation, a layer without settings.
constexpr LayerKind activation_kind(LayerType t, std::string_view name, Activation a) {
  return {t, name, {}, NodeKind::Activation, a, fuses_into_epilogue(a),
          true, false, no_settings, name_only};
}

// clang-format off: one row per kind, its fields in LayerKind's order (type, name, keys, node,
// activation, fuses, keeps_shape, has_weights, settings_toml, describe).
constexpr LayerKind kKinds[] = {
    {LayerType::Linear, "linear", kLinearKeys, NodeKind::Linear, Activation::None,
     false, false, true, linear_toml, linear_text},
    activation_kind(LayerType::ReLU, "relu", Activation::ReLU),
    activation_kind(LayerType::Tanh, "tanh", Activation::Tanh),
    activation_kind(LayerType::Sigmoid, "sigmoid", Activation::Sigmoid),
    {LayerType::Conv2d, "conv2d", kConvKeys, NodeKind::Conv2d, Activation::None,
     false, false, true, conv_toml, conv_text},
    {LayerType::MaxPool2d, "maxpool2d", kPoolKeys, NodeKind::Pool2d, Activation::None,
     false, false, false, pool_toml, pool_text},
    {LayerType::AvgPool2d, "avgpool2d", kPoolKeys, NodeKind::Pool2d, Activation::None,
     false, false, false, pool_toml, pool_text},
    {LayerType::Dropout, "dropout", kDropoutKeys, NodeKind::Dropout, Activation::None,
     false, true, false, dropout_toml, dropout_text},
    {LayerType::Flatten, "flatten", {}, NodeKind::Flatten, Activation::None,
     false, false, false, no_settings, name_only},
    {LayerType::Embedding, "embedding", kEmbeddingKeys, NodeKind::Embedding, Activation::None,
     false, false, true, embedding_toml, embedding_text},
    {LayerType::LSTM, "lstm", kLstmKeys, NodeKind::LSTM, Activation::None,
     false, false, true, lstm_toml, lstm_text},
    {LayerType::GlobalAvgPool, "global_avgpool", {}, NodeKind::SequencePool, Activation::None,
     false, false, false, no_settings, name_only},
    {LayerType::GlobalMaxPool, "global_maxpool", {}, NodeKind::SequencePool, Activation::None,
     false, false, false, no_settings, name_only},
    {LayerType::BatchNorm1d, "batchnorm1d", kBatchNormKeys, NodeKind::BatchNorm, Activation::None,
     false, true, false, batchnorm_toml, batchnorm_text},
    {LayerType::BatchNorm2d, "batchnorm2d", kBatchNormKeys, NodeKind::BatchNorm, Activation::None,
     false, true, false, batchnorm_toml, batchnorm_text},
    // Not fused: its slope is a parameter the Linear and Conv2d epilogues do not carry.
    {LayerType::LeakyReLU, "leaky_relu", kLeakyReluKeys, NodeKind::Activation,
     Activation::LeakyReLU, fuses_into_epilogue(Activation::LeakyReLU), true, false,
     leaky_relu_toml, leaky_relu_text},
};
// clang-format on

// The last LayerType: a kind added after it without a row fails the size check below.
constexpr LayerType kLastLayerType = LayerType::LeakyReLU;

constexpr bool rows_in_enum_order() {
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    if (static_cast<size_t>(kKinds[i].type) != i) return false;
  }
  return true;
}
static_assert(std::size(kKinds) == static_cast<size_t>(kLastLayerType) + 1,
              "every LayerType needs its row in kKinds");
static_assert(rows_in_enum_order(), "kKinds must list the layer types in the enum's order");

}  // namespace

std::span<const LayerKind> layer_kinds() { return kKinds; }

const LayerKind& layer_kind(LayerType t) {
  const auto index = static_cast<size_t>(t);
  XO_ASSERT(index < std::size(kKinds) && "layer type outside the layer kinds table");
  return kKinds[index];
}

std::optional<LayerType> layer_type_named(std::string_view name) {
  for (const LayerKind& kind : kKinds) {
    if (kind.name == name) return kind.type;
  }
  return std::nullopt;
}

const char* layer_type_name(LayerType t) { return layer_kind(t).name.data(); }

}  // namespace xo

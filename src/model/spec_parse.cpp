// Reading TOML model specs through the one TOML reader (io/toml.h): every error names the file, the
// line and the dotted key and says what was expected; unknown keys are errors, so a typo never
// passes. Also the names of losses, and resolving a name to a spec (layer kinds: layer_kinds.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "io/toml.h"
#include "model/layer_kinds.h"
#include "model/onnx_import.h"
#include "model/spec.h"

namespace xo {
namespace {

constexpr std::string_view kDiscSource = "disc";
constexpr std::string_view kFashionMnistSource = "fashion-mnist";
constexpr std::string_view kImdbSyntheticSource = "imdb-synthetic";
// Sources that name a path after their prefix.
constexpr std::string_view kPathPrefixes[] = {"csv:", "safetensors:", "idx:", "imdb:"};
constexpr LossType kLossTypes[] = {LossType::CrossEntropy, LossType::BinaryCrossEntropy,
                                   LossType::MeanSquaredError};

// Every key any layer takes, "type" first: checked before the type is known, so that
// `{ typ = "relu" }` names "typ" rather than a missing "type".
std::vector<std::string_view> all_layer_keys() {
  std::vector<std::string_view> keys = {"type"};
  for (const LayerKind& kind : layer_kinds()) {
    for (std::string_view key : kind.keys) {
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
    }
  }
  return keys;
}

std::vector<std::string_view> optimizer_names() {
  std::vector<std::string_view> names;
  for (OptimizerType t : kOptimizerTypes) names.push_back(optimizer_type_name(t));
  return names;
}

std::vector<int64_t> parse_input(const TomlValue& input) {
  constexpr std::string_view kExpected = "a non-empty list of positive integers, e.g. [2]";
  const std::vector<TomlValue> dims = input.list(kExpected);
  if (dims.empty()) input.expected(kExpected);
  std::vector<int64_t> shape;
  for (const TomlValue& dim : dims) {
    if (!dim.is_integer() || dim.integer() <= 0) dim.expected("a positive integer");
    shape.push_back(dim.integer());
  }
  return shape;
}

// The keys the layer's type does not take, named with the keys it does take.
void check_layer_keys(const TomlTable& t, const LayerKind& info) {
  for (const std::string& key : t.keys()) {
    if (key == "type" || std::find(info.keys.begin(), info.keys.end(), key) != info.keys.end()) {
      continue;
    }
    const std::string takes = info.keys.empty()
                                  ? std::string("it has no settings")
                                  : fmt::format("it takes: {}", fmt::join(info.keys, ", "));
    t.get(key).fail(fmt::format("a {} layer takes no '{}' ({})", info.name, key, takes));
  }
}

LayerSpec parse_layer(const TomlValue& node) {
  const TomlTable t = node.table("a layer table such as { type = \"linear\", out = 4 }");
  t.only_keys(all_layer_keys());
  std::vector<std::string_view> names;
  for (const LayerKind& kind : layer_kinds()) names.push_back(kind.name);
  LayerSpec layer;
  layer.line = t.line();
  layer.type = layer_kinds()[t.get("type").choice("layer type", names)].type;
  const LayerKind& info = layer_kind(layer.type);
  check_layer_keys(t, info);

  auto has = [&](std::string_view key) {
    return std::find(info.keys.begin(), info.keys.end(), key) != info.keys.end();
  };
  // A positive integer; `fallback` (when > 0) makes the key optional.
  auto positive = [&](std::string_view key, int64_t fallback, std::string_view noun) {
    const TomlValue v = t.get(key);
    return !v && fallback > 0 ? fallback : v.integer_at_least(1, noun);
  };
  if (has("out")) layer.out = positive("out", 0, "width");
  if (has("kernel")) layer.kernel = positive("kernel", 0, "kernel size");
  if (has("stride")) {
    const int64_t pool_default = layer.type == LayerType::Conv2d ? 1 : layer.kernel;
    layer.stride = positive("stride", pool_default, "stride");
  }
  if (const TomlValue v = t.get("padding")) layer.padding = v.integer_at_least(0, "padding");
  if (const TomlValue v = t.get("bias")) layer.bias = v.boolean();
  if (const TomlValue v = t.get("p")) {
    layer.p = v.number(kUnitOpen, "the probability of dropping an element");
  }
  if (const TomlValue v = t.get("eps")) layer.eps = v.number(kPositive, "added to the variance");
  if (const TomlValue v = t.get("momentum")) {
    layer.momentum = v.number(kUnitClosed, "the batch's weight in the running statistics");
  }
  if (const TomlValue v = t.get("negative_slope")) {
    layer.negative_slope = v.number(kNonNegative, "the slope for inputs below zero");
  }
  if (has("vocab")) layer.vocab = positive("vocab", 0, "vocabulary size");
  if (has("layers")) layer.layers = positive("layers", 1, "layer count");
  if (const TomlValue v = t.get("sequence")) layer.sequence = v.boolean();
  return layer;
}

void parse_name(const TomlTable& model, ModelSpec& spec) {
  if (const TomlValue name = model.get("name")) {
    spec.name = name.string();
    if (spec.name.empty()) {
      name.fail(
          "empty name (expected a name such as \"disc-8\", or no name key to use the file's)");
    }
  }
}

void parse_loss(const TomlValue& loss, ModelSpec& spec) {
  std::vector<std::string_view> losses;
  for (LossType t : kLossTypes) losses.push_back(loss_name(t));
  spec.loss = kLossTypes[loss.choice("loss", losses)];
}

// A path relative to the spec file's folder (`base`; empty for a spec given as text).
std::string relative_to(const std::filesystem::path& base, const std::string& file) {
  std::filesystem::path path = file;
  if (path.is_relative() && !base.empty()) path = (base / path).lexically_normal();
  return path.string();
}

void parse_model(const TomlTable& model, const std::filesystem::path& base, ModelSpec& spec) {
  model.only_keys({"name", "input", "layers", "loss", "init"});
  parse_name(model, spec);
  spec.input = parse_input(model.get("input"));

  constexpr std::string_view kExpectedLayers =
      "a non-empty list of layer tables, e.g. [ { type = \"linear\", out = 2 } ]";
  const TomlValue layers = model.get("layers");
  const std::vector<TomlValue> items = layers.list(kExpectedLayers);
  if (items.empty()) layers.expected(kExpectedLayers);
  spec.layers.clear();
  for (const TomlValue& item : items) spec.layers.push_back(parse_layer(item));
  parse_loss(model.get("loss"), spec);
  if (const TomlValue init = model.get("init")) {
    spec.init = relative_to(
        base,
        init.string("a path to a safetensors file or an ONNX model with the initial weights"));
    if (spec.init.empty()) init.expected("a path to a safetensors file or an ONNX model");
  }
}

// PyTorch's `betas = [b1, b2]`, the other spelling of beta1 and beta2 (never both).
void read_betas(const TomlTable& t, const TomlValue& betas, OptimizerSettings& o) {
  for (std::string_view key : {"beta1", "beta2"}) {
    if (const TomlValue beta = t.get(key)) {
      beta.fail(
          "given twice: betas already sets it (expected either betas = [b1, b2] or beta1/beta2)");
    }
  }
  const std::vector<TomlValue> b = betas.is_list() ? betas.list("") : std::vector<TomlValue>{};
  auto in_unit = [](const TomlValue& v) { return v.is_number() && kUnitOpen.contains(v.number()); };
  if (b.size() != 2 || !in_unit(b[0]) || !in_unit(b[1])) {
    betas.expected("two numbers in [0, 1), e.g. [0.9, 0.999]");
  }
  o.beta1 = b[0].number();
  o.beta2 = b[1].number();
}

void parse_optimizer(const TomlTable& t, OptimizerSettings& o) {
  if (const TomlValue type = t.get("type")) {
    o.type = kOptimizerTypes[type.choice("optimizer", optimizer_names())];
  }
  switch (o.type) {
    case OptimizerType::SGD:
      t.only_keys({"type", "lr", "momentum", "dampening", "nesterov", "weight_decay"});
      break;
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      t.only_keys({"type", "lr", "beta1", "beta2", "betas", "eps", "weight_decay"});
      if (o.type == OptimizerType::AdamW) o.weight_decay = kAdamWDefaultWeightDecay;
      break;
    case OptimizerType::RMSprop:
      t.only_keys({"type", "lr", "alpha", "eps", "weight_decay"});
      break;
    case OptimizerType::Adadelta:
      t.only_keys({"type", "lr", "rho", "eps", "weight_decay"});
      o.eps = kAdadeltaDefaultEps;
      break;
  }
  if (const TomlValue v = t.get("lr")) o.lr = v.number(kPositive);
  // Momentum and Adam's betas are decay factors: 1 or more would never forget (or diverge).
  if (const TomlValue v = t.get("momentum")) o.momentum = v.number(kUnitOpen);
  if (const TomlValue v = t.get("beta1")) o.beta1 = v.number(kUnitOpen);
  if (const TomlValue v = t.get("beta2")) o.beta2 = v.number(kUnitOpen);
  if (const TomlValue v = t.get("alpha")) o.alpha = v.number(kUnitOpen);
  if (const TomlValue v = t.get("rho")) o.rho = v.number(kUnitOpen);
  if (const TomlValue betas = t.get("betas")) read_betas(t, betas, o);
  if (const TomlValue v = t.get("dampening")) o.dampening = v.number(kUnitClosed);
  if (const TomlValue v = t.get("eps")) o.eps = v.number(kPositive);
  if (const TomlValue v = t.get("weight_decay")) o.weight_decay = v.number(kNonNegative);
  const TomlValue nesterov = t.get("nesterov");
  if (nesterov) o.nesterov = nesterov.boolean();
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    nesterov.fail(fmt::format(
        "Nesterov momentum needs momentum > 0 and dampening = 0, got momentum {} and dampening {} "
        "(torch.optim.SGD refuses this too)",
        toml_float(o.momentum), toml_float(o.dampening)));
  }
}

template <typename E, size_t N>
std::vector<std::string_view> names_of(const E (&values)[N], const char* (*name)(E)) {
  std::vector<std::string_view> names;
  for (E v : values) names.push_back(name(v));
  return names;
}

// The monitor key of a schedule or early stopping table, and where it is (the table's line when
// it is absent: the default is resolved, and may be refused, once the data is known).
std::optional<Metric> parse_monitor(const TomlTable& t, const std::string& origin,
                                    SpecPlace& place) {
  const TomlValue v = t.get("monitor");
  place = {origin, v ? v.line() : t.line()};
  if (!v) return std::nullopt;
  return kMetrics[v.choice("monitor", names_of(kMetrics, metric_name))];
}

// [train.schedule]: each type takes its own keys, as torch.optim.lr_scheduler's classes do.
ScheduleSettings parse_schedule(const TomlTable& t, const std::string& origin) {
  ScheduleSettings s;
  const std::vector<std::string_view> types = names_of(kScheduleTypes, schedule_type_name);
  s.type = kScheduleTypes[t.get("type").choice("schedule type", types)];
  s.place = {origin, t.line()};
  switch (s.type) {
    case ScheduleType::Step:
      t.only_keys({"type", "step_size", "gamma"});
      if (const TomlValue v = t.get("step_size"); !v) {
        v.expected("a positive integer: the epochs between two multiplications by gamma");
      } else {
        s.step_size = v.integer_at_least(1, "step_size (epochs)");
      }
      if (const TomlValue v = t.get("gamma")) s.gamma = v.number(kPositive, "the rate's factor");
      break;
    case ScheduleType::Cosine:
      t.only_keys({"type", "t_max", "eta_min"});
      if (const TomlValue v = t.get("t_max")) s.t_max = v.integer_at_least(1, "t_max (epochs)");
      if (const TomlValue v = t.get("eta_min")) s.eta_min = v.number(kNonNegative, "a rate");
      break;
    case ScheduleType::Plateau:
      t.only_keys({"type", "monitor", "factor", "patience", "threshold", "cooldown", "min_lr"});
      s.monitor = parse_monitor(t, origin, s.monitor_place);
      if (const TomlValue v = t.get("factor")) {
        s.factor = v.number(Range{0, true, 1, true}, "a factor below 1 lowers the rate");
      }
      if (const TomlValue v = t.get("patience")) s.patience = v.integer_at_least(0, "patience");
      if (const TomlValue v = t.get("threshold")) {
        s.threshold = v.number(kNonNegative, "a relative improvement");
      }
      if (const TomlValue v = t.get("cooldown")) s.cooldown = v.integer_at_least(0, "cooldown");
      if (const TomlValue v = t.get("min_lr")) s.min_lr = v.number(kNonNegative, "a rate");
      break;
  }
  return s;
}

EarlyStoppingSettings parse_early_stopping(const TomlTable& t, const std::string& origin) {
  t.only_keys({"monitor", "patience", "min_delta", "restore_best"});
  EarlyStoppingSettings e;
  e.monitor = parse_monitor(t, origin, e.monitor_place);
  if (const TomlValue v = t.get("patience")) e.patience = v.integer_at_least(0, "patience");
  if (const TomlValue v = t.get("min_delta")) {
    e.min_delta = v.number(kNonNegative, "the least change that counts as an improvement");
  }
  if (const TomlValue v = t.get("restore_best")) e.restore_best = v.boolean();
  return e;
}

// `origin` names the file for the checks that run once the data is known (a test metric).
void parse_train(const TomlTable& t, TrainSpec& train, const std::string& origin) {
  t.only_keys({"optimizer", "batch", "epochs", "shuffle", "seed", "schedule", "early_stopping"});
  if (const TomlValue v = t.get("optimizer")) {
    const std::string names = fmt::format("{}", fmt::join(optimizer_names(), ", "));
    parse_optimizer(v.table(fmt::format(
                        "a table such as {{ type = \"sgd\", lr = 0.1 }}, type one of: {}", names)),
                    train.optimizer);
  }
  if (const TomlValue v = t.get("batch")) train.batch = v.integer_at_least(1);
  if (const TomlValue v = t.get("epochs")) train.epochs = v.integer_at_least(1);
  if (const TomlValue v = t.get("shuffle")) train.shuffle = v.boolean();
  if (const TomlValue v = t.get("seed")) train.seed = static_cast<uint64_t>(v.integer_at_least(0));
  if (const TomlValue v = t.get("schedule")) {
    train.schedule = parse_schedule(
        v.table("a [train.schedule] table with type = \"step\", \"cosine\" or \"plateau\""),
        origin);
  }
  if (const TomlValue v = t.get("early_stopping")) {
    train.early_stopping = parse_early_stopping(
        v.table("a [train.early_stopping] table (monitor, patience, min_delta, restore_best)"),
        origin);
  }
}

// `base` is the spec file's folder (empty for a spec given as text): a relative path is relative
// to the spec, not to wherever crossover happens to run.
std::string parse_source(const TomlValue& v, const std::filesystem::path& base) {
  const std::string expected =
      fmt::format("one of: \"{}\", \"csv:PATH\", \"safetensors:PATH\", \"{}\", \"idx:DIR\", "
                  "\"imdb:DIR\", \"{}\"",
                  kDiscSource, kFashionMnistSource, kImdbSyntheticSource);
  const std::string source = v.string(expected);
  if (source == kDiscSource || source == kFashionMnistSource || source == kImdbSyntheticSource) {
    return source;
  }
  for (std::string_view prefix : kPathPrefixes) {
    if (!source.starts_with(prefix)) continue;
    const std::string path = source.substr(prefix.size());
    if (path.empty()) {
      v.fail(fmt::format("empty path (expected \"{}PATH\", e.g. \"{}data\")", prefix, prefix));
    }
    return std::string(prefix) + relative_to(base, path);
  }
  v.fail(fmt::format("unknown source '{}' (expected {})", source, expected));
}

// `notes` gains what the spec asks for that will not happen (a sample count for a file).
void parse_data(const TomlTable& t, const std::filesystem::path& base, DataSpec& data,
                std::vector<std::string>& notes) {
  t.only_keys({"source", "samples", "test_samples", "test", "validation_split"});
  if (const TomlValue v = t.get("source")) data.source = parse_source(v, base);
  if (const TomlValue v = t.get("samples")) {
    data.samples = v.integer_at_least(1);
    // A file brings its own rows. A note, not an error: results recorded before 0.1.1 wrote a
    // sample count for every source, and their specs must still read.
    if (!data.source.empty() && data.source != kDiscSource && data.source != kImdbSyntheticSource) {
      notes.push_back(fmt::format(
          "data.samples = {} is not used: '{}' brings its own rows (only the generated sources, "
          "disc and imdb-synthetic, take a sample count)",
          data.samples, data.source));
    }
  }
  if (const TomlValue v = t.get("test_samples")) {
    data.test_samples = v.integer_at_least(0);
    // Only generated sources make a test split of a chosen size; files bring their own (or none).
    if (data.source != kDiscSource && data.source != kImdbSyntheticSource) {
      v.fail(fmt::format(
          "only generated sources (disc, imdb-synthetic) take test_samples; '{}' has its own test "
          "split or none",
          data.source));
    }
  }
  if (const TomlValue v = t.get("test")) {
    const std::string test = parse_source(v, base);
    if (!test.starts_with("csv:") && !test.starts_with("safetensors:")) {
      v.fail(
          fmt::format("'{}' is not a file of samples (expected \"csv:PATH\" or "
                      "\"safetensors:PATH\": a file of the training set's columns)",
                      test));
    }
    if (data.test_samples > 0) {
      v.fail(
          fmt::format("a test file and test_samples = {} both name the test split (expected "
                      "one of them)",
                      data.test_samples));
    }
    data.test = test;
  }
  if (const TomlValue v = t.get("validation_split")) {
    data.validation_split = v.number(
        Range{0, true, 1, true},
        "the fraction of the training samples held out to validate, as Keras's validation_split");
  }
}

ModelSpec parse(const std::string& text, const std::string& origin,
                const std::filesystem::path& base) {
  const TomlDocument doc(text, origin);
  const TomlTable root = doc.root();
  root.only_keys({"model", "train", "data"});
  ModelSpec spec;
  spec.origin = origin;
  spec.name = std::filesystem::path(origin).stem().string();
  parse_model(root.get("model").table("a [model] table with input, layers and loss"), base, spec);
  if (const TomlValue train = root.get("train")) {
    parse_train(train.table("a [train] table"), spec.train, origin);
  }
  if (const TomlValue data = root.get("data")) {
    parse_data(data.table("a [data] table"), base, spec.data, spec.notes);
  }
  infer_shapes(spec);
  return spec;
}

// The model's shape alone (input and layers) as TOML: two specs of the same network compare equal
// whatever their names, weights and training settings.
std::string network_toml(ModelSpec spec) {
  spec.name.clear();
  spec.init.clear();
  spec.loss = LossType::CrossEntropy;
  spec.train = TrainSpec{};
  spec.data = DataSpec{};
  return to_toml(spec);
}

// Whether `init` holds the model's own initial weights: the model's file itself, or the
// safetensors file `crossover import --weights` wrote of them.
bool same_weights(const std::string& init, const ModelSpec& spec, const std::string& model_file) {
  std::error_code ec;
  if (std::filesystem::equivalent(init, model_file, ec)) return true;
  if (!spec.init_weights) return false;
  try {
    const std::vector<NamedTensor> named = load_safetensors(init);
    return std::equal(named.begin(), named.end(), spec.init_weights->begin(),
                      spec.init_weights->end(), [](const NamedTensor& a, const NamedTensor& b) {
                        return a.name == b.name && a.shape == b.shape && a.data == b.data;
                      });
  } catch (const UserError&) {
    return false;  // unreadable: not the model's, and said so
  }
}

// A whole spec beside the model whose layers come from `layers_from` (what `crossover import
// MODEL.onnx --spec MODEL.toml` writes): its training settings, data and loss are the model's,
// where its network is the model's own; one whose network was edited is refused (it is trained by
// passing it). Its model.init is not read: the model's own weights are the initial weights.
void apply_whole_spec(ModelSpec& spec, const std::filesystem::path& path,
                      const std::string& layers_from) {
  ModelSpec whole = load_spec_file(path);
  if (network_toml(whole) != network_toml(spec)) {
    throw UserError(fmt::format(
        "{}: a whole spec beside {}, whose input or layers differ from the model's: train {} "
        "itself to train that network, or set only [train], [data] and model.loss in {} to train "
        "{} as it is",
        path.string(), layers_from, path.string(), path.filename().string(), layers_from));
  }
  if (!whole.init.empty() && !same_weights(whole.init, spec, layers_from)) {
    spec.notes.push_back(fmt::format(
        "{}'s model.init ({}) is not read: {}'s own weights are the initial weights (train {} "
        "itself to start from {})",
        path.filename().string(), whole.init, layers_from, path.string(), whole.init));
  }
  spec.notes.push_back(
      fmt::format("training settings, data and loss from {} (a whole spec of this model's layers)",
                  path.filename().string()));
  for (std::string& note : whole.notes) spec.notes.push_back(std::move(note));
  spec.name = std::move(whole.name);
  spec.loss = whole.loss;
  spec.train = std::move(whole.train);
  spec.data = std::move(whole.data);
}

}  // namespace

void apply_train_settings(ModelSpec& spec, const std::string& toml_text, const std::string& origin) {
  const TomlDocument doc(toml_text, origin);
  const TomlTable root = doc.root();
  root.only_keys({"train"});
  if (const TomlValue train = root.get("train")) {
    parse_train(train.table("a [train] table"), spec.train, origin);
  }
}

void apply_training_file(ModelSpec& spec, const std::filesystem::path& path,
                         const std::string& layers_from) {
  const TomlDocument doc(read_file(path), path.string());
  const TomlTable root = doc.root();
  root.only_keys({"model", "train", "data"});
  if (const TomlValue model_value = root.get("model")) {
    const TomlTable model = model_value.table("a [model] table with loss (and name)");
    if (model.get("layers") && model.get("input")) {
      apply_whole_spec(spec, path, layers_from);
      return;
    }
    for (std::string_view key : {"layers", "input", "init"}) {
      if (const TomlValue v = model.get(key)) {
        v.fail(fmt::format(
            "the model's {} come from {}: a training file beside it sets [train], [data] and "
            "model.loss only (a whole spec is trained by passing the spec itself)",
            key == "init"    ? "initial weights"
            : key == "input" ? "input shape"
                             : "layers",
            layers_from));
      }
    }
    model.only_keys({"name", "loss"});
    parse_name(model, spec);
    if (const TomlValue loss = model.get("loss")) parse_loss(loss, spec);
  }
  if (const TomlValue train = root.get("train")) {
    parse_train(train.table("a [train] table"), spec.train, path.string());
  }
  if (const TomlValue data = root.get("data")) {
    parse_data(data.table("a [data] table"), path.parent_path(), spec.data, spec.notes);
  }
}

ModelSpec parse_spec(const std::string& toml_text, const std::string& origin) {
  return parse(toml_text, origin, {});
}

ModelSpec load_spec_file(const std::filesystem::path& path) {
  return parse(read_file(path), path.string(), path.parent_path());
}

std::string data_source_argument(const std::string& text, const std::string& flag) {
  if (text.empty())
    throw UserError(fmt::format("{}: empty (expected a CSV file or a data source)", flag));
  if (text == kDiscSource || text == kFashionMnistSource || text == kImdbSyntheticSource)
    return text;
  for (std::string_view prefix : kPathPrefixes) {
    if (text.starts_with(prefix)) {
      if (text.size() == prefix.size()) {
        throw UserError(fmt::format("{} {}: empty path (expected {}PATH)", flag, text, prefix));
      }
      return text;
    }
  }
  // A file, as before sources could be named: its samples as tensors, or a CSV.
  if (text.ends_with(".safetensors")) return "safetensors:" + text;
  return "csv:" + text;
}

const char* loss_name(LossType t) {
  switch (t) {
    case LossType::CrossEntropy:
      return "cross_entropy";
    case LossType::BinaryCrossEntropy:
      return "bce";
    case LossType::MeanSquaredError:
      return "mse";
  }
  return "?";
}

ModelSpec resolve_spec(const std::string& name_or_path) {
  if (auto builtin = builtin_spec(name_or_path)) return *builtin;
  const std::filesystem::path path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return ext == ".onnx" ? load_onnx_spec(path) : load_spec_file(path);
  }
  const std::string builtins = fmt::format("{}", fmt::join(builtin_spec_names(), ", "));
  if (std::filesystem::exists(path, ec)) {
    throw UserError(
        fmt::format("{}: not a file (expected a TOML spec, an ONNX model or a built-in model: {})",
                    name_or_path, builtins));
  }
  // Something that looks like a path gets a path's message; a bare word may be a mistyped name.
  if (path.extension() == ".toml" || path.extension() == ".onnx" || path.has_parent_path()) {
    throw UserError(
        fmt::format("{}: spec file not found (built-in models: {})", name_or_path, builtins));
  }
  throw UserError(
      fmt::format("'{}' is neither a built-in model ({}) nor a spec file", name_or_path, builtins));
}

}  // namespace xo

// Parsing, validation and rendering of TOML model specs. Every error names the file, the line and
// the dotted key and says what was expected; unknown keys are errors, so a typo never passes.
#include "model/spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/file.h"

namespace xo {
namespace {

constexpr double kAdamWDefaultWeightDecay = 0.01;  // torch.optim.AdamW's default
constexpr std::string_view kDiscSource = "disc";
constexpr std::string_view kCsvPrefix = "csv:";
constexpr std::string_view kLossList = "cross_entropy, bce";
constexpr std::string_view kOptimizerList = "sgd, adam, adamw, rmsprop, adadelta";
constexpr double kAdadeltaDefaultEps = 1e-6;  // torch.optim.Adadelta's default
constexpr std::string_view kFashionMnistSource = "fashion-mnist";
constexpr std::string_view kImdbSyntheticSource = "imdb-synthetic";
constexpr std::string_view kIdxPrefix = "idx:";
constexpr std::string_view kImdbPrefix = "imdb:";
constexpr int64_t kMinClasses = 2;  // cross_entropy over one class is always zero
constexpr int kNoLine = 0;          // specs built in code have no lines
constexpr int kTopLine = 1;         // where a missing top-level table is reported

// "FILE:LINE: KEY: what" (or "FILE: KEY: what" when there is no line, as for built-in specs).
[[noreturn]] void fail_at(const std::string& origin, int line, const std::string& key,
                          const std::string& what) {
  if (line > kNoLine) throw UserError(fmt::format("{}:{}: {}: {}", origin, line, key, what));
  throw UserError(fmt::format("{}: {}: {}", origin, key, what));
}

// A TOML basic string: quotes, backslashes and control characters escaped, UTF-8 kept as is.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04X}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The shortest text that reads back as the same double, written as a TOML float ("0.0", not "0",
// so a reader sees a real-valued setting).
std::string float_text(double v) {
  std::string text = fmt::format("{}", v);
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

// Reads typed values out of toml++ tables; every failure becomes a UserError naming origin, line
// and dotted key. `missing_line` is where to point when a key is absent: its enclosing table.
class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(int line, const std::string& key, const std::string& what) const {
    fail_at(origin_, line, key, what);
  }

  static int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

  // Every key of `t` must be one of `allowed`. toml++ iterates keys alphabetically, so the first
  // unknown key in the file (by position) is the one reported.
  void only_keys(const toml::table& t, const std::string& path,
                 const std::vector<std::string_view>& allowed) const {
    const toml::key* first = nullptr;
    for (auto&& [key, value] : t) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      if (!first || key.source().begin < first->source().begin) first = &key;
    }
    if (!first) return;
    const toml::node& value = *t.get(first->str());
    fail(line_of(value), join(path, first->str()),
         fmt::format("unknown key (expected one of: {})", fmt::join(allowed, ", ")));
  }

  const toml::table* table(const toml::table& parent, const std::string& path, std::string_view key,
                           bool required, int missing_line, std::string_view expected) const {
    const toml::node* n = parent.get(key);
    if (!n) {
      if (required) {
        fail(missing_line, join(path, key), fmt::format("missing (expected {})", expected));
      }
      return nullptr;
    }
    const toml::table* t = n->as_table();
    if (!t) {
      fail(line_of(*n), join(path, key),
           fmt::format("got {} (expected {})", describe(*n), expected));
    }
    return t;
  }

  std::optional<int64_t> integer(const toml::table& t, const std::string& path,
                                 std::string_view key, bool required, int missing_line) const {
    const toml::node* n = present(t, path, key, required, missing_line, "an integer");
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<int64_t>()) return *v;
    fail(line_of(*n), join(path, key), fmt::format("got {} (expected an integer)", describe(*n)));
  }

  // A finite number; integers are accepted ("lr = 1" means 1.0). inf and nan, which TOML allows,
  // are refused: no hyperparameter here is meaningful with them.
  std::optional<double> number(const toml::table& t, const std::string& path,
                               std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    std::optional<double> v = n->value_exact<double>();
    if (!v) {
      if (auto i = n->value_exact<int64_t>()) v = static_cast<double>(*i);
    }
    if (!v || !std::isfinite(*v)) {
      fail(line_of(*n), join(path, key),
           fmt::format("got {} (expected a finite number)", describe(*n)));
    }
    return v;
  }

  std::optional<bool> boolean(const toml::table& t, const std::string& path,
                              std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<bool>()) return *v;
    fail(line_of(*n), join(path, key),
         fmt::format("got {} (expected true or false)", describe(*n)));
  }

  std::optional<std::string> string(const toml::table& t, const std::string& path,
                                    std::string_view key, bool required, int missing_line,
                                    std::string_view expected = "a string") const {
    const toml::node* n = present(t, path, key, required, missing_line, expected);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<std::string>()) return *v;
    fail(line_of(*n), join(path, key), fmt::format("got {} (expected {})", describe(*n), expected));
  }

  // How a value reads in a message: "the string \"4\"", "the float 4.5", "the list [0.9, 1.0]".
  static std::string describe(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array: {
        const toml::array& a = *n.as_array();
        if (a.empty()) return "an empty list";
        const std::string text = value_text(n);
        return text.size() <= kMaxQuotedList ? "the list " + text
                                             : fmt::format("a list of {} items", a.size());
      }
      case toml::node_type::string:
        return "the string " + value_text(n);
      case toml::node_type::integer:
        return "the integer " + value_text(n);
      case toml::node_type::floating_point:
        return "the float " + value_text(n);
      case toml::node_type::boolean:
        return "the boolean " + value_text(n);
      default:
        return "the date/time " + value_text(n);
    }
  }

 private:
  static constexpr size_t kMaxQuotedList = 40;  // longer lists are summarised by their size

  // A value as it would be written in TOML (tables abbreviated), for quoting in messages.
  static std::string value_text(const toml::node& n) {
    if (const auto* s = n.as_string()) return toml_string(**s);
    if (const auto* f = n.as_floating_point()) return float_text(**f);
    if (const auto* a = n.as_array()) {
      std::vector<std::string> items;
      for (const toml::node& item : *a) items.push_back(value_text(item));
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    if (n.is_table()) return "{...}";
    std::ostringstream text;
    n.visit([&](auto&& v) { text << v; });
    return text.str();
  }

  // The node for `key`, or nullptr when it is absent and optional.
  const toml::node* present(const toml::table& t, const std::string& path, std::string_view key,
                            bool required, int missing_line, std::string_view expected) const {
    const toml::node* n = t.get(key);
    if (!n && required) {
      fail(missing_line, join(path, key), fmt::format("missing (expected {})", expected));
    }
    return n;
  }

  std::string origin_;
};

// What each layer type is called in spec files and which keys it takes besides "type".
struct LayerInfo {
  LayerType type;
  std::string_view name;
  std::vector<std::string_view> keys;
};

const std::vector<LayerInfo>& layer_table() {
  static const std::vector<LayerInfo> table = {
      {LayerType::Linear, "linear", {"out", "bias"}},
      {LayerType::ReLU, "relu", {}},
      {LayerType::Tanh, "tanh", {}},
      {LayerType::Sigmoid, "sigmoid", {}},
      {LayerType::Conv2d, "conv2d", {"out", "kernel", "stride", "padding", "bias"}},
      {LayerType::MaxPool2d, "maxpool2d", {"kernel", "stride", "padding"}},
      {LayerType::AvgPool2d, "avgpool2d", {"kernel", "stride", "padding"}},
      {LayerType::Dropout, "dropout", {"p"}},
      {LayerType::Flatten, "flatten", {}},
      {LayerType::Embedding, "embedding", {"vocab", "out"}},
      {LayerType::LSTM, "lstm", {"out", "layers", "sequence"}},
      {LayerType::GlobalAvgPool, "global_avgpool", {}},
      {LayerType::GlobalMaxPool, "global_maxpool", {}},
      {LayerType::BatchNorm1d, "batchnorm1d", {"eps", "momentum"}},
      {LayerType::BatchNorm2d, "batchnorm2d", {"eps", "momentum"}},
  };
  return table;
}

const LayerInfo& layer_info(LayerType t) {
  for (const LayerInfo& info : layer_table()) {
    if (info.type == t) return info;
  }
  XO_ASSERT(false && "layer type missing from layer_table()");
}

std::string layer_type_list() {
  std::vector<std::string_view> names;
  for (const LayerInfo& info : layer_table()) names.push_back(info.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<LayerType> layer_type(std::string_view name) {
  for (const LayerInfo& info : layer_table()) {
    if (name == info.name) return info.type;
  }
  return std::nullopt;
}

std::vector<int64_t> parse_input(const Parser& p, const toml::table& model, int model_line) {
  constexpr std::string_view kExpected = "a non-empty list of positive integers, e.g. [2]";
  const toml::node* input = model.get("input");
  if (!input) p.fail(model_line, "model.input", fmt::format("missing (expected {})", kExpected));
  const toml::array* dims = input->as_array();
  if (!dims || dims->empty()) {
    p.fail(Parser::line_of(*input), "model.input",
           fmt::format("got {} (expected {})", Parser::describe(*input), kExpected));
  }
  std::vector<int64_t> shape;
  for (size_t i = 0; i < dims->size(); ++i) {
    const toml::node& dim = (*dims)[i];
    const auto v = dim.value_exact<int64_t>();
    if (!v || *v <= 0) {
      p.fail(Parser::line_of(dim), fmt::format("model.input[{}]", i),
             fmt::format("got {} (expected a positive integer)", Parser::describe(dim)));
    }
    shape.push_back(*v);
  }
  return shape;
}

LayerSpec parse_layer(const Parser& p, const toml::node& node, const std::string& path) {
  const int line = Parser::line_of(node);
  const toml::table* t = node.as_table();
  if (!t) {
    p.fail(line, path,
           fmt::format("got {} (expected a layer table such as {{ type = \"linear\", out = 4 }})",
                       Parser::describe(node)));
  }
  // Typos first, whatever the type: `{ typ = "relu" }` should name "typ", not a missing "type".
  std::vector<std::string_view> all_keys = {"type"};
  for (const LayerInfo& info : layer_table()) {
    for (std::string_view key : info.keys) {
      if (std::find(all_keys.begin(), all_keys.end(), key) == all_keys.end()) {
        all_keys.push_back(key);
      }
    }
  }
  p.only_keys(*t, path, all_keys);
  const std::string expected_type = fmt::format("the layer type, one of: {}", layer_type_list());
  const std::string name = *p.string(*t, path, "type", true, line, expected_type);
  LayerSpec layer;
  layer.line = line;
  if (auto type = layer_type(name)) {
    layer.type = *type;
  } else {
    p.fail(Parser::line_of(*t->get("type")), path + ".type",
           fmt::format("unknown layer type '{}' (expected one of: {})", name, layer_type_list()));
  }
  const LayerInfo& info = layer_info(layer.type);
  for (auto&& [key, value] : *t) {
    if (key.str() == "type") continue;
    if (std::find(info.keys.begin(), info.keys.end(), key.str()) == info.keys.end()) {
      p.fail(Parser::line_of(value), Parser::join(path, key.str()),
             info.keys.empty()
                 ? fmt::format("a {} layer takes no '{}' (it has no settings)", name, key.str())
                 : fmt::format("a {} layer takes no '{}' (it takes: {})", name, key.str(),
                               fmt::join(info.keys, ", ")));
    }
  }
  auto has = [&](std::string_view key) {
    return std::find(info.keys.begin(), info.keys.end(), key) != info.keys.end();
  };
  // A positive integer; `fallback` (when > 0) makes the key optional.
  auto positive = [&](std::string_view key, int64_t fallback, std::string_view what) {
    auto v = p.integer(*t, path, key, fallback <= 0, line);
    if (!v) return fallback;
    if (*v <= 0) {
      p.fail(Parser::line_of(*t->get(key)), Parser::join(path, key),
             fmt::format("{} {} must be a positive integer", what, *v));
    }
    return *v;
  };
  if (has("out")) layer.out = positive("out", 0, "width");
  if (has("kernel")) layer.kernel = positive("kernel", 0, "kernel size");
  if (has("stride")) {
    const int64_t pool_default = layer.type == LayerType::Conv2d ? 1 : layer.kernel;
    layer.stride = positive("stride", pool_default, "stride");
  }
  if (has("padding")) {
    if (auto v = p.integer(*t, path, "padding", false, line)) {
      if (*v < 0) {
        p.fail(Parser::line_of(*t->get("padding")), path + ".padding",
               fmt::format("padding {} must be an integer >= 0", *v));
      }
      layer.padding = *v;
    }
  }
  if (has("bias")) layer.bias = p.boolean(*t, path, "bias").value_or(true);
  if (has("p")) {
    if (auto v = p.number(*t, path, "p")) {
      if (*v < 0 || *v >= 1) {
        p.fail(Parser::line_of(*t->get("p")), path + ".p",
               fmt::format("{} must be in [0, 1) (the probability of dropping an element)",
                           float_text(*v)));
      }
      layer.p = *v;
    }
  }
  if (has("eps")) {
    if (auto v = p.number(*t, path, "eps")) {
      if (!(*v > 0)) {
        p.fail(Parser::line_of(*t->get("eps")), path + ".eps",
               fmt::format("{} must be > 0 (added to the variance)", float_text(*v)));
      }
      layer.eps = *v;
    }
  }
  if (has("momentum")) {
    if (auto v = p.number(*t, path, "momentum")) {
      if (!(*v >= 0 && *v <= 1)) {
        p.fail(Parser::line_of(*t->get("momentum")), path + ".momentum",
               fmt::format("{} must be in [0, 1] (the batch's weight in the running statistics)",
                           float_text(*v)));
      }
      layer.momentum = *v;
    }
  }
  if (has("vocab")) layer.vocab = positive("vocab", 0, "vocabulary size");
  if (has("layers")) layer.layers = positive("layers", 1, "layer count");
  if (has("sequence")) layer.sequence = p.boolean(*t, path, "sequence").value_or(false);
  return layer;
}

void parse_model(const Parser& p, const toml::table& model, ModelSpec& spec) {
  const int model_line = Parser::line_of(model);
  p.only_keys(model, "model", {"name", "input", "layers", "loss"});
  if (auto name = p.string(model, "model", "name", false, model_line)) {
    if (name->empty()) {
      p.fail(Parser::line_of(*model.get("name")), "model.name",
             "empty name (expected a name such as \"disc-8\", or no name key to use the file's)");
    }
    spec.name = *name;
  }
  spec.input = parse_input(p, model, model_line);

  constexpr std::string_view kExpectedLayers =
      "a non-empty list of layer tables, e.g. [ { type = \"linear\", out = 2 } ]";
  const toml::node* layers = model.get("layers");
  if (!layers) {
    p.fail(model_line, "model.layers", fmt::format("missing (expected {})", kExpectedLayers));
  }
  const toml::array* list = layers->as_array();
  if (!list || list->empty()) {
    p.fail(Parser::line_of(*layers), "model.layers",
           fmt::format("got {} (expected {})", Parser::describe(*layers), kExpectedLayers));
  }
  spec.layers.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    spec.layers.push_back(parse_layer(p, (*list)[i], fmt::format("model.layers[{}]", i)));
  }

  const std::string expected_loss = fmt::format("the loss, one of: {}", kLossList);
  const std::string loss = *p.string(model, "model", "loss", true, model_line, expected_loss);
  if (loss == loss_name(LossType::CrossEntropy)) {
    spec.loss = LossType::CrossEntropy;
  } else if (loss == loss_name(LossType::BinaryCrossEntropy)) {
    spec.loss = LossType::BinaryCrossEntropy;
  } else {
    p.fail(Parser::line_of(*model.get("loss")), "model.loss",
           fmt::format("unknown loss '{}' (expected one of: {})", loss, kLossList));
  }
}

void parse_optimizer(const Parser& p, const toml::table& t, OptimizerSpec& o) {
  const std::string path = "train.optimizer";
  const int line = Parser::line_of(t);
  const std::string expected_type = fmt::format("one of: {}", kOptimizerList);
  o.type = p.string(t, path, "type", false, line, expected_type).value_or("sgd");
  if (o.type == "sgd") {
    p.only_keys(t, path, {"type", "lr", "momentum", "dampening", "nesterov", "weight_decay"});
  } else if (o.type == "adam" || o.type == "adamw") {
    p.only_keys(t, path, {"type", "lr", "beta1", "beta2", "betas", "eps", "weight_decay"});
    if (o.type == "adamw") o.weight_decay = kAdamWDefaultWeightDecay;
  } else if (o.type == "rmsprop") {
    p.only_keys(t, path, {"type", "lr", "alpha", "eps", "weight_decay"});
  } else if (o.type == "adadelta") {
    p.only_keys(t, path, {"type", "lr", "rho", "eps", "weight_decay"});
    o.eps = kAdadeltaDefaultEps;
  } else {
    p.fail(Parser::line_of(*t.get("type")), path + ".type",
           fmt::format("unknown optimizer '{}' (expected one of: {})", o.type, kOptimizerList));
  }
  auto key_line = [&](std::string_view key) { return Parser::line_of(*t.get(key)); };
  auto key_path = [&](std::string_view key) { return Parser::join(path, key); };

  if (auto v = p.number(t, path, "lr")) {
    if (*v <= 0) {
      p.fail(key_line("lr"), key_path("lr"), fmt::format("{} must be > 0", float_text(*v)));
    }
    o.lr = *v;
  }
  // Momentum and Adam's betas are decay factors: 1 or more would never forget (or diverge).
  auto unit_interval = [&](std::string_view key, double& field) {
    if (auto v = p.number(t, path, key)) {
      if (*v < 0 || *v >= 1) {
        p.fail(key_line(key), key_path(key), fmt::format("{} must be in [0, 1)", float_text(*v)));
      }
      field = *v;
    }
  };
  unit_interval("momentum", o.momentum);
  unit_interval("beta1", o.beta1);
  unit_interval("beta2", o.beta2);
  unit_interval("alpha", o.alpha);
  unit_interval("rho", o.rho);
  if (const toml::node* betas = t.get("betas")) {
    for (std::string_view key : {"beta1", "beta2"}) {
      if (t.contains(key)) {
        p.fail(key_line(key), key_path(key),
               "given twice: betas already sets it (expected either betas = [b1, b2] or "
               "beta1/beta2)");
      }
    }
    const toml::array* a = betas->as_array();
    const auto b1 = a && a->size() == 2 ? (*a)[0].value<double>() : std::nullopt;
    const auto b2 = a && a->size() == 2 ? (*a)[1].value<double>() : std::nullopt;
    auto in_unit = [](std::optional<double> b) { return b && *b >= 0 && *b < 1; };
    if (!in_unit(b1) || !in_unit(b2)) {
      p.fail(Parser::line_of(*betas), key_path("betas"),
             fmt::format("got {} (expected two numbers in [0, 1), e.g. [0.9, 0.999])",
                         Parser::describe(*betas)));
    }
    o.beta1 = *b1;
    o.beta2 = *b2;
  }
  if (auto v = p.number(t, path, "dampening")) {
    if (*v < 0 || *v > 1) {
      p.fail(key_line("dampening"), key_path("dampening"),
             fmt::format("{} must be in [0, 1]", float_text(*v)));
    }
    o.dampening = *v;
  }
  if (auto v = p.number(t, path, "eps")) {
    if (*v <= 0) {
      p.fail(key_line("eps"), key_path("eps"), fmt::format("{} must be > 0", float_text(*v)));
    }
    o.eps = *v;
  }
  if (auto v = p.number(t, path, "weight_decay")) {
    if (*v < 0) {
      p.fail(key_line("weight_decay"), key_path("weight_decay"),
             fmt::format("{} must be >= 0", float_text(*v)));
    }
    o.weight_decay = *v;
  }
  o.nesterov = p.boolean(t, path, "nesterov").value_or(false);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    p.fail(key_line("nesterov"), key_path("nesterov"),
           fmt::format("Nesterov momentum needs momentum > 0 and dampening = 0, got momentum {} "
                       "and dampening {} (torch.optim.SGD refuses this too)",
                       float_text(o.momentum), float_text(o.dampening)));
  }
}

void parse_train(const Parser& p, const toml::table& t, TrainSpec& train) {
  const int line = Parser::line_of(t);
  p.only_keys(t, "train", {"optimizer", "batch", "epochs", "shuffle", "seed"});
  const std::string expected_optimizer = fmt::format(
      "a table such as {{ type = \"sgd\", lr = 0.1 }}, type one of: {}", kOptimizerList);
  if (const toml::table* opt = p.table(t, "train", "optimizer", false, line, expected_optimizer)) {
    parse_optimizer(p, *opt, train.optimizer);
  }
  auto positive = [&](std::string_view key, int64_t& field) {
    if (auto v = p.integer(t, "train", key, false, line)) {
      if (*v <= 0) {
        p.fail(Parser::line_of(*t.get(key)), Parser::join("train", key),
               fmt::format("{} must be a positive integer", *v));
      }
      field = *v;
    }
  };
  positive("batch", train.batch);
  positive("epochs", train.epochs);
  train.shuffle = p.boolean(t, "train", "shuffle").value_or(train.shuffle);
  if (auto seed = p.integer(t, "train", "seed", false, line)) {
    if (*seed < 0) {
      p.fail(Parser::line_of(*t.get("seed")), "train.seed",
             fmt::format("{} must be an integer >= 0", *seed));
    }
    train.seed = static_cast<uint64_t>(*seed);
  }
}

// `base` is the spec file's folder (empty for a spec given as text): a relative CSV path is
// relative to the spec, not to wherever crossover happens to run.
void parse_data(const Parser& p, const toml::table& t, const std::filesystem::path& base,
                DataSpec& data) {
  const int line = Parser::line_of(t);
  p.only_keys(t, "data", {"source", "samples", "test_samples"});
  const std::string expected_source =
      fmt::format("one of: \"{}\", \"csv:PATH\", \"{}\", \"idx:DIR\", \"imdb:DIR\", \"{}\"",
                  kDiscSource, kFashionMnistSource, kImdbSyntheticSource);
  if (auto source = p.string(t, "data", "source", false, line, expected_source)) {
    const int source_line = Parser::line_of(*t.get("source"));
    if (*source == kDiscSource || *source == kFashionMnistSource ||
        *source == kImdbSyntheticSource) {
      data.source = *source;
    } else if (source->starts_with(kCsvPrefix) || source->starts_with(kIdxPrefix) ||
               source->starts_with(kImdbPrefix)) {
      const size_t colon = source->find(':');
      const std::string prefix = source->substr(0, colon + 1);
      std::filesystem::path path = source->substr(colon + 1);
      if (path.empty()) {
        p.fail(source_line, "data.source",
               fmt::format("empty path (expected \"{}PATH\", e.g. \"{}data\")", prefix, prefix));
      }
      if (path.is_relative() && !base.empty()) path = (base / path).lexically_normal();
      data.source = prefix + path.string();
    } else {
      p.fail(source_line, "data.source",
             fmt::format("unknown source '{}' (expected {})", *source, expected_source));
    }
  }
  if (auto samples = p.integer(t, "data", "samples", false, line)) {
    if (*samples <= 0) {
      p.fail(Parser::line_of(*t.get("samples")), "data.samples",
             fmt::format("{} must be a positive integer", *samples));
    }
    data.samples = *samples;
  }
  if (auto samples = p.integer(t, "data", "test_samples", false, line)) {
    if (*samples < 0) {
      p.fail(Parser::line_of(*t.get("test_samples")), "data.test_samples",
             fmt::format("{} must be an integer >= 0", *samples));
    }
    data.test_samples = *samples;
    // Only generated sources make a test split of a chosen size; files bring their own (or none).
    if (data.source != kDiscSource && data.source != kImdbSyntheticSource) {
      p.fail(Parser::line_of(*t.get("test_samples")), "data.test_samples",
             fmt::format("only generated sources (disc, imdb-synthetic) take test_samples; '{}' "
                         "has its own test split or none",
                         data.source));
    }
  }
}

ModelSpec parse(const std::string& text, const std::string& origin,
                const std::filesystem::path& base) {
  const Parser p(origin);
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}: TOML syntax error (column {}): {}", origin,
                                e.source().begin.line, e.source().begin.column, e.description()));
  }
  p.only_keys(root, "", {"model", "train", "data"});
  ModelSpec spec;
  spec.origin = origin;
  spec.name = std::filesystem::path(origin).stem().string();
  const toml::table* model =
      p.table(root, "", "model", true, kTopLine, "a [model] table with input, layers and loss");
  parse_model(p, *model, spec);
  if (const toml::table* train = p.table(root, "", "train", false, kTopLine, "a [train] table")) {
    parse_train(p, *train, spec.train);
  }
  if (const toml::table* data = p.table(root, "", "data", false, kTopLine, "a [data] table")) {
    parse_data(p, *data, base, spec.data);
  }
  infer_shapes(spec);
  return spec;
}

}  // namespace

ModelSpec parse_spec(const std::string& toml_text, const std::string& origin) {
  return parse(toml_text, origin, {});
}

ModelSpec load_spec_file(const std::filesystem::path& path) {
  return parse(read_file(path), path.string(), path.parent_path());
}

const char* layer_type_name(LayerType t) { return layer_info(t).name.data(); }

const char* loss_name(LossType t) { return t == LossType::CrossEntropy ? "cross_entropy" : "bce"; }

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
      // PyTorch's nn.LSTM: gates stacked in the order input, forget, cell, output.
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

// The output side of a convolution or pooling window: floor((n + 2 pad - k) / stride) + 1.
int64_t window_out(int64_t n, int64_t kernel, int64_t stride, int64_t padding) {
  return (n + 2 * padding - kernel) / stride + 1;
}

}  // namespace

std::vector<std::vector<int64_t>> infer_shapes(const ModelSpec& spec) {
  // Specs built in code (not parsed) reach here unchecked, so this validates everything it uses.
  const int first_line = spec.layers.empty() ? kNoLine : spec.layers.front().line;
  if (spec.input.empty()) fail_at(spec.origin, kNoLine, "model.input", "empty (expected a shape)");
  for (size_t i = 0; i < spec.input.size(); ++i) {
    if (spec.input[i] <= 0) {
      fail_at(spec.origin, kNoLine, fmt::format("model.input[{}]", i),
              fmt::format("{} must be a positive integer", spec.input[i]));
    }
  }
  if (spec.layers.empty()) {
    fail_at(spec.origin, kNoLine, "model.layers", "empty (expected at least one linear layer)");
  }
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> shape = spec.input;
  bool any_params = false;
  int64_t params = 0;  // checked for overflow so that no later size computation can overflow
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string key = fmt::format("model.layers[{}]", i);
    const char* name = layer_type_name(l.type);
    auto fail = [&](const std::string& what) { fail_at(spec.origin, l.line, key, what); };
    auto need_rank = [&](size_t rank, std::string_view example) {
      if (shape.size() != rank) {
        fail(fmt::format("{} needs an input of rank {} ({}), got [{}]", name, rank, example,
                         fmt::join(shape, ", ")));
      }
    };
    auto positive = [&](int64_t v, std::string_view field, std::string_view what) {
      if (v <= 0) {
        fail_at(spec.origin, l.line, fmt::format("{}.{}", key, field),
                fmt::format("{} {} must be a positive integer", what, v));
      }
    };
    // The spatial output of a window of l.kernel over [C, H, W]; every side must stay >= 1.
    auto windowed = [&](int64_t channels) {
      positive(l.kernel, "kernel", "kernel size");
      positive(l.stride, "stride", "stride");
      if (l.padding < 0 || (l.type != LayerType::Conv2d && 2 * l.padding > l.kernel)) {
        fail_at(spec.origin, l.line, key + ".padding",
                fmt::format("padding {} must be >= 0{}", l.padding,
                            l.type == LayerType::Conv2d ? "" : " and at most half the kernel"));
      }
      const int64_t h = window_out(shape[1], l.kernel, l.stride, l.padding);
      const int64_t w = window_out(shape[2], l.kernel, l.stride, l.padding);
      if (shape[1] + 2 * l.padding < l.kernel || shape[2] + 2 * l.padding < l.kernel) {
        fail(fmt::format("a {}x{} kernel does not fit the input [{}] with padding {}", l.kernel,
                         l.kernel, fmt::join(shape, ", "), l.padding));
      }
      return std::vector<int64_t>{channels, h, w};
    };
    switch (l.type) {
      case LayerType::Linear:
        need_rank(1, "features; add a flatten layer before it");
        positive(l.out, "out", "width");
        shape = {l.out};
        break;
      case LayerType::Conv2d:
        need_rank(3, "[channels, height, width]");
        positive(l.out, "out", "width");
        shape = windowed(l.out);
        break;
      case LayerType::MaxPool2d:
      case LayerType::AvgPool2d:
        need_rank(3, "[channels, height, width]");
        shape = windowed(shape[0]);
        break;
      case LayerType::Flatten: {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        shape = {n};
        break;
      }
      case LayerType::Embedding:
        if (i != 0) fail("embedding reads token ids, so it must be the first layer");
        need_rank(1, "[sequence length] of token ids");
        positive(l.vocab, "vocab", "vocabulary size");
        positive(l.out, "out", "width");
        shape = {shape[0], l.out};
        break;
      case LayerType::LSTM:
        need_rank(2, "[steps, features]; e.g. after an embedding");
        positive(l.out, "out", "width");
        positive(l.layers, "layers", "layer count");
        shape = l.sequence ? std::vector<int64_t>{shape[0], l.out} : std::vector<int64_t>{l.out};
        break;
      case LayerType::GlobalAvgPool:
      case LayerType::GlobalMaxPool:
        need_rank(2, "[steps, features]; e.g. an lstm with sequence = true");
        shape = {shape[1]};
        break;
      case LayerType::BatchNorm1d:
        if (shape.size() != 1 && shape.size() != 2) {
          fail(fmt::format("batchnorm1d normalises [channels] or [channels, length], got [{}]",
                           fmt::join(shape, ", ")));
        }
        break;
      case LayerType::BatchNorm2d:
        need_rank(3, "[channels, height, width]; e.g. after a conv2d");
        break;
      case LayerType::Dropout:
        if (!(l.p >= 0 && l.p < 1)) {
          fail_at(spec.origin, l.line, key + ".p", fmt::format("{} must be in [0, 1)", l.p));
        }
        break;
      case LayerType::ReLU:
      case LayerType::Tanh:
      case LayerType::Sigmoid:
        break;
    }
    const std::vector<int64_t>& in = shapes.empty() ? spec.input : shapes.back();
    for (const ParamShape& t : layer_parameters(l, in)) {
      int64_t n = 1;
      for (int64_t d : t.shape) {
        if (__builtin_mul_overflow(n, d, &n)) n = -1;
      }
      if (n < 0 || __builtin_add_overflow(params, n, &params)) {
        fail("too many parameters (more than 2^63)");
      }
      any_params = true;
    }
    shapes.push_back(shape);
  }
  if (!any_params) {
    fail_at(spec.origin, first_line, "model.layers",
            "no linear layer, only layers without parameters (expected at least one linear "
            "layer)");
  }
  const LayerSpec& last = spec.layers.back();
  const std::string last_key = fmt::format("model.layers[{}]", spec.layers.size() - 1);
  if (spec.loss == LossType::CrossEntropy && (shape.size() != 1 || shape[0] < kMinClasses)) {
    fail_at(spec.origin, last.line, last_key,
            fmt::format("cross_entropy needs the last layer to output one score per class, at "
                        "least {}, got [{}]",
                        kMinClasses, fmt::join(shape, ", ")));
  }
  if (spec.loss == LossType::BinaryCrossEntropy && shape != std::vector<int64_t>{1}) {
    fail_at(spec.origin, last.line, last_key,
            fmt::format("bce needs the last layer to output one score (a linear with out = 1), "
                        "got [{}]",
                        fmt::join(shape, ", ")));
  }
  return shapes;
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

ModelSpec resolve_spec(const std::string& name_or_path) {
  if (auto builtin = builtin_spec(name_or_path)) return *builtin;
  const std::filesystem::path path(name_or_path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return load_spec_file(path);
  const std::string builtins = fmt::format("{}", fmt::join(builtin_spec_names(), ", "));
  if (std::filesystem::exists(path, ec)) {
    throw UserError(
        fmt::format("{}: not a file (expected a TOML spec file or a built-in model: {})",
                    name_or_path, builtins));
  }
  // Something that looks like a path gets a path's message; a bare word may be a mistyped name.
  if (path.extension() == ".toml" || path.has_parent_path()) {
    throw UserError(
        fmt::format("{}: spec file not found (built-in models: {})", name_or_path, builtins));
  }
  throw UserError(
      fmt::format("'{}' is neither a built-in model ({}) nor a spec file", name_or_path, builtins));
}

namespace {

// One layer as an inline TOML table, with only the keys that differ from the defaults.
std::string layer_toml(const LayerSpec& l) {
  std::string out = fmt::format("{{ type = \"{}\"", layer_type_name(l.type));
  const LayerSpec defaults;
  switch (l.type) {
    case LayerType::Linear:
      out += fmt::format(", out = {}{}", l.out, l.bias ? "" : ", bias = false");
      break;
    case LayerType::Conv2d:
      out += fmt::format(", out = {}, kernel = {}", l.out, l.kernel);
      if (l.stride != 1) out += fmt::format(", stride = {}", l.stride);
      if (l.padding != 0) out += fmt::format(", padding = {}", l.padding);
      if (!l.bias) out += ", bias = false";
      break;
    case LayerType::MaxPool2d:
    case LayerType::AvgPool2d:
      out += fmt::format(", kernel = {}", l.kernel);
      if (l.stride != l.kernel) out += fmt::format(", stride = {}", l.stride);
      if (l.padding != 0) out += fmt::format(", padding = {}", l.padding);
      break;
    case LayerType::Dropout:
      out += fmt::format(", p = {}", float_text(l.p));
      break;
    case LayerType::Embedding:
      out += fmt::format(", vocab = {}, out = {}", l.vocab, l.out);
      break;
    case LayerType::BatchNorm1d:
    case LayerType::BatchNorm2d:
      if (l.eps != defaults.eps) out += fmt::format(", eps = {}", float_text(l.eps));
      if (l.momentum != defaults.momentum) {
        out += fmt::format(", momentum = {}", float_text(l.momentum));
      }
      break;
    case LayerType::LSTM:
      out += fmt::format(", out = {}", l.out);
      if (l.layers != defaults.layers) out += fmt::format(", layers = {}", l.layers);
      if (l.sequence) out += ", sequence = true";
      break;
    default:
      break;
  }
  return out + " }";
}

std::string optimizer_toml(const OptimizerSpec& o) {
  if (o.type == "sgd") {
    return fmt::format(
        "{{ type = \"sgd\", lr = {}, momentum = {}, dampening = {}, nesterov = {}, "
        "weight_decay = {} }}",
        float_text(o.lr), float_text(o.momentum), float_text(o.dampening), o.nesterov,
        float_text(o.weight_decay));
  }
  if (o.type == "rmsprop") {
    return fmt::format("{{ type = \"rmsprop\", lr = {}, alpha = {}, eps = {}, weight_decay = {} }}",
                       float_text(o.lr), float_text(o.alpha), float_text(o.eps),
                       float_text(o.weight_decay));
  }
  if (o.type == "adadelta") {
    return fmt::format("{{ type = \"adadelta\", lr = {}, rho = {}, eps = {}, weight_decay = {} }}",
                       float_text(o.lr), float_text(o.rho), float_text(o.eps),
                       float_text(o.weight_decay));
  }
  return fmt::format(
      "{{ type = {}, lr = {}, beta1 = {}, beta2 = {}, eps = {}, weight_decay = {} }}",
      toml_string(o.type), float_text(o.lr), float_text(o.beta1), float_text(o.beta2),
      float_text(o.eps), float_text(o.weight_decay));
}

}  // namespace

std::string to_toml(const ModelSpec& spec) {
  std::string out = "[model]\n";
  out += fmt::format("name = {}\n", toml_string(spec.name));
  out += fmt::format("input = [{}]\n", fmt::join(spec.input, ", "));
  out += "layers = [\n";
  for (const LayerSpec& l : spec.layers) out += fmt::format("  {},\n", layer_toml(l));
  out += fmt::format("]\nloss = \"{}\"\n\n[train]\n", loss_name(spec.loss));
  out += fmt::format("optimizer = {}\n", optimizer_toml(spec.train.optimizer));
  out += fmt::format("batch = {}\nepochs = {}\nshuffle = {}\nseed = {}\n\n", spec.train.batch,
                     spec.train.epochs, spec.train.shuffle, spec.train.seed);
  out += fmt::format("[data]\nsource = {}\nsamples = {}\n", toml_string(spec.data.source),
                     spec.data.samples);
  if (spec.data.test_samples > 0) out += fmt::format("test_samples = {}\n", spec.data.test_samples);
  return out;
}

}  // namespace xo

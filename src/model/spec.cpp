// Parsing and validation of TOML model specs. Every error names the file, the line and the dotted
// key, and says what was expected; unknown keys are errors, so a typo never passes silently.
#include "model/spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/file.h"

namespace xo {
namespace {

constexpr double kAdamWDefaultWeightDecay = 0.01;  // torch.optim.AdamW's default

class Parser {
 public:
  explicit Parser(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(int line, const std::string& key, const std::string& what) const {
    if (line > 0) throw UserError(fmt::format("{}:{}: {}: {}", origin_, line, key, what));
    throw UserError(fmt::format("{}: {}: {}", origin_, key, what));
  }

  static int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

  // Every key of `t` must be one of `allowed`.
  void only_keys(const toml::table& t, const std::string& path,
                 const std::vector<std::string_view>& allowed) const {
    for (auto&& [key, value] : t) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
        fail(line_of(value), join(path, key.str()),
             fmt::format("unknown key (expected one of: {})", fmt::join(allowed, ", ")));
      }
    }
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

  const toml::table* table(const toml::table& parent, const std::string& path, std::string_view key,
                           bool required, int missing_line) const {
    const toml::node* n = parent.get(key);
    if (!n) {
      if (required) fail(missing_line, join(path, key), "missing (expected a table)");
      return nullptr;
    }
    const toml::table* t = n->as_table();
    if (!t)
      fail(line_of(*n), join(path, key), fmt::format("expected a table, got {}", type_name(*n)));
    return t;
  }

  std::optional<int64_t> integer(const toml::table& t, const std::string& path,
                                 std::string_view key, bool required, int missing_line) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(missing_line, join(path, key), "missing (expected an integer)");
      return std::nullopt;
    }
    if (auto v = n->value_exact<int64_t>()) return *v;
    fail(line_of(*n), join(path, key), fmt::format("expected an integer, got {}", describe(*n)));
  }

  std::optional<double> number(const toml::table& t, const std::string& path, std::string_view key,
                               bool required, int missing_line) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(missing_line, join(path, key), "missing (expected a number)");
      return std::nullopt;
    }
    if (auto v = n->value_exact<double>()) return *v;
    if (auto v = n->value_exact<int64_t>()) return static_cast<double>(*v);
    fail(line_of(*n), join(path, key), fmt::format("expected a number, got {}", describe(*n)));
  }

  std::optional<bool> boolean(const toml::table& t, const std::string& path,
                              std::string_view key) const {
    const toml::node* n = t.get(key);
    if (!n) return std::nullopt;
    if (auto v = n->value_exact<bool>()) return *v;
    fail(line_of(*n), join(path, key), fmt::format("expected true or false, got {}", describe(*n)));
  }

  std::optional<std::string> string(const toml::table& t, const std::string& path,
                                    std::string_view key, bool required, int missing_line) const {
    const toml::node* n = t.get(key);
    if (!n) {
      if (required) fail(missing_line, join(path, key), "missing (expected a string)");
      return std::nullopt;
    }
    if (auto v = n->value_exact<std::string>()) return *v;
    fail(line_of(*n), join(path, key), fmt::format("expected a string, got {}", describe(*n)));
  }

  static std::string type_name(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::string:
        return "a string";
      case toml::node_type::integer:
        return "an integer";
      case toml::node_type::floating_point:
        return "a number with a fraction";
      case toml::node_type::boolean:
        return "a boolean";
      default:
        return "a date or time";
    }
  }

  static std::string describe(const toml::node& n) {
    std::ostringstream out;
    if (n.is_table() || n.is_array()) return type_name(n);
    n.visit([&](auto&& v) { out << v; });
    return fmt::format("{} ({})", type_name(n), out.str());
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

LayerType layer_type(const Parser& p, int line, const std::string& key, const std::string& name) {
  if (name == "linear") return LayerType::Linear;
  if (name == "relu") return LayerType::ReLU;
  if (name == "tanh") return LayerType::Tanh;
  if (name == "sigmoid") return LayerType::Sigmoid;
  p.fail(
      line, key,
      fmt::format("unknown layer type '{}' (expected one of: linear, relu, tanh, sigmoid)", name));
}

const char* layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::Linear:
      return "linear";
    case LayerType::ReLU:
      return "relu";
    case LayerType::Tanh:
      return "tanh";
    case LayerType::Sigmoid:
      return "sigmoid";
  }
  return "?";
}

void parse_model(const Parser& p, const toml::table& model, int model_line, ModelSpec& spec) {
  p.only_keys(model, "model", {"name", "input", "layers", "loss"});
  if (auto name = p.string(model, "model", "name", false, model_line)) spec.name = *name;

  const toml::node* input = model.get("input");
  if (!input)
    p.fail(model_line, "model.input", "missing (expected a list of positive integers, e.g. [2])");
  const toml::array* dims = input->as_array();
  if (!dims || dims->empty()) {
    p.fail(Parser::line_of(*input), "model.input",
           fmt::format("expected a non-empty list of positive integers, got {}",
                       Parser::describe(*input)));
  }
  spec.input.clear();
  for (size_t i = 0; i < dims->size(); ++i) {
    const auto v = (*dims)[i].value_exact<int64_t>();
    if (!v || *v <= 0) {
      p.fail(Parser::line_of((*dims)[i]), fmt::format("model.input[{}]", i),
             fmt::format("expected a positive integer, got {}", Parser::describe((*dims)[i])));
    }
    spec.input.push_back(*v);
  }

  const toml::node* layers = model.get("layers");
  if (!layers) p.fail(model_line, "model.layers", "missing (expected a list of layer tables)");
  const toml::array* list = layers->as_array();
  if (!list || list->empty()) {
    p.fail(Parser::line_of(*layers), "model.layers",
           "expected a non-empty list of layer tables, e.g. [ { type = \"linear\", out = 4 } ]");
  }
  spec.layers.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = fmt::format("model.layers[{}]", i);
    const toml::node& node = (*list)[i];
    const int line = Parser::line_of(node);
    const toml::table* t = node.as_table();
    if (!t) {
      p.fail(line, path,
             fmt::format("expected a layer table like {{ type = \"relu\" }}, got {}",
                         Parser::describe(node)));
    }
    LayerSpec layer;
    layer.line = line;
    layer.type = layer_type(p, line, path + ".type", *p.string(*t, path, "type", true, line));
    if (layer.type == LayerType::Linear) {
      p.only_keys(*t, path, {"type", "out", "bias"});
      layer.out = *p.integer(*t, path, "out", true, line);
      if (layer.out <= 0) {
        p.fail(Parser::line_of(*t->get("out")), path + ".out",
               fmt::format("width {} must be a positive integer", layer.out));
      }
      layer.bias = p.boolean(*t, path, "bias").value_or(true);
    } else {
      p.only_keys(*t, path, {"type"});
    }
    spec.layers.push_back(layer);
  }

  const std::string loss = *p.string(model, "model", "loss", true, model_line);
  if (loss != "cross_entropy") {
    p.fail(Parser::line_of(*model.get("loss")), "model.loss",
           fmt::format("unknown loss '{}' (expected: cross_entropy)", loss));
  }
  spec.loss = LossType::CrossEntropy;
}

void parse_optimizer(const Parser& p, const toml::table& t, OptimizerSpec& o) {
  const std::string path = "train.optimizer";
  const int line = Parser::line_of(t);
  o.type = p.string(t, path, "type", false, line).value_or("sgd");
  if (o.type == "sgd") {
    p.only_keys(t, path, {"type", "lr", "momentum", "dampening", "nesterov", "weight_decay"});
  } else if (o.type == "adam" || o.type == "adamw") {
    p.only_keys(t, path, {"type", "lr", "beta1", "beta2", "betas", "eps", "weight_decay"});
    if (o.type == "adamw") o.weight_decay = kAdamWDefaultWeightDecay;
  } else {
    p.fail(Parser::line_of(*t.get("type")), path + ".type",
           fmt::format("unknown optimizer '{}' (expected one of: sgd, adam, adamw)", o.type));
  }
  auto key_line = [&](std::string_view key) { return Parser::line_of(*t.get(key)); };
  if (auto lr = p.number(t, path, "lr", false, line)) {
    if (*lr <= 0) p.fail(key_line("lr"), path + ".lr", fmt::format("{} must be positive", *lr));
    o.lr = *lr;
  }
  auto unit = [&](std::string_view key, double& field) {
    if (auto v = p.number(t, path, key, false, line)) {
      if (*v < 0 || *v >= 1) {
        p.fail(key_line(key), Parser::join(path, key), fmt::format("{} must be in [0, 1)", *v));
      }
      field = *v;
    }
  };
  unit("momentum", o.momentum);
  unit("beta1", o.beta1);
  unit("beta2", o.beta2);
  if (auto v = p.number(t, path, "dampening", false, line)) {
    if (*v < 0 || *v > 1) p.fail(key_line("dampening"), path + ".dampening", "must be in [0, 1]");
    o.dampening = *v;
  }
  if (const toml::node* betas = t.get("betas")) {
    const toml::array* a = betas->as_array();
    const auto b1 = a && a->size() == 2 ? (*a)[0].value<double>() : std::nullopt;
    const auto b2 = a && a->size() == 2 ? (*a)[1].value<double>() : std::nullopt;
    if (!b1 || !b2 || *b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1) {
      p.fail(Parser::line_of(*betas), path + ".betas",
             "expected two numbers in [0, 1), e.g. [0.9, 0.999]");
    }
    o.beta1 = *b1;
    o.beta2 = *b2;
  }
  if (auto v = p.number(t, path, "eps", false, line)) {
    if (*v <= 0) p.fail(key_line("eps"), path + ".eps", fmt::format("{} must be positive", *v));
    o.eps = *v;
  }
  if (auto v = p.number(t, path, "weight_decay", false, line)) {
    if (*v < 0) {
      p.fail(key_line("weight_decay"), path + ".weight_decay",
             fmt::format("{} must be zero or positive", *v));
    }
    o.weight_decay = *v;
  }
  o.nesterov = p.boolean(t, path, "nesterov").value_or(false);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    p.fail(key_line("nesterov"), path + ".nesterov",
           "Nesterov momentum needs momentum > 0 and dampening = 0 (as in torch.optim.SGD)");
  }
}

void parse_train(const Parser& p, const toml::table& t, TrainSpec& train) {
  const int line = Parser::line_of(t);
  p.only_keys(t, "train", {"optimizer", "batch", "epochs", "shuffle", "seed"});
  if (const toml::table* opt = p.table(t, "train", "optimizer", false, line)) {
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
             fmt::format("{} must be zero or positive", *seed));
    }
    train.seed = static_cast<uint64_t>(*seed);
  }
}

void parse_data(const Parser& p, const toml::table& t, const std::filesystem::path& base,
                DataSpec& data) {
  const int line = Parser::line_of(t);
  p.only_keys(t, "data", {"source", "samples"});
  if (auto source = p.string(t, "data", "source", false, line)) {
    const int source_line = Parser::line_of(*t.get("source"));
    constexpr std::string_view kCsv = "csv:";
    if (*source == "disc") {
      data.source = *source;
    } else if (source->rfind(kCsv, 0) == 0) {
      std::filesystem::path path = source->substr(kCsv.size());
      if (path.empty())
        p.fail(source_line, "data.source", "\"csv:\" needs a path, e.g. \"csv:train.csv\"");
      if (path.is_relative() && !base.empty()) path = base / path;
      data.source = std::string(kCsv) + path.string();
    } else {
      p.fail(source_line, "data.source",
             fmt::format("unknown source '{}' (expected \"disc\" or \"csv:PATH\")", *source));
    }
  }
  if (auto samples = p.integer(t, "data", "samples", false, line)) {
    if (*samples <= 0) {
      p.fail(Parser::line_of(*t.get("samples")), "data.samples",
             fmt::format("{} must be a positive integer", *samples));
    }
    data.samples = *samples;
  }
}

ModelSpec parse(const std::string& text, const std::string& origin,
                const std::filesystem::path& base) {
  const Parser p(origin);
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}: TOML syntax error: {}", origin, e.source().begin.line,
                                e.description()));
  }
  p.only_keys(root, "", {"model", "train", "data"});
  ModelSpec spec;
  spec.origin = origin;
  spec.name = std::filesystem::path(origin).stem().string();
  const toml::table* model = p.table(root, "", "model", true, 1);
  parse_model(p, *model, Parser::line_of(*model), spec);
  if (const toml::table* train = p.table(root, "", "train", false, 1))
    parse_train(p, *train, spec.train);
  if (const toml::table* data = p.table(root, "", "data", false, 1))
    parse_data(p, *data, base, spec.data);
  infer_shapes(spec);
  return spec;
}

std::string number_text(double v) { return fmt::format("{}", v); }

}  // namespace

ModelSpec parse_spec(const std::string& toml_text, const std::string& origin) {
  return parse(toml_text, origin, {});
}

ModelSpec load_spec_file(const std::filesystem::path& path) {
  return parse(read_file(path), path.string(), path.parent_path());
}

std::vector<std::vector<int64_t>> infer_shapes(const ModelSpec& spec) {
  auto fail = [&](int line, size_t index, const std::string& what) {
    const std::string key = fmt::format("model.layers[{}]", index);
    if (line > 0) throw UserError(fmt::format("{}:{}: {}: {}", spec.origin, line, key, what));
    throw UserError(fmt::format("{}: {}: {}", spec.origin, key, what));
  };
  if (spec.input.empty()) throw UserError(fmt::format("{}: model.input: missing", spec.origin));
  if (spec.layers.empty()) throw UserError(fmt::format("{}: model.layers: empty", spec.origin));
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> shape = spec.input;
  bool any_linear = false;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.type == LayerType::Linear) {
      if (shape.size() != 1) {
        fail(l.line, i,
             fmt::format("linear needs a flat input of rank 1, got [{}]", fmt::join(shape, ", ")));
      }
      if (l.out <= 0) fail(l.line, i, fmt::format("width {} must be a positive integer", l.out));
      shape = {l.out};
      any_linear = true;
    }
    shapes.push_back(shape);
  }
  if (!any_linear) {
    throw UserError(
        fmt::format("{}: model.layers: a model needs at least one linear layer", spec.origin));
  }
  if (spec.loss == LossType::CrossEntropy && (shape.size() != 1 || shape[0] < 2)) {
    const LayerSpec& last = spec.layers.back();
    fail(last.line, spec.layers.size() - 1,
         fmt::format("cross_entropy needs the last layer to output one score per class (at least "
                     "2), got [{}]",
                     fmt::join(shape, ", ")));
  }
  return shapes;
}

int64_t parameter_count(const ModelSpec& spec) {
  const auto shapes = infer_shapes(spec);
  int64_t width = 1, params = 0;
  for (int64_t d : spec.input) width *= d;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.type == LayerType::Linear) params += width * l.out + (l.bias ? l.out : 0);
    width = shapes[i].back();
  }
  return params;
}

ModelSpec resolve_spec(const std::string& name_or_path) {
  if (auto builtin = builtin_spec(name_or_path)) return *builtin;
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) return load_spec_file(name_or_path);
  const std::filesystem::path path(name_or_path);
  if (path.extension() == ".toml" || path.has_parent_path()) {
    throw UserError(fmt::format("{}: spec file not found (built-in models: {})", name_or_path,
                                fmt::join(builtin_spec_names(), ", ")));
  }
  throw UserError(fmt::format("'{}' is neither a built-in model ({}) nor a spec file", name_or_path,
                              fmt::join(builtin_spec_names(), ", ")));
}

std::string to_toml(const ModelSpec& spec) {
  std::string out = "[model]\n";
  out += fmt::format("name = \"{}\"\n", spec.name);
  out += fmt::format("input = [{}]\n", fmt::join(spec.input, ", "));
  out += "layers = [\n";
  for (const LayerSpec& l : spec.layers) {
    if (l.type == LayerType::Linear) {
      out += fmt::format("  {{ type = \"linear\", out = {}{} }},\n", l.out,
                         l.bias ? "" : ", bias = false");
    } else {
      out += fmt::format("  {{ type = \"{}\" }},\n", layer_type_name(l.type));
    }
  }
  out += "]\nloss = \"cross_entropy\"\n\n[train]\n";
  const OptimizerSpec& o = spec.train.optimizer;
  if (o.type == "sgd") {
    out += fmt::format(
        "optimizer = {{ type = \"sgd\", lr = {}, momentum = {}, dampening = {}, nesterov = {}, "
        "weight_decay = {} }}\n",
        number_text(o.lr), number_text(o.momentum), number_text(o.dampening), o.nesterov,
        number_text(o.weight_decay));
  } else {
    out += fmt::format(
        "optimizer = {{ type = \"{}\", lr = {}, beta1 = {}, beta2 = {}, eps = {}, "
        "weight_decay = {} }}\n",
        o.type, number_text(o.lr), number_text(o.beta1), number_text(o.beta2), number_text(o.eps),
        number_text(o.weight_decay));
  }
  out += fmt::format("batch = {}\nepochs = {}\nshuffle = {}\nseed = {}\n\n", spec.train.batch,
                     spec.train.epochs, spec.train.shuffle, spec.train.seed);
  out +=
      fmt::format("[data]\nsource = \"{}\"\nsamples = {}\n", spec.data.source, spec.data.samples);
  return out;
}

}  // namespace xo

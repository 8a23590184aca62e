#include "model/vary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/error.h"
#include "io/toml.h"
#include "model/layer_kinds.h"

namespace xo {
namespace {

bool is_disc(const ModelSpec& s) { return s.origin == "built-in" && s.name.rfind("disc-", 0) == 0; }

// A sweep trains one model per value on every device: more values than this is a typo (a range
// with a zero too many), not a sweep anyone waits for.
constexpr size_t kMaxVaryValues = 1000;

// The deepest MLP a depth sweep builds: far deeper than any that trains, small enough that copying
// its blocks is instant.
constexpr int64_t kMaxDepth = 1000;

int64_t parse_positive(const std::string& text, const std::string& whole) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || v <= 0) {
    throw UserError(fmt::format("--vary '{}': '{}' is not a positive integer", whole, text));
  }
  return v;
}

}  // namespace

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::Depth:
      return "depth";
    case Axis::Width:
      return "width";
    case Axis::Batch:
      return "batch";
    case Axis::Sequence:
      return "sequence";
  }
  return "?";
}

Axis parse_axis(const std::string& text) {
  for (Axis a : {Axis::Depth, Axis::Width, Axis::Batch, Axis::Sequence}) {
    if (text == axis_name(a)) return a;
  }
  throw UserError(
      fmt::format("unknown axis '{}' (expected depth, width, batch or sequence)", text));
}

AxisValues parse_vary(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) {
    throw UserError(
        fmt::format("--vary '{}': expected AXIS=V1,V2,... (e.g. batch=32,64,128)", text));
  }
  AxisValues out;
  out.axis = parse_axis(text.substr(0, eq));
  std::string list = text.substr(eq + 1);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, comma - start);
    if (const auto dots = item.find(".."); dots != std::string::npos) {
      const int64_t lo = parse_positive(item.substr(0, dots), text);
      const int64_t hi = parse_positive(item.substr(dots + 2), text);
      // hi - lo cannot overflow: both are positive. The count, not `v <= hi`, ends the loop, which
      // never ended for hi = INT64_MAX.
      if (hi < lo || hi - lo >= static_cast<int64_t>(kMaxVaryValues)) {
        throw UserError(fmt::format("--vary '{}': range '{}' must go up, over at most {} values",
                                    text, item, kMaxVaryValues));
      }
      for (int64_t k = 0; k <= hi - lo; ++k) out.values.push_back(lo + k);
    } else {
      out.values.push_back(parse_positive(item, text));
    }
    if (out.values.size() > kMaxVaryValues) {
      throw UserError(fmt::format("--vary '{}': {} values or more (expected at most {})", text,
                                  out.values.size(), kMaxVaryValues));
    }
    start = comma + 1;
  }
  return out;
}

namespace {

UserError cannot_vary(const ModelSpec& spec, Axis axis, const std::string& why) {
  return UserError(
      fmt::format("{} ({}): cannot vary {}: {}", spec.name, spec.origin, axis_name(axis), why));
}

// Every weighted layer but the output layer takes `width` outputs.
void set_hidden_width(ModelSpec& s, int64_t width) {
  int last = -1;
  for (int i = 0; i < static_cast<int>(s.layers.size()); ++i) {
    if (layer_kind(s.layers[i].type).has_weights) last = i;
  }
  int changed = 0;
  for (int i = 0; i < last; ++i) {
    if (layer_kind(s.layers[i].type).has_weights) {
      s.layers[i].out = width;
      ++changed;
    }
  }
  if (changed == 0)
    throw cannot_vary(s, Axis::Width, "it has no hidden layer (only its output layer has a width)");
}

// An MLP's layers with `depth` Linear layers: the block to repeat is the last Linear before the
// output Linear with what follows it, copied or dropped (from the front) as the depth asks.
std::vector<LayerSpec> mlp_layers_at_depth(const ModelSpec& s, int64_t depth) {
  std::vector<int> linears;
  for (int i = 0; i < static_cast<int>(s.layers.size()); ++i) {
    const LayerType t = s.layers[i].type;
    if (layer_kind(t).has_weights && t != LayerType::Linear)
      throw cannot_vary(s, Axis::Depth, "depth applies to MLPs (Linear layers only)");
    if (t == LayerType::Linear) linears.push_back(i);
  }
  if (linears.size() < 2) {
    throw cannot_vary(s, Axis::Depth,
                      "it needs a hidden Linear block before the output layer to repeat");
  }
  const int block_begin = linears[linears.size() - 2], block_end = linears.back();
  const std::vector<LayerSpec> block(s.layers.begin() + block_begin, s.layers.begin() + block_end);
  std::vector<LayerSpec> layers(s.layers.begin(), s.layers.begin() + block_begin);
  int64_t count = static_cast<int64_t>(linears.size()) - 2;  // Linear layers kept before it
  if (depth < 2) throw cannot_vary(s, Axis::Depth, "a depth below 2 leaves no hidden layer");
  // Each unit of depth copies a block of layers: a depth near INT64_MAX asked for more layers
  // than memory holds before any check of the model could refuse it.
  if (depth > kMaxDepth) {
    throw cannot_vary(s, Axis::Depth,
                      fmt::format("depth {} is more than {} Linear layers", depth, kMaxDepth));
  }
  // Drop blocks from the front when the model is deeper than asked.
  while (count > depth - 2) {
    // remove the last Linear block of `layers`
    int cut = -1;
    for (int i = static_cast<int>(layers.size()) - 1; i >= 0; --i) {
      if (layers[i].type == LayerType::Linear) {
        cut = i;
        break;
      }
    }
    layers.resize(static_cast<size_t>(cut));
    --count;
  }
  for (int64_t k = count; k < depth - 1; ++k)
    layers.insert(layers.end(), block.begin(), block.end());
  layers.push_back(s.layers[block_end]);
  layers.insert(layers.end(), s.layers.begin() + block_end + 1, s.layers.end());
  return layers;
}

}  // namespace

ModelSpec vary_spec(const ModelSpec& spec, Axis axis, int64_t value) {
  ModelSpec s = spec;
  switch (axis) {
    case Axis::Batch:
      s.train.batch = value;
      break;
    case Axis::Sequence:
      if (s.layers.empty() || s.layers.front().type != LayerType::Embedding) {
        throw cannot_vary(spec, axis, "its first layer is not an embedding of token sequences");
      }
      s.input = {value};
      break;
    case Axis::Width:
      set_hidden_width(s, value);
      break;
    case Axis::Depth:
      if (is_disc(spec)) {
        if (value < 2 || value > 12)
          throw cannot_vary(spec, axis, "disc models exist for depths 2 to 12");
        s = *builtin_spec(fmt::format("disc-{}", value));
        s.train = spec.train;
        s.data = spec.data;
        return s;
      }
      s.layers = mlp_layers_at_depth(spec, value);
      break;
  }
  s.name = fmt::format("{}[{}={}]", spec.name, axis_name(axis), value);
  // Initial weights from a file fit the spec's own shapes only: a grown model draws its own.
  if (axis == Axis::Width || axis == Axis::Depth) {
    s.init.clear();
    s.init_weights.reset();
  }
  infer_shapes(s);  // the layers must still chain
  return s;
}

namespace {

struct ShortKey {
  const char* name;
  std::vector<std::string> path;
};
const std::vector<ShortKey>& short_keys() {
  static const std::vector<ShortKey> keys = {
      {"lr", {"train", "optimizer", "lr"}},
      {"optimizer", {"train", "optimizer", "type"}},
      {"epochs", {"train", "epochs"}},
      {"seed", {"train", "seed"}},
  };
  return keys;
}

std::vector<std::string> split_dots(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Every parameter's shape, in order: what initial weights must match.
std::vector<std::vector<int64_t>> parameter_shapes(const ModelSpec& spec) {
  std::vector<std::vector<int64_t>> shapes;
  const auto outputs = infer_shapes(spec);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    for (ParamShape& p : layer_parameters(spec.layers[i], i == 0 ? spec.input : outputs[i - 1]))
      shapes.push_back(std::move(p.shape));
  }
  return shapes;
}

}  // namespace

SpecKey parse_spec_key(const std::string& text) {
  SpecKey key;
  key.text = text;
  for (Axis a : {Axis::Depth, Axis::Width, Axis::Batch, Axis::Sequence}) {
    if (text == axis_name(a)) key.axis = a;
  }
  if (key.axis) return key;
  for (const ShortKey& s : short_keys()) {
    if (text == s.name) key.path = s.path;
  }
  if (!key.path.empty()) return key;
  const std::vector<std::string> parts = split_dots(text);
  const bool empty_part =
      std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); });
  if (!empty_part && parts.size() >= 2 &&
      (parts[0] == "model" || parts[0] == "train" || parts[0] == "data")) {
    key.path = parts;
    return key;
  }
  if (!empty_part && parts.size() == 2) {
    if (auto type = layer_type_named(parts[0])) {
      key.layer_type = type;
      key.layer_key = parts[1];
      return key;
    }
  }
  throw UserError(fmt::format(
      "--vary: unknown key '{}' (expected an axis: depth, width, batch, sequence; a short name: "
      "lr, "
      "optimizer, epochs, seed; a dotted key of the spec file: train.optimizer.lr, train.batch, "
      "model.layers.N.out, data.validation_split, ...; or TYPE.KEY for every layer of a type: "
      "dropout.p, linear.out, ...)",
      text));
}

namespace {

// The dotted keys a TYPE.KEY names: that key of every layer of the type (but `out` of the output
// layer: it is the number of classes); else the key itself.
std::vector<std::vector<std::string>> key_paths(const ModelSpec& spec, const SpecKey& key,
                                                const std::string& what) {
  if (!key.layer_type) return {key.path};
  std::vector<std::vector<std::string>> paths;
  std::optional<size_t> output_layer;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (layer_kind(spec.layers[i].type).has_weights) output_layer = i;
  }
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (spec.layers[i].type != *key.layer_type) continue;
    if (key.layer_key == "out" && output_layer == i) continue;
    paths.push_back({"model", "layers", std::to_string(i), key.layer_key});
  }
  if (paths.empty()) {
    throw UserError(fmt::format("{}: {} has no {} layer{}", what, spec.name,
                                layer_type_name(*key.layer_type),
                                key.layer_key == "out" ? " besides the output layer" : ""));
  }
  return paths;
}

// The spec text read back. The reader's messages name its origin and a line of the text made
// here: they are said of the --vary argument instead.
ModelSpec parse_varied(const std::string& text, const std::string& what) {
  const std::string origin = "<vary>";  // a name no file has: the messages said of it
  try {
    return parse_spec(text, origin);
  } catch (const UserError& e) {
    std::string message = e.what();
    if (message.rfind(origin, 0) == 0) {
      size_t rest = origin.size();
      if (rest < message.size() && message[rest] == ':') {
        ++rest;
        while (rest < message.size() && std::isdigit(static_cast<unsigned char>(message[rest])))
          ++rest;
        if (rest < message.size() && message[rest] == ':') ++rest;
      }
      while (rest < message.size() && message[rest] == ' ') ++rest;
      message = fmt::format("{}: {}", what, message.substr(rest));
    }
    throw UserError(message);
  }
}

// Whether `key` sets the optimizer's kind (which starts another optimizer from its defaults).
bool sets_optimizer_type(const SpecKey& key) {
  return key.path == std::vector<std::string>{"train", "optimizer", "type"};
}

// `out`, read from `spec`'s text with values set, with what the text does not hold carried over:
// its origin and notes, and its initial weights where the parameter shapes stayed the same.
ModelSpec carried_over(ModelSpec out, const ModelSpec& spec) {
  out.origin = spec.origin;
  out.notes = spec.notes;
  if (!spec.init.empty() && parameter_shapes(out) == parameter_shapes(spec)) {
    out.init = spec.init;
    out.init_weights = spec.init_weights;
  } else {
    out.init.clear();
    out.init_weights.reset();
  }
  return out;
}

// `spec` with a key of its file set to `value`, through the spec's own text and reader, so that
// the value is checked as a spec file's is.
ModelSpec with_key_value(const ModelSpec& spec, const SpecKey& key, const std::string& value,
                         const std::string& what) {
  const std::vector<std::vector<std::string>> paths = key_paths(spec, key, what);
  std::string text = to_toml(spec);
  if (sets_optimizer_type(key)) {
    // Another optimizer takes other settings: it starts from its own defaults (PyTorch's), at
    // the spec's learning rate.
    text = toml_with_value(
        text, {"train", "optimizer"},
        fmt::format("{{ type = {}, lr = {} }}", value.front() == '"' ? value : toml_string(value),
                    toml_float(spec.train.optimizer.lr)),
        what);
  } else {
    for (const auto& path : paths) text = toml_with_value(text, path, value, what);
  }
  return carried_over(parse_varied(text, what), spec);
}

std::string vary_what(const SpecKey& key, const std::string& value) {
  return fmt::format("--vary {}={}", key.text, value);
}

// `name` with "KEY=VALUE" added to its brackets.
std::string tagged(const std::string& name, const SpecKey& key, const std::string& value) {
  const std::string tag = fmt::format("{}={}", key.text, value);
  return !name.empty() && name.back() == ']'
             ? fmt::format("{},{}]", name.substr(0, name.size() - 1), tag)
             : fmt::format("{}[{}]", name, tag);
}

// A key set with others on one reading of the spec's text: one whose value changes no layer's
// kind or number, so that the keys after it name the same layers (not an axis, not another
// optimizer, not a dotted key of the model's layers).
bool settable_together(const SpecKey& key) {
  if (key.axis) return false;
  if (key.layer_type) return key.layer_key != "type";
  return !key.path.empty() && key.path.front() != "model" && !sets_optimizer_type(key);
}

// settings[first, end), every one settable together, set on `spec` on one reading of its text.
ModelSpec with_values_together(const ModelSpec& spec, const std::vector<SpecSetting>& settings,
                               size_t first, size_t end) {
  std::vector<TomlSetting> values;
  std::vector<std::string> whats;
  for (size_t i = first; i < end; ++i) {
    const auto& [key, value] = settings[i];
    whats.push_back(vary_what(key, value));
    for (auto& path : key_paths(spec, key, whats.back()))
      values.push_back({std::move(path), value, whats.back()});
  }
  ModelSpec out;
  try {
    out = carried_over(parse_varied(toml_with_values(to_toml(spec), values),
                                    fmt::format("{}", fmt::join(whats, " "))),
                       spec);
  } catch (const UserError&) {
    // The value the reader refused: set one at a time, the first that fails says so. Where each
    // reads alone, it is their combination, as said.
    ModelSpec one = spec;
    for (size_t i = first; i < end; ++i)
      one = with_spec_value(one, settings[i].first, settings[i].second);
    throw;
  }
  out.name = spec.name;
  for (size_t i = first; i < end; ++i)
    out.name = tagged(out.name, settings[i].first, settings[i].second);
  return out;
}

}  // namespace

ModelSpec with_spec_values(const ModelSpec& spec, const std::vector<SpecSetting>& settings) {
  ModelSpec out = spec;
  for (size_t i = 0; i < settings.size();) {
    size_t end = i + 1;
    if (settable_together(settings[i].first)) {
      while (end < settings.size() && settable_together(settings[end].first)) ++end;
    }
    out = end - i == 1 ? with_spec_value(out, settings[i].first, settings[i].second)
                       : with_values_together(out, settings, i, end);
    i = end;
  }
  return out;
}

ModelSpec with_spec_value(const ModelSpec& spec, const SpecKey& key, const std::string& value) {
  const std::string what = vary_what(key, value);
  if (key.axis) {
    int64_t v = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, v);
    if (ec != std::errc() || ptr != end || v <= 0) {
      throw UserError(fmt::format("{}: {} takes a positive integer", what, key.text));
    }
    return vary_spec(spec, *key.axis, v);  // named as the sweep does (disc-N, "NAME[batch=256]")
  }
  ModelSpec out = with_key_value(spec, key, value, what);
  out.name = tagged(spec.name, key, value);
  return out;
}

}  // namespace xo

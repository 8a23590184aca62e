// `crossover import MODEL.onnx`: shows how an ONNX model maps onto crossover's layers and writes
// the equivalent spec (TOML) and its weights (safetensors), so that what was understood can be read
// and edited.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "model/layer_kinds.h"
#include "model/onnx_import.h"

namespace xo::cli {
namespace {

struct ImportOptions {
  std::string model, spec, weights;
};

// `to` as a path relative to the folder of `from_file` (how a spec names its weights).
std::string relative_path(const std::filesystem::path& to, const std::filesystem::path& from_file) {
  const std::filesystem::path folder = std::filesystem::absolute(from_file).parent_path();
  return std::filesystem::absolute(to).lexically_proximate(folder).string();
}

int run_import(const ImportOptions& o) {
  // Where the files go is checked before the model is read.
  if (!o.spec.empty()) check_writable_path(o.spec, "--spec");
  if (!o.weights.empty()) check_writable_path(o.weights, "--weights");
  const std::filesystem::path path(o.model);
  const OnnxGraph graph = read_onnx(path);
  OnnxImport imported = import_onnx(graph);
  const std::vector<std::string> sources = imported.sources;
  // With its training file, as `train` takes it; the weights move into spec.init_weights. Where
  // --spec writes that very file, its absence is not worth a note.
  const bool writes_training_file =
      !o.spec.empty() && std::filesystem::absolute(o.spec).lexically_normal() ==
                             std::filesystem::absolute(training_file_of(path)).lexically_normal();
  ModelSpec spec = onnx_training_spec(std::move(imported), path, !writes_training_file);
  const std::vector<NamedTensor>& weights = *spec.init_weights;
  const std::vector<std::vector<int64_t>> shapes = infer_shapes(spec);

  // Names below come from the ONNX file (its producer, node names): shown, never acted on.
  fmt::print("{} ({}, ONNX opset {}): {} layers, {} parameters, loss {}\n", terminal_safe(o.model),
             terminal_safe(graph.producer.empty() ? "unknown producer" : graph.producer),
             graph.opset, spec.layers.size(), group_digits(parameter_count(spec)),
             loss_name(spec.loss));
  fmt::print("  input [{}]\n", fmt::join(spec.input, ", "));
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    fmt::print("  {:>3}  {:<44} -> [{}]  from {}\n", i, layer_kind(l.type).describe(l),
               fmt::join(shapes[i], ", "), terminal_safe(sources[i]));
  }
  for (const std::string& note : spec.notes) fmt::print("note: {}\n", terminal_safe(note));

  if (!o.weights.empty()) {
    save_safetensors(o.weights, weights,
                     {{"format", "pt"}, {"model", spec.name}, {"producer", "crossover import"}});
    fmt::print("wrote {} ({} tensors, PyTorch names)\n", o.weights, weights.size());
  }
  if (!o.spec.empty()) {
    spec.notes.clear();
    spec.init = o.weights.empty() ? relative_path(path, o.spec) : relative_path(o.weights, o.spec);
    std::string text =
        fmt::format("# Imported by crossover {} from {}\n", CROSSOVER_VERSION, o.model);
    text += to_toml(spec);
    write_file_atomic(o.spec, text);
    fmt::print("wrote {} (the spec; its initial weights: {})\n", o.spec, spec.init);
    if (writes_training_file) {
      fmt::print(
          "`crossover train {}` takes its [train], [data] and loss from {} while its layers "
          "are the model's\n",
          o.model, o.spec);
    }
    if (spec.data.source.empty()) {
      fmt::print(stderr,
                 "note: {} has no [data] source yet: add one (source = \"csv:PATH\", "
                 "\"fashion-mnist\", …) before training it, or pass --data\n",
                 o.spec);
    }
  } else if (o.weights.empty()) {
    fmt::print("(--spec FILE and --weights FILE write the spec and its weights)\n");
  }
  return 0;
}

}  // namespace

Command add_import(CLI::App& app) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* sub = app.add_subcommand(
      "import",
      "Show how an ONNX model (from torch.onnx.export or tf2onnx) maps onto crossover's layers, "
      "and write the equivalent spec and weights");
  sub->add_option("model", o->model, "An ONNX model file")->required();
  sub->add_option("--spec", o->spec, "Write the equivalent spec (TOML) to this file");
  sub->add_option("--weights", o->weights,
                  "Write the model's weights (safetensors, PyTorch names) to this file; the spec "
                  "names it as its initial weights");
  return {sub, [o] { return run_import(*o); }};
}

}  // namespace xo::cli

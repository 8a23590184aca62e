// Maps an ONNX graph onto crossover's layers (see onnx_import.h for the table). The importer walks
// the data from the graph's input to its output, one node at a time, and keeps what the data is
// at each point: crossover's per-sample shape and how ONNX lays it out (batch first, time first
// around an LSTM, an LSTM's output with its direction axis, …). Inputs that are not the data must
// be constants: initializers, Constant nodes, or shape arithmetic over the data's shape, which is
// evaluated with the batch dimension standing as kBatch. The importer's pieces are the
// model/onnx_*.cpp files (model/onnx_importer.h); this file is the public API around them.
#include "model/onnx_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "model/onnx_importer.h"

namespace xo {
namespace {

bool has_extension(const std::filesystem::path& path, std::string_view ext) {
  std::string e = path.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e == ext;
}

}  // namespace

OnnxImport import_onnx(const OnnxGraph& graph) {
  OnnxImport out = onnx_importer::Importer(graph).run();
  out.spec.origin = graph.origin;
  out.spec.name = std::filesystem::path(graph.origin).stem().string();
  return out;
}

std::filesystem::path training_file_of(const std::filesystem::path& onnx) {
  std::filesystem::path training = onnx;
  training.replace_extension(".toml");
  return training;
}

ModelSpec onnx_training_spec(OnnxImport imported, const std::filesystem::path& path,
                             bool note_defaults) {
  ModelSpec spec = std::move(imported.spec);
  spec.init = path.string();
  // The weights were read with the graph: the model starts from them without reading it again.
  spec.init_weights = std::make_shared<const std::vector<NamedTensor>>(std::move(imported.weights));
  spec.data.source.clear();  // none until the training file names one (or --data)
  const std::filesystem::path training = training_file_of(path);
  std::error_code ec;
  if (std::filesystem::is_regular_file(training, ec)) {
    apply_training_file(spec, training, path.string());
  } else if (note_defaults) {
    spec.notes.push_back(fmt::format(
        "no {} beside it: training with crossover's defaults ({} lr {}, batch {}, {} epochs); set "
        "[train] and [data] there as in a spec, or use --epochs, --batch, --lr, --data",
        training.filename().string(), optimizer_type_name(spec.train.optimizer.type),
        spec.train.optimizer.lr, spec.train.batch, spec.train.epochs));
  }
  infer_shapes(spec);  // the loss against the output, with the training file's say
  return spec;
}

ModelSpec load_onnx_spec(const std::filesystem::path& path) {
  return onnx_training_spec(import_onnx(read_onnx(path)), path);
}

std::vector<NamedTensor> load_initial_weights(const std::filesystem::path& path) {
  if (has_extension(path, ".onnx")) return import_onnx(read_onnx(path)).weights;
  return load_safetensors(path);
}

}  // namespace xo

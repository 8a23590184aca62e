// A model exported to ONNX (torch.onnx.export, tf2onnx) as a crossover spec and its initial
// weights. The graph must be a chain from its one input to its one output of operators that map
// exactly onto crossover's layers:
//   Gemm, MatMul (+ Add)          linear (weights transposed where the file stores [in, out])
//   Conv                          conv2d (square kernel, equal strides and padding, no groups)
//   Relu, Tanh, Sigmoid           the activations
//   MaxPool, AveragePool          maxpool2d, avgpool2d; GlobalAveragePool/GlobalMaxPool as a pool
//                                 over the whole (square) map
//   Flatten, Reshape to [N, -1]   flatten
//   Dropout                       dropout (its ratio)
//   BatchNormalization            batchnorm1d / batchnorm2d (ONNX's momentum is 1 - PyTorch's)
//   Gather on a weight            embedding (the first layer, on token ids)
//   LSTM                          lstm: ONNX's gates (i, o, f, c) reordered to PyTorch's (i, f, g,
//                                 o); consecutive LSTM nodes become one lstm of several layers;
//                                 the batch/time Transposes and Squeezes around it are layout
//   Gather of the last step       lstm with sequence = false
//   ReduceMean, ReduceMax         global_avgpool, global_maxpool over a sequence's steps
//   Softmax, LogSoftmax, Sigmoid  at the very end: part of the loss (cross_entropy, bce)
// Constant side computations (the shape arithmetic of a Reshape, an LSTM's zero initial state)
// are evaluated. Anything else is refused with the node's name, its operator and what crossover
// supports; nothing is approximated.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/onnx.h"
#include "io/safetensors.h"
#include "model/spec.h"

namespace xo {

inline constexpr int64_t kMinOnnxOpset = 9;
inline constexpr int64_t kMaxOnnxOpset = 17;

struct OnnxImport {
  // The layers, input shape and loss (from a final Softmax or Sigmoid, else from the output
  // width: 1 is bce, more is cross_entropy); name and origin from the file; training defaults.
  ModelSpec spec;
  // The initializers under crossover's (PyTorch's) names and layouts: "0.weight" [out, in], …
  std::vector<NamedTensor> weights;
  // Per layer of spec.layers, the ONNX nodes it was mapped from ("/0/Gemm").
  std::vector<std::string> sources;
};

// Maps a read graph. Throws UserError naming graph.origin and the node for whatever cannot be
// mapped exactly.
OnnxImport import_onnx(const OnnxGraph& graph);

// An ONNX file as a spec to train: import_onnx, then the training file beside it (model.toml for
// model.onnx: [train], [data] and model.loss, as in a spec), or training defaults with a note.
// spec.init names the file, so the initializers are the initial weights.
ModelSpec load_onnx_spec(const std::filesystem::path& path);
// The same for a graph already imported from `path`; `note_defaults` false leaves out the note
// that no training file is beside it (`crossover import` about to write that file).
ModelSpec onnx_training_spec(OnnxImport imported, const std::filesystem::path& path,
                             bool note_defaults = true);
// The training file of an ONNX model: model.toml beside model.onnx.
std::filesystem::path training_file_of(const std::filesystem::path& onnx);

// The weights a spec's `init` names: a safetensors file, or an ONNX model's initializers.
std::vector<NamedTensor> load_initial_weights(const std::filesystem::path& path);

}  // namespace xo

// The work of a training step, as tables and predictions count it: FLOPs and bytes per node of a
// model, the optimizer's pass, the display names of nodes, and the weighted layers of a spec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace xo {

// What one node of the model does in a training step of `batch` samples: matmul FLOPs (forward,
// weight gradient, input gradient where one flows) and an estimate of the bytes it moves (f32
// activations, parameters and their gradients read and written once per use).
struct LayerWork {
  std::string name;  // e.g. "0 linear+relu"
  int node = 0;
  double flops = 0;
  double bytes = 0;
};

struct StepWork {
  int64_t batch = 0;
  std::vector<LayerWork> layers;  // nodes that do work (views excluded)
  double optimizer_bytes = 0;     // the optimizer's pass over parameters, gradients and state
  double flops = 0, bytes = 0;    // totals, optimizer included
};

StepWork step_work(const Model& model, int64_t batch);
StepWork step_work(const std::vector<Node>& nodes, const std::vector<ParamTensor>& tensors,
                   int64_t parameters, const OptimizerSettings& optimizer, int64_t batch);
// One node's work in a step of `batch` samples (its `node` index left 0).
LayerWork node_work(const Node& node, const std::vector<ParamTensor>& tensors, int64_t batch);
// Bytes per parameter the optimizer reads and writes in one step (SGD 12, with momentum 20, Adam
// and AdamW 28, RMSprop 20, Adadelta 28).
double optimizer_bytes_per_param(const OptimizerSettings& o);
// The display name of a node ("2 linear+relu", "5 dropout").
std::string node_name(const Node& node);

// Number of layers with parameters (the "L" of disc-L: its Linear layers), for tables.
int64_t weighted_layers(const ModelSpec& spec);

// Whether --precision bf16 changes any of the model's products on the CPU: a Conv2d, an LSTM, or
// a Linear past the small layers that stay f32 (backend/backend.h's cpu_bf16_linear).
bool bf16_changes_products(const ModelSpec& spec);

}  // namespace xo

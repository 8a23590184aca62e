// Optimizer settings: which torch.optim update rule and its hyperparameters. The spec parser fills
// them (it turns the type's name into the enum once); every backend's fused optimizer kernel reads
// them.
#pragma once

namespace xo {

enum class OptimizerType { SGD, Adam, AdamW, RMSprop, Adadelta };

// Every type, in the order spec files and messages list them.
inline constexpr OptimizerType kOptimizerTypes[] = {OptimizerType::SGD, OptimizerType::Adam,
                                                    OptimizerType::AdamW, OptimizerType::RMSprop,
                                                    OptimizerType::Adadelta};

// As spec files write it and as crossover prints it: "sgd", "adam", "adamw", "rmsprop", "adadelta".
const char* optimizer_type_name(OptimizerType type);

struct OptimizerSettings {
  OptimizerType type = OptimizerType::SGD;
  double lr = 0.1;
  // SGD, with PyTorch's semantics (torch.optim.SGD).
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // Adam / AdamW (torch.optim.Adam / AdamW). AdamW's decoupled decay uses weight_decay below.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;  // Adam, RMSprop, Adadelta (the parser applies Adadelta's 1e-6 default)
  // RMSprop (torch.optim.RMSprop, no momentum, not centered): the squared-gradient average's decay.
  double alpha = 0.99;
  // Adadelta (torch.optim.Adadelta): the decay of both running averages.
  double rho = 0.9;
  // L2 penalty for SGD/Adam (added to the gradient); decoupled decay for AdamW. PyTorch's default
  // for AdamW is 0.01; the parser applies that default when type = "adamw" and the key is absent.
  double weight_decay = 0.0;
};

inline constexpr double kAdamWDefaultWeightDecay = 0.01;  // torch.optim.AdamW's default
inline constexpr double kAdadeltaDefaultEps = 1e-6;       // torch.optim.Adadelta's default

// torch.optim's defaults for `type`, learning rate included (SGD 1e-3, Adam and AdamW 1e-3,
// RMSprop 1e-2, Adadelta 1.0): what `train --optimizer NAME` starts from, as
// `torch.optim.Adam(model.parameters())` would.
OptimizerSettings torch_defaults(OptimizerType type);

}  // namespace xo

// The names of the optimizer types.
#include "optim/optimizer.h"

#include "core/error.h"

namespace xo {

const char* optimizer_type_name(OptimizerType type) {
  switch (type) {
    case OptimizerType::SGD:
      return "sgd";
    case OptimizerType::Adam:
      return "adam";
    case OptimizerType::AdamW:
      return "adamw";
    case OptimizerType::RMSprop:
      return "rmsprop";
    case OptimizerType::Adadelta:
      return "adadelta";
  }
  XO_ASSERT(false && "optimizer type missing from optimizer_type_name");
}

OptimizerSettings torch_defaults(OptimizerType type) {
  OptimizerSettings o;
  o.type = type;
  switch (type) {
    case OptimizerType::SGD:
    case OptimizerType::Adam:
      o.lr = 1e-3;
      break;
    case OptimizerType::AdamW:
      o.lr = 1e-3;
      o.weight_decay = kAdamWDefaultWeightDecay;
      break;
    case OptimizerType::RMSprop:
      o.lr = 1e-2;
      break;
    case OptimizerType::Adadelta:
      o.lr = 1.0;
      o.eps = kAdadeltaDefaultEps;
      break;
  }
  return o;
}

}  // namespace xo

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

}  // namespace xo

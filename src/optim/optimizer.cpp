#include "optim/optimizer.h"

#include <fmt/format.h>

#include "core/error.h"

namespace xo {

OptimizerType optimizer_type(const OptimizerSpec& spec) {
  if (spec.type == "sgd") return OptimizerType::SGD;
  if (spec.type == "adam") return OptimizerType::Adam;
  if (spec.type == "adamw") return OptimizerType::AdamW;
  if (spec.type == "rmsprop") return OptimizerType::RMSprop;
  if (spec.type == "adadelta") return OptimizerType::Adadelta;
  throw UserError(fmt::format(
      "unknown optimizer '{}' (expected one of: sgd, adam, adamw, rmsprop, adadelta)", spec.type));
}

}  // namespace xo

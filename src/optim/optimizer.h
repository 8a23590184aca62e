// Optimizer settings, shared by the spec parser and every backend's fused optimizer kernel.
#pragma once

#include "model/spec.h"

namespace xo {

enum class OptimizerType { SGD, Adam, AdamW, RMSprop, Adadelta };

// Throws UserError for an unknown type name.
OptimizerType optimizer_type(const OptimizerSpec& spec);

}  // namespace xo

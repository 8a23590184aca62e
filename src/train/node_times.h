// Per-node timing after training: each node's forward and backward timed apart (a run's
// layer times, JSON "layers_profile"; not a device profile, measure/profile.h).
#pragma once

#include "backend/backend.h"
#include "model/model.h"
#include "train/trainer.h"

namespace xo {

// Times each node of an unsharded plan over `steps` steps (after 2 warm-ups) on the first batch of
// x and y (gradients are computed, the optimizer is not applied), keeping per-node medians in r.
void time_nodes(Model& model, const DeviceBuffer& x, const DeviceBuffer& y, int64_t batch,
                   int steps, TrainResult& r);

}  // namespace xo

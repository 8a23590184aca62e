// The training step, apart from the epoch bookkeeping around it (train/epoch.h).
#pragma once

#include "train/plan.h"
#include "train/state.h"

namespace xo {

// One training step of `w` (the plan's Network for the step, its rows and this rank's slice): the
// batch selected, forward, loss and backward (across ranks, the gradients summed), the optimizer's
// step. Its marks time the phases apart, except inside a recorded step (no clock).
void train_step(TrainPlan& p, const TrainPlan::StepSlice& w, BatchAt at, LossStats* stats,
                StepMarks marks);

}  // namespace xo

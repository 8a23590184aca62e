// One training step, as llm.c's loop reads: the batch selected, forward, loss, backward, the
// gradients reduced across ranks, the optimizer's update, each phase stamped (see step.h).
#include "train/step.h"

#include "train/data_parallel.h"

namespace xo {

void train_step(TrainPlan& p, const TrainPlan::StepSlice& w, BatchAt at, LossStats* stats,
                StepMarks marks) {
  const Batch batch = p.select_batch(w, at);
  marks.stamp(StepMarks::BatchSelected);
  DataParallel* ranks = p.data_parallel;
  if (w.net) {
    // Forward, loss, backward: the gradients overwritten; across ranks, summing them starts as
    // backward finishes each layer.
    w.net->train_step(batch.src, batch.labels, stats, ranks);
  } else {
    // A rank without rows of a partial batch adds nothing to the sum, and keeps its dropout
    // counter with the others'.
    p.backend.fill_zero(p.model.grads(), sizeof(float) * p.model.flat_size());
    p.backend.increment(p.model.step_counter());
  }
  marks.stamp(StepMarks::GradientsReady);
  // Every rank now holds the sum over the ranks (shared: every rank's gradients are complete, and
  // each sums its part as it steps it in update).
  if (ranks) ranks->finish_step();
  marks.stamp(StepMarks::Reduced);
  if (ranks) {
    ranks->update(*p.optimizer, p.model.params(), p.model.grads());
  } else {
    p.optimizer->step(p.model.params(), p.model.grads());
  }
}

}  // namespace xo

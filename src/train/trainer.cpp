// train_model: the plan built once, then epochs of steps. The step and the loop over an epoch's
// steps are here; planning is in plan.cpp, the bookkeeping between epochs in epoch.cpp.
#include "train/trainer.h"

#include <chrono>

#include "core/interrupt.h"
#include "train/epoch.h"
#include "train/memory.h"
#include "train/plan.h"
#include "train/profile.h"
#include "train/state.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

// Why the step loop left an epoch before its end.
enum class Stop { None, Interrupted, StepLimit };

// One training step on `net`. Its marks time the phases apart, except inside a recorded step.
void step(TrainPlan& p, Network& net, BatchAt at, StepMarks marks) {
  const Batch batch = p.select_batch(net, at);
  marks.stamp(StepMarks::BatchSelected);
  net.train_step(batch.src, batch.labels, p.stats);  // forward, loss, backward: grads overwritten
  marks.stamp(StepMarks::GradientsReady);
  // The gradients are ready: data-parallel training reduces them across ranks here.
  p.optimizer->step(p.model.params(), p.model.grads());
}

// Records the full-batch step where the backend can (a CUDA Graph), to replay it every step. A
// recorded step must find its batch without the host: from then on batches are gathered.
void record_step(TrainPlan& p) {
  p.recorded = p.backend.capture([&] { step(p, p.full, {.gather = true}, StepMarks()); });
  if (p.recorded) p.gather = true;
}

// The steps of the epoch under way, from state.step on, until its end, Ctrl-C, or max_steps in
// all (0: no limit).
Stop run_steps(TrainPlan& p, TrainState& state, int64_t max_steps) {
  while (state.step < p.steps_per_epoch) {
    if (stop_requested()) return Stop::Interrupted;
    const int64_t s = state.step;
    const StepMarks marks(p.clock.get(), s);
    marks.stamp(StepMarks::Start);
    if (p.replays(s)) {
      p.recorded->replay();
    } else {
      step(p, p.network(s), p.batch_at(s), marks);
    }
    marks.stamp(StepMarks::End);
    ++state.step;
    ++state.steps_taken;
    // A step boundary: a checkpoint would save TrainState, the model and the optimizer here.
    if (max_steps > 0 && state.steps_taken >= max_steps && state.step < p.steps_per_epoch) {
      return Stop::StepLimit;  // a partial epoch is not reported as an epoch
    }
  }
  return Stop::None;
}

}  // namespace

TrainResult train_model(Model& model, const Dataset& data, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  return train_model(model, DataSplit{data, {}}, train, on_epoch, exec);
}

TrainResult train_model(Model& model, const DataSplit& split, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  check_training(model, split, train);
  check_training_memory(model, split, train, exec);
  const auto setup_start = Clock::now();
  TrainPlan plan(model, split, train, exec);
  TrainState state = start_state(plan, train);
  if (exec.record_step && plan.full_steps > 0) record_step(plan);
  model.backend().synchronize();
  const double setup_seconds =
      std::chrono::duration<double, std::milli>(Clock::now() - setup_start).count() / 1e3;

  Stop stop = Stop::None;
  while (stop == Stop::None && state.epoch < train.epochs &&
         (exec.max_steps <= 0 || state.steps_taken < exec.max_steps)) {
    begin_epoch(plan, state, train.shuffle);
    stop = run_steps(plan, state, exec.max_steps);
    const double epoch_ms = read_step_times(plan, state);
    if (stop != Stop::None) break;
    const EpochRecord record = finish_epoch(plan, state, epoch_ms);
    if (on_epoch) on_epoch(record, train.epochs);
  }
  model.backend().synchronize();

  TrainResult r = make_result(plan, state, setup_seconds, stop == Stop::Interrupted);
  if (exec.profile_steps > 0 && !r.interrupted) {
    profile_nodes(model, plan.x, plan.y, plan.batch, exec.profile_steps, r);
  }
  return r;
}

}  // namespace xo

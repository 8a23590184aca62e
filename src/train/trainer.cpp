// train_model: the plan built once, then epochs of steps. The loop over an epoch's steps and over
// the epochs is here; the step itself (train_step) and the bookkeeping between epochs are in
// epoch.cpp, planning in plan.cpp.
#include "train/trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/interrupt.h"
#include "train/data_parallel.h"
#include "train/epoch.h"
#include "train/step.h"
#include "train/epoch_rules.h"
#include "train/memory.h"
#include "train/plan.h"
#include "train/node_times.h"
#include "train/state.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

// Why the step loop left an epoch before its end.
enum class Stop { None, Interrupted, StepLimit, Diverged, EarlyStopping };

// Records the full-batch step where the backend can (a CUDA Graph), to launch it as a whole every
// step. A recorded step must find its batch without the host: from then on batches are gathered.
void record_step(TrainPlan& p) {
  p.recorded =
      p.backend.capture([&] { train_step(p, p.slice(0), {.gather = true}, p.stats, StepMarks()); });
  if (p.recorded) p.gather = true;
}

// What the step loop does at step boundaries besides stepping.
struct Boundaries {
  int64_t max_steps = 0;    // stop after this many steps in all (0: no limit)
  int64_t check_every = 0;  // check the loss every this many steps (0: never)
  Checkpointer* checkpoints = nullptr;
};

// The steps of the epoch under way, from state.step on, until its end, Ctrl-C, a loss that is
// not finite, or the step limit.
Stop run_steps(TrainPlan& p, TrainState& state, const Boundaries& b) {
  while (state.step < p.steps_per_epoch) {
    if (p.stop_requested_everywhere()) return Stop::Interrupted;
    const int64_t s = state.step;
    const StepMarks marks(p.clock.get(), s);
    marks.stamp(StepMarks::Start);
    if (p.launches_recording(s)) {
      p.recorded->launch();
    } else {
      train_step(p, p.slice(s), p.batch_at(s), p.stats_for(s), marks);
    }
    marks.stamp(StepMarks::End);
    ++state.step;
    ++state.steps_taken;
    // A step boundary: the loss is checked before a checkpoint is taken, so that a checkpoint
    // never holds a diverged state. Across ranks the check is a collective and only rank 0
    // saves: every rank checks at the same steps.
    const bool save = b.checkpoints && b.checkpoints->due(state);
    if (b.check_every > 0 &&
        ((save && !p.data_parallel) || state.step == p.steps_per_epoch ||
         state.step % b.check_every == 0) &&
        !loss_finite(p, state)) {
      return Stop::Diverged;
    }
    if (save) {
      read_step_times(p, state);
      b.checkpoints->save(p, state);
    }
    if (b.max_steps > 0 && state.steps_taken >= b.max_steps && state.step < p.steps_per_epoch) {
      return Stop::StepLimit;  // a partial epoch is not reported as an epoch
    }
  }
  return Stop::None;
}

// The run's checks before anything is allocated: the training settings, a batch that every rank
// gets rows of, and the memory the plan will take.
void check_run(const Model& model, const DataSplit& split, const TrainSpec& train,
               const ExecutionOptions& exec) {
  check_training(model, split, train);
  DataParallel* ranks = exec.data_parallel;
  if (ranks && std::min(train.batch, split.train.samples) < ranks->ranks()) {
    throw UserError(fmt::format(
        "a batch of {} samples cannot be split across {} ranks: every rank needs at least one "
        "sample of each full batch (train.batch >= the rank count)",
        std::min(train.batch, split.train.samples), ranks->ranks()));
  }
  check_training_memory(model, split, train, exec);
}

// Every rank trains the same spec on the same data with the same settings, from rank 0's
// parameters.
void join_ranks(DataParallel& ranks, TrainPlan& plan, const TrainSpec& train,
                const ExecutionOptions& exec) {
  const RunFingerprint f = run_fingerprint(plan, train, exec.record_step);
  ranks.check_same(fmt::format("version {}\ndevice {}\nsettings {}\ndata {}\n{}", f.version,
                               f.device, f.settings, f.data, f.spec));
  ranks.share_model(plan.model);
  ranks.plan(plan.model);
}

// Resumes from the newest checkpoint where asked, and starts the checkpointer where the run takes
// checkpoints. Returns the step resumed at (0: none).
int64_t set_up_checkpoints(TrainPlan& plan, TrainState& state, const TrainSpec& train,
                           const ExecutionOptions& exec, std::optional<Checkpointer>& checkpoints) {
  int64_t resumed_at = 0;
  if (exec.checkpoint.dir.empty()) return resumed_at;
  const RunFingerprint fingerprint = run_fingerprint(plan, train, exec.record_step);
  if (exec.checkpoint.resume) {
    if (auto at = restore_checkpoint(plan, state, exec.checkpoint, fingerprint, train.epochs)) {
      resumed_at = *at;
      exec.checkpoint.tell(
          fmt::format("resuming {} from its checkpoint in {}: epoch {}, step {} of {} "
                      "({} steps taken)",
                      plan.model.spec().name, exec.checkpoint.dir.string(), state.epoch + 1,
                      state.step, plan.steps_per_epoch, state.steps_taken));
    }
  }
  // Across ranks every rank resumes from the same checkpoint; rank 0 alone writes them.
  DataParallel* ranks = exec.data_parallel;
  if (exec.checkpoint.every.enabled() && (!ranks || ranks->rank() == 0)) {
    checkpoints.emplace(plan, exec.checkpoint, fingerprint, state.steps_taken);
  }
  return resumed_at;
}

// The epochs from where the state stands to `last_epoch`, until one stops the run.
Stop run_epochs(TrainPlan& plan, TrainState& state, const TrainSpec& train, const EpochRules& rules,
                const Boundaries& boundaries, const EpochCallback& on_epoch, int64_t last_epoch) {
  Stop stop = Stop::None;
  // A checkpoint taken after early stopping decided (Ctrl-C in the last evaluation) resumes to
  // the end.
  if (state.early_stopping.stop) stop = Stop::EarlyStopping;
  while (stop == Stop::None && state.epoch < last_epoch &&
         (boundaries.max_steps <= 0 || state.steps_taken < boundaries.max_steps)) {
    if (!state.in_epoch) begin_epoch(plan, state, train.shuffle);
    stop = run_steps(plan, state, boundaries);
    read_step_times(plan, state);
    if (stop != Stop::None) break;
    const EpochRecord record = finish_epoch(plan, state);
    if (rules.after_epoch(plan, state, record)) stop = Stop::EarlyStopping;
    if (on_epoch) on_epoch(record, train.epochs);
    // A stop request during the epoch's evaluation: its training is kept, its test figures (cut
    // short) are NaN, and the run is interrupted even after its last epoch.
    if (plan.stop_requested_everywhere()) stop = Stop::Interrupted;
  }
  return stop;
}

// A pause: the run stopped between two epochs at --pause-after, before its last.
bool paused(Stop stop, const TrainState& state, const TrainSpec& train, int64_t last_epoch) {
  return stop == Stop::None && state.epoch < train.epochs && state.epoch == last_epoch;
}

// The result: the run's figures, the per-epoch rules' end (restore_best), how it stopped, its
// checkpoints and the per-node profile.
TrainResult result_of(TrainPlan& plan, const TrainState& state, const TrainSpec& train,
                      const ExecutionOptions& exec, const EpochRules& rules, Stop stop,
                      double setup_seconds, int64_t resumed_at, int64_t last_epoch,
                      const std::optional<Checkpointer>& checkpoints) {
  TrainResult r = make_result(plan, state, setup_seconds, stop == Stop::Interrupted);
  rules.finish(plan, state,
               stop == Stop::EarlyStopping || (stop == Stop::None && state.epoch == train.epochs),
               r);
  note_loss_checks(state, stop == Stop::Diverged, r);
  r.resumed_at_step = resumed_at;
  r.paused = paused(stop, state, train, last_epoch);
  // The step limit ends the run inside an epoch (StepLimit) or at an epoch's end before the last.
  r.step_limited = stop == Stop::StepLimit || (stop == Stop::None && state.epoch < last_epoch);
  if (checkpoints) {
    r.checkpoints_written = checkpoints->written();
    r.checkpoint_wait_ms = checkpoints->wait_ms();
  }
  if (exec.node_time_steps > 0 && !r.interrupted && !r.stopped_diverged) {
    time_nodes(plan.model, plan.x, plan.y, plan.batch, exec.node_time_steps, r);
  }
  return r;
}

}  // namespace

TrainResult train_model(Model& model, const Dataset& data, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  return train_model(model, DataSplit{data, {}}, train, on_epoch, exec);
}

TrainResult train_model(Model& model, const DataSplit& split, const TrainSpec& train,
                        const EpochCallback& on_epoch, const ExecutionOptions& exec) {
  check_run(model, split, train, exec);
  DataParallel* ranks = exec.data_parallel;
  const auto setup_start = Clock::now();
  if (ranks) ranks->share_gradients(model, train.optimizer);  // the plan's Networks write them
  TrainPlan plan(model, split, train, exec);
  if (ranks) join_ranks(*ranks, plan, train, exec);
  TrainState state = start_state(plan, train);
  const EpochRules rules(train, split.test.samples, split.validation.samples);
  rules.start(plan, state);
  // Across ranks the step is recorded only where its gradient sum is queued on the device (NCCL);
  // elsewhere the sum is an MPI call on the host, and the step is launched.
  if (exec.record_step && plan.full_steps > 0 && (!ranks || ranks->recordable())) {
    record_step(plan);
  }
  std::optional<Checkpointer> checkpoints;
  const int64_t resumed_at = set_up_checkpoints(plan, state, train, exec, checkpoints);
  // From here on the ranks of a machine may step one copy of the parameters (--reduce shared).
  if (ranks) ranks->share_parameters(model, *plan.optimizer);
  rules.apply_rate(plan, state);  // a resumed run's rate
  Boundaries boundaries{exec.max_steps, 0, checkpoints ? &*checkpoints : nullptr};
  if (exec.stop_on_nan) boundaries.check_every = loss_check_interval(plan.backend);
  model.backend().synchronize();
  const double setup_seconds =
      std::chrono::duration<double, std::milli>(Clock::now() - setup_start).count() / 1e3;

  const int64_t last_epoch =
      exec.pause_after_epochs > 0 ? std::min(exec.pause_after_epochs, train.epochs) : train.epochs;
  const Stop stop = run_epochs(plan, state, train, rules, boundaries, on_epoch, last_epoch);
  if (ranks) ranks->unshare(model, *plan.optimizer);
  model.backend().synchronize();
  // Ctrl-C or SIGTERM: the state at this step boundary is saved before the process ends, unless
  // the loss has gone bad since the last check (a collective across ranks: every rank checks).
  const bool save_interrupted = stop == Stop::Interrupted && !exec.checkpoint.dir.empty() &&
                                (boundaries.check_every == 0 || loss_finite(plan, state));
  if (checkpoints) {
    // From here a second Ctrl-C quits only once the stop's checkpoint is written.
    std::optional<QuitAfterThis> whole;
    if (save_interrupted) whole.emplace();
    if (save_interrupted) checkpoints->save(plan, state);
    // A pause: the state between two epochs is what the run goes on from.
    if (paused(stop, state, train, last_epoch)) checkpoints->save(plan, state);
    checkpoints->flush();
  }

  if (ranks) ranks->share_state(model);  // rank 0's running statistics, as evaluated
  TrainResult r = result_of(plan, state, train, exec, rules, stop, setup_seconds, resumed_at,
                            last_epoch, checkpoints);
  model.backend().release_threads();
  return r;
}

}  // namespace xo

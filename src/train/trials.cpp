// train_fused: one TrainPlan per trial for everything a trial does alone (its data order, loss
// sums, optimizer, schedule, early stopping, test evaluation and the epoch bookkeeping, as
// train_model keeps them), and one FusedNetwork for what the trials do together: the step's
// forward, loss and backward. Where the trials step apart (model/fused_network.h, fused_stepping: a
// CPU's convolutional models, and its small MLPs), each trial's plan has its own Network instead,
// as train_model's, and the group steps them in rounds, one trial after another or side by side
// on the workers.
#include "train/trials.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/interrupt.h"
#include "model/fused_network.h"
#include "train/checkpoint.h"
#include "train/epoch.h"
#include "train/epoch_rules.h"
#include "train/memory.h"
#include "train/plan.h"
#include "train/state.h"
#include "train/step.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

// How a trial left the group.
enum class End { Running, Completed, Paused, Diverged, EarlyStopping, Interrupted, StepLimit };

struct Trial {
  Trial(FusedTrial& t, const DataSplit& split, const ExecutionOptions& exec, const TrainPlan* data,
        bool apart)
      : spec(t),
        plan(*t.model, split, t.train, exec, {.data_of = data, .networks = apart}),
        state(start_state(plan, t.train)),
        rules(t.train, split.test.samples, split.validation.samples) {
    rules.start(plan, state);
  }
  // Resumes from the trial's newest checkpoint where asked, and starts its checkpointer.
  void set_up_checkpoints(DataFingerprints& fingerprints) {
    const CheckpointOptions& o = spec.checkpoint;
    if (!o.dir.empty()) {
      RunFingerprint fingerprint =
          run_fingerprint(plan, spec.train, false, fingerprints.of(plan.split));
      // Regrouped from a larger group, or into one, the trial goes on in other shards.
      fingerprint.shards_may_differ = true;
      if (o.resume) {
        if (auto at = restore_checkpoint(plan, state, o, fingerprint, spec.train.epochs)) {
          resumed_at = *at;
          o.tell(fmt::format(
              "resuming {} from its checkpoint in {}: epoch {}, step {} of {} ({} steps taken)",
              plan.model.spec().name, o.dir.string(), state.epoch + 1, state.step,
              plan.steps_per_epoch, state.steps_taken));
        }
      }
      if (o.every.enabled()) checkpoints.emplace(plan, o, fingerprint, state.steps_taken);
    }
    rules.apply_rate(plan, state);
  }
  void save() {
    if (!checkpoints) return;
    read_step_times(plan, state, *clock);
    checkpoints->save(plan, state);
  }
  FusedTrial& spec;
  TrainPlan plan;
  TrainState state;
  EpochRules rules;
  std::optional<Checkpointer> checkpoints;
  QueueClock* clock = nullptr;  // the group's: it times every trial's steps
  int64_t resumed_at = 0;
  int64_t last_epoch = 0;
  End end = End::Running;
};

// Where a trial stands, in words.
std::string place(const Trial& t) {
  return fmt::format("epoch {}, step {}{}", t.state.epoch + 1, t.state.step,
                     t.state.in_epoch ? "" : " (between epochs)");
}

// Whether trial a stands before trial b: at an earlier epoch, or an earlier step of the same one.
// Between two epochs and at an epoch's step 0 once it has begun are one place (every trial begins
// its epoch as it would have, from its own order).
bool before(const Trial& a, const Trial& b) {
  return std::pair(a.state.epoch, a.state.step) < std::pair(b.state.epoch, b.state.step);
}

// The trials stepping, and their Networks for a full and a partial batch; planned again whenever
// one leaves or others join. Trials resumed at different places (one fell back to an older
// checkpoint, its newest damaged; a kill while they saved) do not step apart: the ones furthest
// behind step as the group, the others wait where they stand and join it there, so that each trial
// takes every step in the group it would have taken it in.
struct Group {
  // Each trial steps its own plan's Networks (FusedStepping::OneAfterAnother, SideBySide): the
  // group has none of its own.
  bool apart = false;
  // apart: how many trials step at once, each on a worker of its own (1: one after another).
  int workers = 1;
  double trial_step_ms = 0;       // apart: the last round's time per trial and step (0: none yet)
  std::vector<double> round_ms;   // apart: the round's group steps, sized once per round length
  std::vector<double> worker_ms;  // apart: each worker's share of them
  std::vector<Trial*> active;
  // The step of the epoch under way where the active trials stop for waiting ones to join (the
  // epoch's steps: none waits in it).
  int64_t stop_at = 0;
  std::optional<FusedNetwork> full, partial;
  // The trials' own work (gather, loss, optimizer, step count) batched where the backend does it
  // (Backend::fused_step: a GPU's one launch for all the trials); null: trial by trial.
  std::unique_ptr<FusedStepKernel> batched_full, batched_partial;
  DeviceBuffer x, y;  // the active trials' batches, trial after trial
  std::vector<LossStats*> stats;
  // The full-batch step recorded where the backend can (a CUDA Graph), launched as a whole every
  // full step.
  std::unique_ptr<RecordedWork> recorded;
  // Every trial's step marks, stamped once for the group (each trial's times read from it).
  QueueClock* clock = nullptr;

  void plan(std::vector<std::unique_ptr<Trial>>& trials, int groups);
};

// A step of every active trial (a full batch, or the epoch's partial one): on the worker of its
// group, each trial gathers its batch from its own order, the group trains, and each trial steps
// its own optimizer once its gradients are complete; where the backend batches that work (a GPU),
// all the trials' gathers, losses and optimizer steps are one call each. The gather's and the
// optimizer's times are inside the forward and backward phase (data_ms and optimizer_ms read NaN).
// Queued on the backend, nothing read back: recordable, as train_model's step is.
void train_batches(Group& g, int64_t s) {
  const TrainPlan& first = g.active[0]->plan;
  const bool full = s < first.full_steps;
  FusedNetwork& network = full ? *g.full : *g.partial;
  float* x = g.x.as<float>();
  auto* y = g.y.as<int32_t>();
  if (FusedStepKernel* batched = full ? g.batched_full.get() : g.batched_partial.get()) {
    batched->gather(x, y);
    auto nothing = [](size_t) {};
    network.train_step(x, y, g.stats.data(), nothing, nothing, batched);
    batched->update();
    return;
  }
  Backend& be = first.backend;
  const int64_t f = first.features;
  const int64_t rows = full ? first.batch : first.samples % first.batch;
  auto gather = [&](size_t j) {
    TrainPlan& p = g.active[j]->plan;
    be.next_batch(p.x.as<float>(), p.y.as<int32_t>(), p.order.as<int32_t>(),
                  p.position.as<int64_t>(), rows, f, x + j * rows * f, y + j * rows);
    g.stats[j] = p.stats_for(full ? 0 : first.full_steps);
  };
  auto optimize = [&](size_t j) {
    TrainPlan& p = g.active[j]->plan;
    p.optimizer->step(p.model.params(), p.model.grads());
  };
  network.train_step(x, y, g.stats.data(), gather, optimize);
}

// The trials' own work batched for batches of `rows` (stats: the full batches' or the partial
// one's), where the backend batches it.
std::unique_ptr<FusedStepKernel> batched_work(const std::vector<Trial*>& active, int64_t rows,
                                              bool full) {
  const TrainPlan& first = active[0]->plan;
  FusedStepShape shape;
  shape.rows = rows;
  shape.row_floats = first.features;
  shape.loss = first.model.loss_kind();
  shape.classes = first.model.outputs();
  for (Trial* t : active) {
    TrainPlan& p = t->plan;
    shape.models.push_back({p.x.as<float>(), p.y.as<int32_t>(), p.order.as<int32_t>(),
                            p.position.as<int64_t>(), p.stats_for(full ? 0 : first.full_steps),
                            p.model.step_counter(), p.optimizer.get(), p.model.params(),
                            p.model.grads()});
  }
  return first.backend.fused_step(shape);
}

// The running trial furthest behind (null: none runs).
const Trial* furthest_behind(const std::vector<std::unique_ptr<Trial>>& trials) {
  const Trial* behind = nullptr;
  for (const auto& t : trials)
    if (t->end == End::Running && (!behind || before(*t, *behind))) behind = t.get();
  return behind;
}

// The running trials furthest behind, and where in their epoch the next waiting ones stand.
std::vector<Trial*> stepping_trials(std::vector<std::unique_ptr<Trial>>& trials, int64_t& stop_at) {
  std::vector<Trial*> stepping;
  const Trial* behind = furthest_behind(trials);
  if (!behind) return stepping;
  stop_at = behind->plan.steps_per_epoch;
  for (auto& t : trials) {
    if (t->end != End::Running) continue;
    if (!before(*behind, *t)) {
      stepping.push_back(t.get());
    } else if (t->state.epoch == behind->state.epoch) {
      stop_at = std::min(stop_at, t->state.step);
    }
  }
  return stepping;
}

void Group::plan(std::vector<std::unique_ptr<Trial>>& trials, int groups) {
  std::vector<Trial*> stepping = stepping_trials(trials, stop_at);
  // An epoch ended and no trial left: on a CPU the networks, their kernels and buffers stay (built
  // again they cost more than a step every epoch: docs/benchmarks.md, "A fused search's serial
  // costs"). A GPU's group still builds and records its step again, as it did when it last ran on
  // one (docs/benchmarks.md, "Not yet run on a GPU"). Trials that step apart have their Networks in
  // their plans.
  if (full && stepping == active && active[0]->plan.backend.info().kind == DeviceKind::Cpu) return;
  active = std::move(stepping);
  if (apart) {
    // Side by side each trial's kernels are one thread's; a trial left to step alone goes on with
    // every thread (in its one shard: the same arithmetic), and back to one when others join it.
    if (workers > 1) {
      const bool alone = active.size() == 1;
      for (Trial* t : active)
        if (t->plan.one_thread == alone) t->plan.plan_networks(1, !alone);
    }
    return;
  }
  recorded.reset();
  batched_full.reset();
  batched_partial.reset();
  full.reset();
  partial.reset();
  if (active.empty()) return;
  const TrainPlan& p = active[0]->plan;
  std::vector<const Model*> models;
  for (Trial* t : active) models.push_back(&t->plan.model);
  full.emplace(models, p.batch, groups);
  if (const int64_t tail = p.samples % p.batch) partial.emplace(models, tail, groups);
  if (full->groups() == 1) {
    batched_full = batched_work(active, p.batch, true);
    if (partial && batched_full) batched_partial = batched_work(active, p.samples % p.batch, false);
  }
  const auto n = static_cast<size_t>(p.batch) * active.size();
  x = p.backend.allocate(sizeof(float) * n * static_cast<size_t>(p.features));
  y = p.backend.allocate(sizeof(int32_t) * n);
  stats.assign(active.size(), nullptr);
  if (p.full_steps > 0) {
    recorded = p.backend.capture([&] { train_batches(*this, 0); });
  }
  // A recorded step launched whole stamps only its start and end (fused_step): no phases to read
  // back.
  for (Trial* t : active) t->plan.recorded_in_group = recorded != nullptr;
}

// One step of every active trial (train_batches, or its recording launched), its marks on the
// group's clock; a launched recording is timed as a whole, as train_model's is.
void fused_step(Group& g, int64_t s) {
  const bool full = s < g.active[0]->plan.full_steps;
  const StepMarks marks(g.clock, s);
  auto stamp = [&](StepMarks::Mark m) { marks.stamp(m); };
  stamp(StepMarks::Start);
  if (full && g.recorded) {
    g.recorded->launch();
  } else {
    stamp(StepMarks::BatchSelected);  // each trial's batch is gathered in train_batches
    train_batches(g, s);
    stamp(StepMarks::GradientsReady);
    stamp(StepMarks::Reduced);
  }
  stamp(StepMarks::End);
}

}  // namespace

std::string fusion_refusal(const std::vector<FusedTrial>& trials, const DataSplit& split) {
  if (trials.empty()) return "no trials to fuse";
  const Model& first = *trials[0].model;
  const int64_t samples = split.train.samples;
  const int64_t batch = std::min(trials[0].train.batch, samples);
  for (size_t i = 0; i < trials.size(); ++i) {
    const DataSplit& d = trials[i].data ? *trials[i].data : split;
    if (d.train.samples != samples || d.train.features != split.train.features ||
        d.test.samples != split.test.samples || d.validation.samples != split.validation.samples) {
      return fmt::format(
          "trial {} trains on {} samples of {} features ({} test, {} validation), the group on "
          "{} of {} ({}, {})",
          i + 1, d.train.samples, d.train.features, d.test.samples, d.validation.samples, samples,
          split.train.features, split.test.samples, split.validation.samples);
    }
  }
  for (size_t i = 1; i < trials.size(); ++i) {
    const Model& m = *trials[i].model;
    if (&m.backend() != &first.backend()) {
      return fmt::format("trial {} is on another device than trial 1", i + 1);
    }
    if (std::string why = models_differ(first, m); !why.empty()) {
      return fmt::format("trial {} has another architecture than trial 1: {}", i + 1, why);
    }
    if (const int64_t b = std::min(trials[i].train.batch, samples); b != batch) {
      return fmt::format("trial {} trains on batches of {}, trial 1 on batches of {}", i + 1, b,
                         batch);
    }
  }
  return {};
}

namespace {

using Trials = std::vector<std::unique_ptr<Trial>>;

// Trials resumed at different places: each trial ahead is told that it waits for the ones behind.
void tell_who_waits(const Trials& trials) {
  const Trial* behind = furthest_behind(trials);
  for (const auto& t : trials) {
    if (t->end != End::Running || !before(*behind, *t)) continue;
    t->spec.checkpoint.tell(fmt::format(
        "{} resumes at {}, ahead of a trial of its group at {}: it waits there while the trials "
        "behind catch up, then they go on as one",
        t->spec.model->spec().name, place(*t), place(*behind)));
  }
}

// Each trial's plan (the data on the device once per data set), resumed from its checkpoint where
// asked (Group: trials resumed at different places step as they would have). A trial resumed where
// it ended (stopped early, or paused at this rung already) is ended at once.
Trials plan_trials(std::vector<FusedTrial>& trials, const DataSplit& split,
                   const FusedOptions& options, FusedStepping stepping) {
  const bool apart = stepping != FusedStepping::Together;
  // Side by side, each trial in one batch shard, as together (model/fused_network.h), its kernels
  // on its worker's one thread; one after another in the shards it takes alone.
  ExecutionOptions exec;
  if (stepping == FusedStepping::SideBySide) {
    exec.shards = 1;
    exec.one_thread = true;
  }
  Trials planned;
  DataFingerprints own;
  DataFingerprints& fingerprints = options.fingerprints ? *options.fingerprints : own;
  for (FusedTrial& t : trials) {
    const DataSplit& data = t.data ? *t.data : split;
    const TrainPlan* data_of = nullptr;
    for (const auto& other : planned)
      if (&other->plan.split == &data) data_of = &other->plan;
    planned.push_back(std::make_unique<Trial>(t, data, exec, data_of, apart));
    Trial& trial = *planned.back();
    trial.last_epoch = options.pause_after_epochs > 0
                           ? std::min(options.pause_after_epochs, t.train.epochs)
                           : t.train.epochs;
    trial.set_up_checkpoints(fingerprints);
    if (trial.state.early_stopping.stop) trial.end = End::EarlyStopping;
    if (trial.end == End::Running && trial.state.epoch >= trial.last_epoch) {
      trial.end = trial.state.epoch < t.train.epochs ? End::Paused : End::Completed;
    }
  }
  tell_who_waits(planned);
  return planned;
}

// At bf16 on the CPU each trial's optimizer keeps its weights' bf16 copy: the copies move into one
// buffer laid out as pack_models laid out the parameters (model t's a stride after model t - 1's),
// so that a group's Linears and LSTMs read all their models' copies at once instead of converting
// the weights in every step. Each copy is written again by its trial's next update.
void group_weights_copies(const Trials& planned, Backend& be) {
  const size_t bytes = planned[0]->plan.optimizer->weights_copy_bytes();
  if (bytes == 0) return;
  const int64_t flat = planned[0]->plan.model.flat_size();
  XO_ASSERT(bytes == sizeof(uint16_t) * static_cast<size_t>(flat));
  const auto slot = sizeof(uint16_t) * static_cast<size_t>(model_stride(flat));
  const DeviceBuffer all = be.allocate(slot * planned.size());
  for (size_t t = 0; t < planned.size(); ++t) {
    OptimizerKernel& optimizer = *planned[t]->plan.optimizer;
    XO_ASSERT(optimizer.weights_copy_bytes() == bytes);
    optimizer.swap_weights_copy(all.view(t * slot, bytes));  // the view keeps `all`
  }
}

// Trials that step apart (Group::apart) go in rounds: each trial takes the round's steps, as
// train_model's, before another trial takes them on its worker (one after another: every trial on
// all the workers; side by side: each worker its share of the trials), so that a trial's tensors
// are still in the caches at its next step: the more steps a trial takes at a time, the nearer its
// trial-step comes to its step alone (docs/benchmarks.md, "The fused Linear's last passes and
// convolutional groups"). A round ends where the epoch, the step limit or the next checkpoint by
// steps says, and after about kRoundSeconds (from the last round's steps; the first round is a step
// long): a stop request waits for the round, so that every trial stands at the same step after it.
// A trial whose loss is not finite leaves the round (and the group) at that step, as it does alone.
// The group's step s is every trial's step s: its time is the busiest worker's share of theirs,
// each trial's plan timing its own.
constexpr int64_t kRoundSteps = 16;
constexpr double kRoundSeconds = 1.0;

// The steps of the next round: up to kRoundSteps, the epoch's end, the step limit and the next
// checkpoint by steps; the group's first round a step each, the next ones about kRoundSeconds
// long at the last round's time per trial-step.
int64_t round_length(const Group& group, const FusedOptions& options) {
  const Trial& lead = *group.active[0];
  int64_t n = std::min(kRoundSteps, group.stop_at - lead.state.step);
  if (options.max_steps > 0) n = std::min(n, options.max_steps - lead.state.steps_taken);
  const double round_ms = group.trial_step_ms * static_cast<double>(group.active.size()) /
                          static_cast<double>(group.workers);
  n = group.trial_step_ms > 0 ? std::min(n, static_cast<int64_t>(kRoundSeconds * 1e3 / round_ms))
                              : 1;
  for (const Trial* t : group.active)
    if (t->checkpoints) n = std::min(n, t->checkpoints->steps_until_due(t->state));
  return std::max<int64_t>(n, 1);
}

// The workers a round runs on, and worker w's trials (w, w + workers, ...): each trial on one
// worker for the whole round.
int round_workers(const Group& group) {
  return static_cast<int>(
      std::min<size_t>(static_cast<size_t>(group.workers), group.active.size()));
}
template <typename Body>
void on_worker(const Group& group, int w, Body&& body) {
  const auto workers = static_cast<size_t>(round_workers(group));
  for (size_t i = static_cast<size_t>(w); i < group.active.size(); i += workers)
    body(group.active[i]);
}

// n steps of every active trial, as train_model's, on the round's workers. A trial whose loss is
// not finite stops at that step (checked where run_steps checks, and at the round's end, where a
// checkpoint may follow).
void take_round(Group& group, int64_t n, const FusedOptions& options) {
  const int64_t steps = group.active[0]->plan.steps_per_epoch;
  const int64_t check_every = loss_check_interval(group.active[0]->plan.backend);
  auto take_steps = [&](Trial* t) {
    TrainPlan& p = t->plan;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t s = t->state.step;
      const StepMarks marks(p.clock.get(), s);
      marks.stamp(StepMarks::Start);
      train_step(p, p.slice(s), p.batch_at(s), p.stats_for(s), marks);
      marks.stamp(StepMarks::End);
      ++t->state.step;
      ++t->state.steps_taken;
      const int64_t step = t->state.step;
      if (options.stop_on_nan && (k + 1 == n || step == steps || step % check_every == 0) &&
          !loss_finite(p, t->state)) {
        t->end = End::Diverged;
        return;
      }
    }
  };
  const int workers = round_workers(group);
  if (workers > 1) {
    group.active[0]->plan.backend.parallel_shards(workers,
                                                  [&](int w) { on_worker(group, w, take_steps); });
  } else {
    for (Trial* t : group.active) take_steps(t);
  }
}

// The round's steps timed: the group's step s is every trial's step s, their times added up on
// each worker, the busiest worker's sum (every trial's record takes it); and the time per
// trial-step, from which the next round's length comes.
void time_round(Group& group, int64_t first, int64_t n) {
  const int workers = round_workers(group);
  std::vector<double>& group_ms = group.round_ms;
  group_ms.assign(static_cast<size_t>(n), 0.0);
  std::vector<double>& worker_ms = group.worker_ms;
  worker_ms.assign(static_cast<size_t>(n * workers), 0.0);
  double sum_ms = 0;
  int64_t trial_steps = 0;
  for (int w = 0; w < workers; ++w) {
    on_worker(group, w, [&](Trial* t) {
      for (int64_t s = first; s < t->state.step; ++s, ++trial_steps) {
        const StepMarks marks(t->plan.clock.get(), s);
        const double ms =
            t->plan.clock->ms_between(marks.at(StepMarks::Start), marks.at(StepMarks::End));
        const auto i = static_cast<size_t>(s - first);
        double& on = worker_ms[static_cast<size_t>(w * n) + i];
        on += ms;
        group_ms[i] = std::max(group_ms[i], on);
        sum_ms += ms;
      }
    });
  }
  for (Trial* t : group.active) add_step_times(t->plan, t->state, first, group_ms);
  group.trial_step_ms = sum_ms / static_cast<double>(trial_steps);
}

void run_rounds(Group& group, Trials& trials, const FusedOptions& options) {
  const int64_t steps = group.active[0]->plan.steps_per_epoch;
  while (!group.active.empty() && group.active[0]->state.step < group.stop_at) {
    if (stop_requested()) {
      for (Trial* t : group.active) {
        t->end = End::Interrupted;
        t->save();
      }
      return;
    }
    const int64_t first = group.active[0]->state.step;
    const int64_t taken = group.active[0]->state.steps_taken;
    const int64_t n = round_length(group, options);
    take_round(group, n, options);
    time_round(group, first, n);
    bool left = false, save = false;
    for (Trial* t : group.active) {
      left = left || t->end == End::Diverged;
      save = save || (t->end == End::Running && t->checkpoints && t->checkpoints->due(t->state));
    }
    if (save) {
      for (Trial* t : group.active)
        if (t->end == End::Running) t->save();
    }
    if (options.max_steps > 0 && taken + n >= options.max_steps && first + n < steps) {
      for (Trial* t : group.active)
        if (t->end == End::Running) t->end = End::StepLimit;
      left = true;
    }
    if (left) group.plan(trials, options.groups);
  }
}

// The steps of the epoch under way, until its end or a stop request. A trial whose loss is not
// finite leaves the group (planned again without it); every trial's checkpoint is taken at the
// same step, when any trial's interval says.
void run_steps(Group& group, Trials& trials, const FusedOptions& options) {
  if (group.apart) return run_rounds(group, trials, options);
  const int64_t steps = group.active[0]->plan.steps_per_epoch;
  const int64_t check_every = loss_check_interval(group.active[0]->plan.backend);
  while (!group.active.empty() && group.active[0]->state.step < group.stop_at) {
    if (stop_requested()) {
      for (Trial* t : group.active) {
        t->end = End::Interrupted;
        t->save();  // every loss so far checked finite
      }
      return;
    }
    fused_step(group, group.active[0]->state.step);
    bool save = false, left = false;
    for (Trial* t : group.active) {
      ++t->state.step;
      ++t->state.steps_taken;
      save = save || (t->checkpoints && t->checkpoints->due(t->state));
    }
    // Losses are checked where train_model checks them (each step on the CPU; on a GPU, where a
    // check waits for the device, every 256 steps and at the epoch's end), and before a checkpoint,
    // so a trial diverges at the step it does alone and no checkpoint holds a diverged state.
    const int64_t step = group.active[0]->state.step;
    if (options.stop_on_nan && (save || step == steps || step % check_every == 0)) {
      for (Trial* t : group.active) {
        if (!loss_finite(t->plan, t->state)) {
          t->end = End::Diverged;
          left = true;
        }
      }
    }
    if (save) {
      for (Trial* t : group.active)
        if (t->end == End::Running) t->save();
    }
    if (options.max_steps > 0 && group.active[0]->state.steps_taken >= options.max_steps &&
        group.active[0]->state.step < steps) {
      for (Trial* t : group.active)
        if (t->end == End::Running) t->end = End::StepLimit;
      left = true;
    }
    if (left) {
      for (Trial* t : group.active) read_step_times(t->plan, t->state, *group.clock);
      group.plan(trials, options.groups);
    }
  }
}

// Closes the epoch of every trial still training: its record, its schedule and early stopping,
// and whether it ends here (its epochs, a rung's pause, a stop request).
void finish_epochs(Group& group) {
  for (Trial* t : group.active) {
    read_step_times(t->plan, t->state, *group.clock);
    // Stopped inside the epoch for trials waiting there to join.
    if (t->end != End::Running || t->state.step < t->plan.steps_per_epoch) continue;
    const EpochRecord record = finish_epoch(t->plan, t->state);
    if (t->rules.after_epoch(t->plan, t->state, record)) t->end = End::EarlyStopping;
    if (t->spec.on_epoch) t->spec.on_epoch(record, t->spec.train.epochs);
    if (t->end == End::Running && t->state.epoch >= t->last_epoch) {
      t->end = t->state.epoch < t->spec.train.epochs ? End::Paused : End::Completed;
      if (t->end == End::Paused) t->save();  // where the next rung goes on from
    }
    if (t->end == End::Running && stop_requested()) {
      t->end = End::Interrupted;
      t->save();
    }
  }
}

TrainResult result_of(Trial& t, double setup_seconds, int group_size, bool apart) {
  TrainResult r = make_result(t.plan, t.state, setup_seconds, t.end == End::Interrupted);
  t.rules.finish(t.plan, t.state, t.end == End::Completed || t.end == End::EarlyStopping, r);
  note_loss_checks(t.state, t.end == End::Diverged, r);
  r.paused = t.end == End::Paused;
  r.step_limited = t.end == End::StepLimit;
  r.fused_trials = group_size;
  // Each trial's batch is gathered and its optimizer steps inside the group's forward and backward
  // phase (train_batches).
  r.data_ms = std::numeric_limits<double>::quiet_NaN();
  r.optimizer_ms = std::numeric_limits<double>::quiet_NaN();
  // Trials that step apart: the group's steps are timed whole (the sum of the trials' steps).
  if (apart) r.forward_backward_ms = std::numeric_limits<double>::quiet_NaN();
  r.resumed_at_step = t.resumed_at;
  if (t.checkpoints) {
    t.checkpoints->close();
    r.checkpoints_written = t.checkpoints->written();
    r.checkpoint_wait_ms = t.checkpoints->wait_ms();
  }
  return r;
}

}  // namespace

std::vector<TrainResult> train_fused(std::vector<FusedTrial>& trials, const DataSplit& split,
                                     const FusedOptions& options) {
  if (std::string why = fusion_refusal(trials, split); !why.empty()) {
    throw UserError("these trials cannot train as one: " + why);
  }
  std::set<const DataSplit*> data_sets;
  for (const FusedTrial& t : trials) {
    check_training(*t.model, t.data ? *t.data : split, t.train);
    data_sets.insert(t.data ? t.data : &split);
  }
  check_fused_memory(*trials[0].model, split, trials[0].train, static_cast<int64_t>(trials.size()),
                     static_cast<int64_t>(data_sets.size()));
  const auto setup_start = Clock::now();
  std::vector<Model*> models;
  for (FusedTrial& t : trials) models.push_back(t.model);
  const DeviceBuffer packed = pack_models(models);
  Backend& be = trials[0].model->backend();
  const Model& first = *trials[0].model;
  const FusedStepping stepping =
      options.stepping
          ? *options.stepping
          : fused_stepping(first.nodes(), first.tensors(),
                           std::min(trials[0].train.batch, split.train.samples), be.info().kind,
                           be.execution_policy(), static_cast<int>(trials.size()));
  const bool apart = stepping != FusedStepping::Together;
  Trials planned = plan_trials(trials, split, options, stepping);
  group_weights_copies(planned, be);
  const std::unique_ptr<QueueClock> clock =
      be.clock(static_cast<int>(StepMarks::kPerStep * planned[0]->plan.steps_per_epoch));
  for (auto& t : planned) t->clock = clock.get();
  Group group;
  group.apart = apart;
  if (stepping == FusedStepping::SideBySide)
    group.workers = std::max(1, be.execution_policy().shard_threads);
  group.clock = clock.get();
  group.plan(planned, options.groups);
  trials[0].model->backend().synchronize();
  const double setup_seconds =
      std::chrono::duration<double, std::milli>(Clock::now() - setup_start).count() / 1e3;
  // Every active trial is at the same epoch and step: they started together and leave only.
  while (!group.active.empty()) {
    for (Trial* t : group.active) {
      if (!t->state.in_epoch) begin_epoch(t->plan, t->state, t->spec.train.shuffle);
    }
    run_steps(group, planned, options);
    finish_epochs(group);
    for (Trial* t : group.active) {
      if (t->end == End::Running && options.max_steps > 0 &&
          t->state.steps_taken >= options.max_steps)
        t->end = End::StepLimit;
    }
    group.plan(planned, options.groups);
  }
  be.release_threads();
  std::vector<TrainResult> results;
  for (auto& t : planned) {
    results.push_back(result_of(*t, setup_seconds, static_cast<int>(planned.size()), apart));
  }
  return results;
}

}  // namespace xo

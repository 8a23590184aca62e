// The per-epoch rules (see schedule.h): PyTorch 1.13's StepLR, CosineAnnealingLR and
// ReduceLROnPlateau in their recursive forms, the ones scheduler.step() runs, and Keras's
// EarlyStopping. Each expression keeps PyTorch's (or Keras's) order of operations in doubles, so
// that both produce the same bits (src/CMakeLists.txt compiles this file without FMA contraction).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace xo {

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::Loss:
      return "loss";
    case Metric::ValLoss:
      return "val_loss";
    case Metric::ValAccuracy:
      return "val_accuracy";
    case Metric::TestLoss:
      return "test_loss";
    case Metric::TestAccuracy:
      return "test_accuracy";
  }
  XO_ASSERT(false && "metric missing from metric_name");
}

bool higher_is_better(Metric m) { return m == Metric::TestAccuracy || m == Metric::ValAccuracy; }
bool needs_test_split(Metric m) { return m == Metric::TestLoss || m == Metric::TestAccuracy; }
bool needs_validation_split(Metric m) { return m == Metric::ValLoss || m == Metric::ValAccuracy; }

const char* schedule_type_name(ScheduleType t) {
  switch (t) {
    case ScheduleType::Step:
      return "step";
    case ScheduleType::Cosine:
      return "cosine";
    case ScheduleType::Plateau:
      return "plateau";
  }
  XO_ASSERT(false && "schedule type missing from schedule_type_name");
}

namespace {

// The value no figure is worse than: ReduceLROnPlateau's and Keras's starting `best`.
double worst(Metric m) {
  return higher_is_better(m) ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity();
}

// Python's a % b for b > 0: never negative.
int64_t python_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

}  // namespace

LrSchedule::LrSchedule(const ScheduleSettings& settings, double initial_lr, int64_t epochs,
                       Metric monitor)
    : s_(settings),
      base_lr_(initial_lr),
      t_max_(settings.t_max > 0 ? settings.t_max : epochs),
      monitor_(monitor) {
  XO_ASSERT(t_max_ > 0);
}

ScheduleState LrSchedule::start() const {
  ScheduleState state;
  state.lr = base_lr_;
  state.best = worst(monitor_);
  return state;
}

bool LrSchedule::improves(double value, double best) const {
  // threshold_mode 'rel': better than best by the fraction `threshold`.
  if (higher_is_better(monitor_)) return value > best * (s_.threshold + 1.0);
  return value < best * (1.0 - s_.threshold);
}

void LrSchedule::step(ScheduleState& state, double value) const {
  const int64_t epoch = ++state.last_epoch;
  switch (s_.type) {
    case ScheduleType::Step:
      // StepLR.get_lr: the rate times gamma at every multiple of step_size.
      if (epoch % s_.step_size == 0) state.lr = state.lr * s_.gamma;
      return;
    case ScheduleType::Cosine: {
      // CosineAnnealingLR.get_lr. Past t_max the cosine climbs back up, as PyTorch's does.
      const double pi = std::numbers::pi;  // math.pi
      const auto t = static_cast<double>(t_max_);
      if (python_mod(epoch - 1 - t_max_, 2 * t_max_) == 0) {
        state.lr = state.lr + (base_lr_ - s_.eta_min) * (1 - std::cos(pi / t)) / 2;
      } else {
        const auto e = static_cast<double>(epoch);
        state.lr = (1 + std::cos(pi * e / t)) / (1 + std::cos(pi * (e - 1) / t)) *
                       (state.lr - s_.eta_min) +
                   s_.eta_min;
      }
      return;
    }
    case ScheduleType::Plateau: {
      // ReduceLROnPlateau.step: a NaN figure is never better, so it counts as a bad epoch.
      if (improves(value, state.best)) {
        state.best = value;
        state.num_bad_epochs = 0;
      } else {
        ++state.num_bad_epochs;
      }
      if (state.cooldown_counter > 0) {
        --state.cooldown_counter;
        state.num_bad_epochs = 0;  // bad epochs in cooldown are not counted
      }
      if (state.num_bad_epochs > s_.patience) {
        const double new_lr = std::max(state.lr * s_.factor, s_.min_lr);
        if (state.lr - new_lr > kPlateauMinReduction) state.lr = new_lr;
        state.cooldown_counter = s_.cooldown;
        state.num_bad_epochs = 0;
      }
      return;
    }
  }
}

EarlyStopping::EarlyStopping(const EarlyStoppingSettings& settings, Metric monitor)
    : s_(settings), monitor_(monitor) {}

EarlyStoppingState EarlyStopping::start() const {
  EarlyStoppingState state;
  state.best = worst(monitor_);
  return state;
}

bool EarlyStopping::update(EarlyStoppingState& state, int64_t epoch, double value) const {
  // Keras's on_epoch_end: wait counts every epoch and restarts at an improvement, which must beat
  // the best by more than min_delta (a NaN figure never does).
  ++state.wait;
  const bool improved = higher_is_better(monitor_) ? value - s_.min_delta > state.best
                                                   : value + s_.min_delta < state.best;
  if (improved) {
    state.best = value;
    state.best_epoch = epoch;
    state.wait = 0;
    return true;
  }
  if (state.wait >= s_.patience && epoch > 1) state.stop = true;
  return false;
}

}  // namespace xo

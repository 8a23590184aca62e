// Learning-rate schedules stepped once per epoch, with torch.optim.lr_scheduler's rules (StepLR,
// CosineAnnealingLR, ReduceLROnPlateau as PyTorch 1.13 computes them, in doubles, so that the rate
// of every epoch is the same number), and the per-epoch figures a schedule or early stopping
// watches. The settings are parsed once, by the spec parser; the trainer steps the state.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace xo {

// What an epoch reports that a plateau schedule or early stopping can watch: the training loss,
// or the loss and accuracy (in percent) on the validation or the test split after the epoch.
enum class Metric { Loss, ValLoss, ValAccuracy, TestLoss, TestAccuracy };
inline constexpr Metric kMetrics[] = {Metric::Loss, Metric::ValLoss, Metric::ValAccuracy,
                                      Metric::TestLoss, Metric::TestAccuracy};
// As spec files write it: "loss", "val_loss", "val_accuracy", "test_loss", "test_accuracy".
const char* metric_name(Metric m);
// Losses improve downwards, accuracy upwards.
bool higher_is_better(Metric m);
bool needs_test_split(Metric m);
bool needs_validation_split(Metric m);

// Where a setting was read, for the messages of checks that can only run with the data at hand.
struct SpecPlace {
  std::string origin;  // the file (empty for a built-in spec)
  int line = 0;        // 0: no line
};

enum class ScheduleType { Step, Cosine, Plateau };
inline constexpr ScheduleType kScheduleTypes[] = {ScheduleType::Step, ScheduleType::Cosine,
                                                  ScheduleType::Plateau};
const char* schedule_type_name(ScheduleType t);  // "step", "cosine", "plateau"

// `[train.schedule]`. Each type reads only its own fields.
struct ScheduleSettings {
  ScheduleType type = ScheduleType::Step;
  SpecPlace place;  // of the table, for the checks that need the device or the data
  // step (StepLR): the rate is multiplied by gamma every step_size epochs.
  int64_t step_size = 0;
  double gamma = 0.1;
  // cosine (CosineAnnealingLR): half a cosine from the initial rate down to eta_min over t_max
  // epochs; t_max 0 stands for train.epochs (resolved when training starts, after --epochs).
  int64_t t_max = 0;
  double eta_min = 0;
  // plateau (ReduceLROnPlateau, threshold_mode 'rel'): the rate times factor, never below min_lr,
  // after more than `patience` epochs in which `monitor` did not beat its best by the relative
  // threshold; then `cooldown` epochs in which bad epochs are not counted. No monitor: test_loss
  // where the data has a test split, else the training loss.
  std::optional<Metric> monitor;
  SpecPlace monitor_place;  // of the monitor key, or of the table when it has none
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  int64_t cooldown = 0;
  double min_lr = 0;
};

// ReduceLROnPlateau's `eps`: a reduction smaller than this is not applied (PyTorch's default; not a
// spec key).
inline constexpr double kPlateauMinReduction = 1e-8;

// A schedule between epochs: the rate the next epoch trains with, and what a plateau schedule
// remembers. A checkpoint saves all of it.
struct ScheduleState {
  double lr = 0;           // the rate of the epoch under way (or the next one)
  int64_t last_epoch = 0;  // epochs the schedule has stepped over
  // plateau: the best value so far (the worst possible before the first), the epochs since it
  // that did not beat it, and the cooldown epochs left.
  double best = std::numeric_limits<double>::quiet_NaN();
  int64_t num_bad_epochs = 0;
  int64_t cooldown_counter = 0;
};

// A schedule's rule with its settings resolved for one run (t_max and the monitor known).
class LrSchedule {
 public:
  // `initial_lr` is the optimizer's (PyTorch's base_lr); `epochs` stands in for t_max 0.
  LrSchedule(const ScheduleSettings& settings, double initial_lr, int64_t epochs, Metric monitor);
  ScheduleState start() const;
  // Steps over one finished epoch, as scheduler.step() (or scheduler.step(value) for plateau)
  // after it: state.lr becomes the next epoch's rate. `value` is the monitored figure of the epoch
  // (read by plateau only).
  void step(ScheduleState& state, double value) const;
  Metric monitor() const { return monitor_; }

 private:
  bool improves(double value, double best) const;
  ScheduleSettings s_;
  double base_lr_;
  int64_t t_max_;
  Metric monitor_;
};

// `[train.early_stopping]`, with Keras's EarlyStopping rule: training stops once `monitor` has not
// improved on its best by more than min_delta for `patience` epochs in a row (never after the
// first epoch). restore_best puts back the parameters of the best epoch when training ends.
struct EarlyStoppingSettings {
  std::optional<Metric> monitor;  // none: as ScheduleSettings::monitor
  SpecPlace monitor_place;
  // Keras's default is 0 (stop at the first epoch without improvement); 5 tolerates the noise of
  // a mini-batch run's per-epoch figures, as Keras's own examples set it.
  int64_t patience = 5;
  double min_delta = 0;  // in the metric's units: test_accuracy's are percentage points
  bool restore_best = false;
};

// Where early stopping stands after some epochs. A checkpoint saves all of it.
struct EarlyStoppingState {
  double best = std::numeric_limits<double>::quiet_NaN();  // the worst possible before the first
  int64_t wait = 0;                                        // epochs since the last improvement
  int64_t best_epoch = 0;                                  // 1-based; 0: none yet
  bool stop = false;  // the rule says stop after the last epoch seen
};

// Keras's rule, for one run (the monitor resolved).
class EarlyStopping {
 public:
  EarlyStopping(const EarlyStoppingSettings& settings, Metric monitor);
  EarlyStoppingState start() const;
  // Takes the monitored figure of epoch `epoch` (1-based). Returns true when it is the new best
  // (restore_best then keeps this epoch's parameters).
  bool update(EarlyStoppingState& state, int64_t epoch, double value) const;
  Metric monitor() const { return monitor_; }
  const EarlyStoppingSettings& settings() const { return s_; }

 private:
  EarlyStoppingSettings s_;
  Metric monitor_;
};

}  // namespace xo

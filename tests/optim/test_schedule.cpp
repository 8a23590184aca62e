// The per-epoch rules on scripted figures: each schedule's rate per epoch against values traced by
// hand (and checked against PyTorch 1.13's schedulers: the literals are the doubles it gives), and
// Keras's early-stopping rule, including the boundaries (an equal figure is no improvement).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "optim/schedule.h"

namespace xo {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The rate of each of `epochs` epochs: the schedule steps after each, given metrics[e] (if any).
std::vector<double> rates(const ScheduleSettings& s, double lr, int64_t epochs,
                          const std::vector<double>& metrics = {}, Metric monitor = Metric::Loss) {
  const LrSchedule schedule(s, lr, epochs, monitor);
  ScheduleState state = schedule.start();
  std::vector<double> out;
  for (int64_t e = 0; e < epochs; ++e) {
    out.push_back(state.lr);
    schedule.step(state, metrics.empty() ? 0.0 : metrics[static_cast<size_t>(e)]);
  }
  return out;
}

TEST(Schedule, StepMultipliesByGammaEveryStepSizeEpochs) {
  ScheduleSettings s;
  s.type = ScheduleType::Step;
  s.step_size = 3;
  s.gamma = 0.5;
  EXPECT_EQ(rates(s, 0.8, 8), (std::vector<double>{0.8, 0.8, 0.8, 0.4, 0.4, 0.4, 0.2, 0.2}));
  s.step_size = 1;
  s.gamma = 0.1;
  // Repeated multiplication, as PyTorch's recursive form: 0.1 * 0.1 is 0.010000000000000002.
  EXPECT_EQ(rates(s, 1.0, 3), (std::vector<double>{1.0, 0.1, 0.1 * 0.1}));
}

TEST(Schedule, CosineFollowsTheHalfCosineAndClimbsBackPastTMax) {
  ScheduleSettings s;
  s.type = ScheduleType::Cosine;
  s.t_max = 4;
  s.eta_min = 0.1;
  const std::vector<double> got = rates(s, 1.0, 10);
  // PyTorch 1.13's CosineAnnealingLR(T_max=4, eta_min=0.1) from lr 1.0, bit for bit.
  const std::vector<double> torch = {1.0,
                                     0.8681980515339464,
                                     0.55,
                                     0.23180194846605368,
                                     0.1,
                                     0.2318019484660536,
                                     0.55,
                                     0.8681980515339467,
                                     1.0000000000000004,
                                     0.8681980515339468};
  EXPECT_EQ(got, torch);
  // And the closed form eta_min + (lr - eta_min) (1 + cos(pi e / t_max)) / 2, to rounding.
  for (int e = 0; e < 10; ++e) {
    const double closed = 0.1 + 0.9 * (1 + std::cos(std::numbers::pi * e / 4)) / 2;
    EXPECT_NEAR(got[static_cast<size_t>(e)], closed, 1e-15) << "epoch " << e + 1;
  }
}

TEST(Schedule, CosineTMaxDefaultsToTheRunsEpochs) {
  ScheduleSettings s;
  s.type = ScheduleType::Cosine;
  const std::vector<double> got = rates(s, 0.2, 5);  // t_max 0: the 5 epochs
  EXPECT_EQ(got.front(), 0.2);
  EXPECT_NEAR(got[4], 0.2 * (1 + std::cos(std::numbers::pi * 4 / 5)) / 2, 1e-15);
}

// ReduceLROnPlateau(factor=0.5, patience=1, threshold=0.1 rel, cooldown=1, min_lr=0.2), by hand:
//   epoch  value  better than best*(1-0.1)?  bad  cooldown  -> next rate
//     1    1.00   yes (inf): best 1.0         0              1.0
//     2    0.90   no: 0.9 < 0.9 is false      1              1.0
//     3    0.95   no                          2 > 1: cut     0.5   (cooldown 1, bad 0)
//     4    0.90   no                          1 -> 0 (cool)  0.5
//     5    0.90   no                          1              0.5
//     6    0.80   yes: best 0.8               0              0.5
//     7    0.85   no (0.72)                   1              0.5
//     8    0.85   no                          2: cut         0.25  (cooldown 1)
//     9    0.85   no                          1 -> 0 (cool)  0.25
//    10    0.85   no                          1              0.25
//    11    0.85   no                          2: cut         max(0.125, 0.2) = 0.2
//    12    0.50   yes: best 0.5 (cooldown)    0              0.2
//    13    0.50   no                          1              0.2
//    14    0.50   no                          2: cut         0.2 - 0.2 is no reduction: 0.2
TEST(Schedule, PlateauCountsBadEpochsWithPatienceCooldownThresholdAndMinLr) {
  ScheduleSettings s;
  s.type = ScheduleType::Plateau;
  s.factor = 0.5;
  s.patience = 1;
  s.threshold = 0.1;
  s.cooldown = 1;
  s.min_lr = 0.2;
  const std::vector<double> metrics = {1.0,  0.9,  0.95, 0.9, 0.9, 0.8, 0.85, 0.85,
                                       0.85, 0.85, 0.85, 0.5, 0.5, 0.5, 0.5};
  EXPECT_EQ(rates(s, 1.0, 15, metrics),
            (std::vector<double>{1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2,
                                 0.2, 0.2}));
}

// Accuracy improves upwards (mode 'max'): better means above best * (1 + threshold). Patience 0
// cuts at the first bad epoch; a NaN figure is a bad epoch.
TEST(Schedule, PlateauOnAccuracyWatchesForARise) {
  ScheduleSettings s;
  s.type = ScheduleType::Plateau;
  s.factor = 0.1;
  s.patience = 0;
  s.threshold = 0.05;
  //   50: best; 60 > 52.5: best; 60 < 63: cut; 65 > 63: best; 66 < 68.25: cut; NaN: cut
  EXPECT_EQ(rates(s, 1.0, 7, {50, 60, 60, 65, 66, kNaN, 0}, Metric::TestAccuracy),
            (std::vector<double>{1.0, 1.0, 1.0, 0.1, 0.1, 0.1 * 0.1, 0.1 * 0.1 * 0.1}));
}

TEST(Schedule, NamesAndDirections) {
  EXPECT_STREQ(metric_name(Metric::Loss), "loss");
  EXPECT_STREQ(metric_name(Metric::TestLoss), "test_loss");
  EXPECT_STREQ(metric_name(Metric::TestAccuracy), "test_accuracy");
  EXPECT_TRUE(higher_is_better(Metric::TestAccuracy));
  EXPECT_FALSE(higher_is_better(Metric::TestLoss));
  EXPECT_FALSE(needs_test_split(Metric::Loss));
  EXPECT_TRUE(needs_test_split(Metric::TestLoss));
  EXPECT_STREQ(schedule_type_name(ScheduleType::Plateau), "plateau");
}

struct StopTrace {
  int64_t stop_after = 0;  // the epoch the rule stops after (0: never)
  int64_t best_epoch = 0;
  double best = kNaN;
};

StopTrace run_stopping(const EarlyStoppingSettings& s, Metric monitor,
                       const std::vector<double>& values) {
  const EarlyStopping rule(s, monitor);
  EarlyStoppingState state = rule.start();
  StopTrace t;
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t epoch = static_cast<int64_t>(i) + 1;
    const bool best = rule.update(state, epoch, values[i]);
    EXPECT_EQ(best, state.best_epoch == epoch) << "epoch " << epoch;
    if (state.stop) {
      t.stop_after = epoch;
      break;
    }
  }
  t.best_epoch = state.best_epoch;
  t.best = state.best;
  return t;
}

// Keras's EarlyStopping(patience=2, min_delta=0.01) on a loss, by hand:
//   1: 1.000 best (wait 0); 2: 0.950 + 0.01 < 1.0, best (wait 0); 3: 0.945 + 0.01 < 0.95? no,
//   wait 1; 4: 0.940 + 0.01 < 0.95? no (equal), wait 2 >= 2: stop after epoch 4, best epoch 2.
TEST(EarlyStoppingRule, StopsAfterPatienceEpochsWithoutAnImprovementBeyondMinDelta) {
  EarlyStoppingSettings s;
  s.patience = 2;
  s.min_delta = 0.01;
  const StopTrace t = run_stopping(s, Metric::Loss, {1.0, 0.95, 0.945, 0.94, 0.5});
  EXPECT_EQ(t.stop_after, 4);
  EXPECT_EQ(t.best_epoch, 2);
  EXPECT_EQ(t.best, 0.95);
}

TEST(EarlyStoppingRule, AnImprovementRestartsTheWait) {
  EarlyStoppingSettings s;
  s.patience = 2;
  // Epoch 4 improves after one bad epoch; an equal figure and a worse one then stop it.
  const StopTrace t = run_stopping(s, Metric::TestLoss, {1.0, 0.8, 0.9, 0.7, 0.7, 0.75, 0.1});
  EXPECT_EQ(t.stop_after, 6);
  EXPECT_EQ(t.best_epoch, 4);
}

TEST(EarlyStoppingRule, AccuracyMustRiseAndAnEqualFigureIsNoImprovement) {
  EarlyStoppingSettings s;
  s.patience = 1;
  const StopTrace t = run_stopping(s, Metric::TestAccuracy, {50, 50, 70});
  EXPECT_EQ(t.stop_after, 2);
  EXPECT_EQ(t.best_epoch, 1);
  EXPECT_EQ(t.best, 50);
}

// Patience 0 stops at the first epoch without improvement, but never after the first epoch
// (Keras's `epoch > 0`), even when that one's figure is NaN.
TEST(EarlyStoppingRule, PatienceZeroNeverStopsAfterTheFirstEpoch) {
  EarlyStoppingSettings s;
  s.patience = 0;
  const StopTrace t = run_stopping(s, Metric::Loss, {kNaN, 1.0, 1.0});
  EXPECT_EQ(t.stop_after, 3);
  EXPECT_EQ(t.best_epoch, 2);
}

TEST(EarlyStoppingRule, NeverStopsWhileImproving) {
  EarlyStoppingSettings s;
  s.patience = 1;
  const StopTrace t = run_stopping(s, Metric::Loss, {5, 4, 3, 2, 1});
  EXPECT_EQ(t.stop_after, 0);
  EXPECT_EQ(t.best_epoch, 5);
}

}  // namespace
}  // namespace xo

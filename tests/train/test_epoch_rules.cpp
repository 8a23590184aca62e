// Schedules and early stopping in real CPU training runs: each epoch trains with the rate the
// schedule gives and the optimizer really takes it; early stopping ends the run and puts back the
// best epoch's weights; a schedule is refused off the CPU and a test metric without a test split,
// before any work, naming the file, line and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/random.h"
#include "data/source.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "train/epoch_rules.h"
#include "train/trainer.h"

namespace xo {
namespace {

using testing::expect_user_error;

// Random points with random labels among 3 classes: a model memorises the training set, so its
// training loss falls while the test loss soon rises.
Dataset noise(int64_t samples, uint64_t seed) {
  Rng rng(seed);
  Dataset d;
  d.samples = samples;
  d.features = 4;
  d.classes = 3;
  d.description = "noise";
  for (int64_t i = 0; i < samples * d.features; ++i) {
    d.x.push_back(static_cast<float>(rng.uniform(-1, 1)));
  }
  for (int64_t i = 0; i < samples; ++i) d.y.push_back(static_cast<int32_t>(rng.below(3)));
  return d;
}

// The tables after [model] and [train] (plain SGD, lr 0.1) start on line 10.
ModelSpec spec_with(const std::string& tables, int64_t epochs = 6) {
  return parse_spec(R"([model]
input = [4]
layers = [ { type = "linear", out = 16 }, { type = "relu" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1 }
batch = 20
epochs = )" + std::to_string(epochs) +
                        "\nseed = 3\n" + tables,
                    "rules.toml");
}

struct Trained {
  TrainResult result;
  std::string hash;  // every parameter, bit for bit
};

Trained train(const ModelSpec& spec, const DataSplit& data) {
  auto be = make_backend(parse_device("cpu", 1));
  Model model(spec, *be);
  model.init(spec.train.seed);
  Trained run{train_model(model, data, spec.train), ""};
  run.hash = model.parameter_hash();
  return run;
}

const DataSplit& split() {
  static const DataSplit data{noise(100, 1), noise(60, 2)};
  return data;
}

std::vector<double> epoch_rates(const TrainResult& r) {
  std::vector<double> out;
  for (const EpochRecord& e : r.epochs) out.push_back(e.lr);
  return out;
}

// Each schedule type in a real run: the rates per epoch are the rule's (schedule.h's LrSchedule,
// whose values tests/optim/test_schedule.cpp checks), the first epoch at the optimizer's own.
TEST(EpochRules, EachScheduleSetsTheRateOfEveryEpoch) {
  struct Case {
    const char* table;
    std::vector<double> expected;
  };
  const Case cases[] = {
      {"[train.schedule]\ntype = \"step\"\nstep_size = 2\ngamma = 0.5\n",
       {0.1, 0.1, 0.05, 0.05, 0.025, 0.025}},
      {"[train.schedule]\ntype = \"cosine\"\nt_max = 2\n", {}},
      {"[train.schedule]\ntype = \"plateau\"\nmonitor = \"test_loss\"\npatience = 0\nthreshold = "
       "0.05\n",
       {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.table);
    const ModelSpec spec = spec_with(c.table);
    const Trained run = train(spec, split());
    ASSERT_EQ(run.result.epochs.size(), 6u);
    std::vector<double> expected = c.expected;
    if (expected.empty()) {
      // Replay the rule on the run's own figures.
      const Metric monitor = spec.train.schedule->monitor.value_or(Metric::TestLoss);
      const LrSchedule schedule(*spec.train.schedule, 0.1, 6, monitor);
      ScheduleState state = schedule.start();
      for (const EpochRecord& e : run.result.epochs) {
        expected.push_back(state.lr);
        schedule.step(state, metric_value(e, monitor));
      }
    }
    EXPECT_EQ(epoch_rates(run.result), expected);
    const std::vector<double> got = epoch_rates(run.result);
    EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](double lr) { return lr != 0.1; }))
        << "the rate never changed: the case is void";
  }
}

// Without a schedule every epoch reports the optimizer's rate.
TEST(EpochRules, WithoutAScheduleEveryEpochHasTheOptimizersRate) {
  const Trained run = train(spec_with(""), split());
  EXPECT_EQ(epoch_rates(run.result), std::vector<double>(6, 0.1));
}

// The optimizer takes the new rate: with plain SGD, a rate of 1e-300 after the first epoch is 0 in
// float, so the parameters after three epochs are exactly those after one.
TEST(EpochRules, TheOptimizerTrainsWithTheScheduledRate) {
  const Trained scheduled = train(
      spec_with("[train.schedule]\ntype = \"step\"\nstep_size = 1\ngamma = 1e-300\n", 3), split());
  const Trained one_epoch = train(spec_with("", 1), split());
  EXPECT_EQ(scheduled.hash, one_epoch.hash);
  const Trained constant = train(spec_with("", 3), split());
  EXPECT_NE(constant.hash, one_epoch.hash);
}

// Early stopping ends the run once the test loss has not improved for `patience` epochs, and
// restore_best leaves exactly the weights a run of best_epoch epochs ends with.
TEST(EpochRules, EarlyStoppingStopsAndRestoresTheBestEpoch) {
  const ModelSpec spec = spec_with(
      "[train.early_stopping]\nmonitor = \"test_loss\"\npatience = 2\nrestore_best = true\n", 40);
  const Trained run = train(spec, split());
  const TrainResult& r = run.result;
  ASSERT_TRUE(r.stopped_early) << "the test loss never rose for 2 epochs: the case is void";
  EXPECT_EQ(r.early_stopping_monitor, "test_loss");
  EXPECT_EQ(r.early_stopping_patience, 2);
  EXPECT_LT(static_cast<int64_t>(r.epochs.size()), 40);
  EXPECT_EQ(r.best_epoch, static_cast<int64_t>(r.epochs.size()) - 2);
  EXPECT_EQ(r.best_value, r.epochs[static_cast<size_t>(r.best_epoch - 1)].test_loss);
  for (const EpochRecord& e : r.epochs) EXPECT_GE(e.test_loss, r.best_value);
  EXPECT_TRUE(r.restored_best);
  const Trained best_only = train(spec_with("", r.best_epoch), split());
  EXPECT_EQ(run.hash, best_only.hash);
}

// Without restore_best the run keeps its last weights: those of a run of as many epochs.
TEST(EpochRules, EarlyStoppingWithoutRestoreKeepsTheLastWeights) {
  const Trained run = train(
      spec_with("[train.early_stopping]\nmonitor = \"test_loss\"\npatience = 2\n", 40), split());
  ASSERT_TRUE(run.result.stopped_early);
  EXPECT_FALSE(run.result.restored_best);
  const Trained same_epochs =
      train(spec_with("", static_cast<int64_t>(run.result.epochs.size())), split());
  EXPECT_EQ(run.hash, same_epochs.hash);
}

// No monitor named: val_loss where there is a validation split (Keras's default), else test_loss
// where there is a test split, else the training loss.
TEST(EpochRules, TheDefaultMonitorFollowsTheData) {
  const ModelSpec spec = spec_with("[train.early_stopping]\npatience = 100\n", 2);
  EXPECT_EQ(train(spec, split()).result.early_stopping_monitor, "test_loss");
  EXPECT_EQ(train(spec, DataSplit{split().train, {}}).result.early_stopping_monitor, "loss");
  DataSplit validated = split();
  split_validation(validated, 0.25, "rules.toml");
  EXPECT_EQ(train(spec, validated).result.early_stopping_monitor, "val_loss");
}

// A validation metric without a validation split is refused before training, at its line.
TEST(EpochRules, AValidationMetricWithoutAValidationSplitIsRefused) {
  const ModelSpec stopping = spec_with("[train.early_stopping]\nmonitor = \"val_accuracy\"\n");
  expect_user_error([&] { train(stopping, split()); },
                    {"rules.toml:11:", "train.early_stopping.monitor", "'val_accuracy'",
                     "validation split", "data.validation_split"});
  DataSplit validated = split();
  split_validation(validated, 0.25, "rules.toml");
  const Trained run = train(stopping, validated);
  EXPECT_EQ(run.result.early_stopping_monitor, "val_accuracy");
}

// A test metric without a test split is refused before training, at the monitor's line.
TEST(EpochRules, ATestMetricWithoutATestSplitIsRefused) {
  const ModelSpec plateau =
      spec_with("[train.schedule]\ntype = \"plateau\"\nmonitor = \"test_accuracy\"\n");
  expect_user_error(
      [&] {
        train(plateau, DataSplit{split().train, {}});
      },
      {"rules.toml:12:", "train.schedule.monitor", "'test_accuracy'", "has none", "\"loss\""});
  const ModelSpec stopping = spec_with("[train.early_stopping]\nmonitor = \"test_loss\"\n");
  expect_user_error(
      [&] {
        train(stopping, DataSplit{split().train, {}});
      },
      {"rules.toml:11:", "train.early_stopping.monitor", "'test_loss'"});
}

}  // namespace
}  // namespace xo

// End-to-end training on the CPU: the classic disc experiment learns, and the same seed gives
// bit-identical results.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "backend/backend.h"
#include "data/source.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "train/epoch.h"
#include "train/trainer.h"

namespace xo {
namespace {

struct TrainedRun {
  TrainResult result;
  std::vector<NamedTensor> weights;
};

TrainedRun train_builtin(const std::string& name, int64_t epochs, int threads, bool shuffle = false,
                         OptimizerType optimizer = OptimizerType::SGD, int shards = 0) {
  ModelSpec spec = *builtin_spec(name);
  spec.train.epochs = epochs;
  spec.train.shuffle = shuffle;
  spec.train.optimizer.type = optimizer;
  if (optimizer != OptimizerType::SGD) spec.train.optimizer.lr = 1e-3;
  auto be = make_backend(parse_device("cpu", threads));
  Model model(spec, *be);
  const Dataset data = load_data(spec.data, data_request(spec, model.classes())).train;
  model.init(spec.train.seed);
  TrainedRun run{train_model(model, data, spec.train, {}, ExecutionOptions{shards}),
                 model.export_params()};
  return run;
}

TEST(Training, Disc4LearnsTheDiscInOneHundredEpochs) {
  const TrainedRun run = train_builtin("disc-4", 100, 0);
  ASSERT_EQ(run.result.epochs.size(), 100u);
  EXPECT_LT(run.result.final_train_error, 5.0);
  EXPECT_LT(run.result.final_loss, run.result.epochs.front().loss);
  EXPECT_EQ(run.result.params, 4 * 2 + 4 + 8 * 4 + 8 + 16 * 8 + 16 + 2 * 16 + 2);
  EXPECT_EQ(run.result.steps_per_epoch, 10);
  EXPECT_GT(run.result.gflops, 0.0);
  EXPECT_EQ(run.result.step_ms.count, 100 * 10 - 1);  // the warm-up step is excluded
  // The disc's points inside the quarter disc are about 1/8 of them: the baseline of always
  // answering "outside", which disc-4 beats by far.
  EXPECT_GT(run.result.majority_class_error, 8.0);
  EXPECT_LT(run.result.majority_class_error, 17.0);
  EXPECT_EQ(stuck_warning(run.result), "");
}

// A step limit (a measurement: advise's, --steps) ends the run before its epochs, inside an epoch
// or at an epoch's end, and says so; a run to its last epoch does not.
TEST(Training, AStepLimitedRunSaysItWasCutShort) {
  EXPECT_FALSE(train_builtin("disc-2", 3, 1).result.step_limited);
  ModelSpec spec = *builtin_spec("disc-2");
  spec.train.epochs = 5;
  auto be = make_backend(parse_device("cpu", 1));
  const Dataset data = load_data(spec.data, data_request(spec, 2)).train;
  for (const int64_t steps : {25, 20, 50}) {  // inside epoch 3, at epoch 2's end, at the last's
    Model model(spec, *be);
    model.init(spec.train.seed);
    ExecutionOptions exec;
    exec.max_steps = steps;
    const TrainResult r = train_model(model, data, spec.train, {}, exec);
    EXPECT_EQ(r.steps_taken, steps);
    EXPECT_EQ(r.step_limited, steps < 50) << steps << " steps";
  }
}

// A long run's epoch records: every epoch's up to kMaxEpochRecords - 3 epochs, then evenly fewer,
// never more than kMaxEpochRecords; the first, the newest and early stopping's best always there
// (a best that moves on leaves no trail); the count read from the last.
TEST(Training, ALongRunsEpochRecordsThinOutEvenlyKeepingTheNewestAndTheBest) {
  constexpr auto kExact = static_cast<int64_t>(kMaxEpochRecords) - 3;
  std::vector<EpochRecord> epochs;
  for (int64_t e = 1; e <= kExact; ++e) keep_epoch_record(epochs, {.epoch = e}, 3);
  ASSERT_EQ(epochs.size(), static_cast<size_t>(kExact));  // every one, below the bound
  constexpr int64_t kEpochs = 100'003;
  size_t most = 0;
  for (int64_t e = kExact + 1; e <= kEpochs; ++e) {
    // Epoch 3 stays the best until epoch 50,000; then the best moves on every 1,001 epochs.
    keep_epoch_record(epochs, {.epoch = e}, e < 50'000 ? 3 : e - e % 1001);
    most = std::max(most, epochs.size());
  }
  constexpr int64_t kBest = kEpochs - kEpochs % 1001;
  EXPECT_LE(most, kMaxEpochRecords);
  EXPECT_GE(epochs.size(), kMaxEpochRecords / 2);
  EXPECT_EQ(epochs.front().epoch, 1);
  EXPECT_EQ(epochs.back().epoch, kEpochs);
  TrainResult r;
  r.epochs = epochs;
  EXPECT_EQ(epochs_completed(r), kEpochs);
  // Evenly: every multiple of the stride there, in order; besides them only the first, the
  // newest and bests (the present one, and earlier ones until the next thinning).
  const int64_t stride = epoch_record_stride(kEpochs);
  EXPECT_GT(stride, 1);
  int64_t on_stride = 0, previous = 0;
  bool best = false;
  for (const EpochRecord& e : epochs) {
    ASSERT_GT(e.epoch, previous) << "in order, each once";
    previous = e.epoch;
    best |= e.epoch == kBest;
    if (e.epoch % stride == 0) {
      EXPECT_EQ(e.epoch, (on_stride + 1) * stride);
      ++on_stride;
    } else {
      EXPECT_TRUE(e.epoch == 1 || e.epoch == kEpochs || e.epoch % 1001 == 0) << e.epoch;
    }
  }
  EXPECT_EQ(on_stride, kEpochs / stride);
  EXPECT_TRUE(best);
}

TEST(Training, MajorityClassErrorIsTheShareOutsideTheMostFrequentClass) {
  EXPECT_DOUBLE_EQ(majority_class_error(std::vector<int32_t>{0, 1, 1, 1, 2, 1, 0, 1}), 100.0 * 3 / 8);
  EXPECT_DOUBLE_EQ(majority_class_error(std::vector<int32_t>{4, 4}), 0.0);
  EXPECT_TRUE(std::isnan(majority_class_error({})));
}

// The epoch's loss is a mean per sample, as Keras reports it: each batch's mean weighted by its
// size, so a partial batch counts for its samples only (3 full batches of 4 at mean 1, a partial
// batch of 2 at mean 2: 16 / 14, where a mean of the batch means would say 5 / 4).
TEST(Training, TheEpochLossIsAMeanPerSampleWithThePartialBatchWeightedBySize) {
  const LossStats full{3.0, 9, 12}, partial{2.0, 1, 2}, none{};
  EXPECT_DOUBLE_EQ(epoch_mean_loss(full, partial, 4), 16.0 / 14.0);
  EXPECT_DOUBLE_EQ(epoch_mean_loss(full, none, 4), 1.0);
}

// A model stuck at the class balance (disc-11 and disc-12 predicting "outside" for every point)
// is told; one that learned, one with no finished epoch, or one a step limit cut short, is not.
TEST(Training, AModelNoBetterThanTheMajorityClassIsWarnedAbout) {
  TrainResult r;
  r.model = "disc-12";
  r.epochs.resize(1);
  r.majority_class_error = 12.5;
  r.final_train_error = 12.5;
  EXPECT_EQ(
      stuck_warning(r).rfind("disc-12: train error 12.50% is no better than always predicting "
                             "the most frequent class (12.50% of the samples are not in it)",
                             0),
      0u)
      << stuck_warning(r);
  r.final_train_error = 12.2;  // within half a point: still nothing learned
  EXPECT_NE(stuck_warning(r), "");
  r.final_train_error = 3.0;
  EXPECT_EQ(stuck_warning(r), "");
  r.final_train_error = 12.5;
  r.step_limited = true;  // a measurement cut short by --steps: no time to learn, nothing said
  EXPECT_EQ(stuck_warning(r), "");
  r.step_limited = false;
  r.epochs.clear();
  EXPECT_EQ(stuck_warning(r), "");
}

void expect_identical(const TrainedRun& a, const TrainedRun& b) {
  ASSERT_EQ(a.result.epochs.size(), b.result.epochs.size());
  for (size_t e = 0; e < a.result.epochs.size(); ++e) {
    EXPECT_EQ(a.result.epochs[e].loss, b.result.epochs[e].loss) << "epoch " << e + 1;
    EXPECT_EQ(a.result.epochs[e].train_error, b.result.epochs[e].train_error);
  }
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t t = 0; t < a.weights.size(); ++t) {
    ASSERT_EQ(a.weights[t].data.size(), b.weights[t].data.size());
    EXPECT_EQ(0, std::memcmp(a.weights[t].data.data(), b.weights[t].data.data(),
                             sizeof(float) * a.weights[t].data.size()))
        << a.weights[t].name << " differs";
  }
}

TEST(Training, SameSeedIsBitIdentical) {
  expect_identical(train_builtin("disc-6", 5, 0), train_builtin("disc-6", 5, 0));
}

TEST(Training, SameSeedIsBitIdenticalWithOneThread) {
  expect_identical(train_builtin("disc-6", 3, 1), train_builtin("disc-6", 3, 1));
}

TEST(Training, ShuffledAndAdamRunsAreBitIdentical) {
  expect_identical(train_builtin("disc-5", 4, 0, true, OptimizerType::Adam),
                   train_builtin("disc-5", 4, 0, true, OptimizerType::Adam));
}

TEST(Training, ShardedRunsAreBitIdentical) {
  const TrainedRun a = train_builtin("disc-6", 3, 0, false, OptimizerType::SGD, 2);
  EXPECT_EQ(a.result.shards, 2);
  expect_identical(a, train_builtin("disc-6", 3, 0, false, OptimizerType::SGD, 2));
}

TEST(Training, ShuffleChangesTheTrajectory) {
  const TrainedRun ordered = train_builtin("disc-5", 2, 0, false);
  const TrainedRun shuffled = train_builtin("disc-5", 2, 0, true);
  EXPECT_NE(ordered.result.epochs.back().loss, shuffled.result.epochs.back().loss);
}

TEST(Training, DifferentSeedsDiffer) {
  ModelSpec spec = *builtin_spec("disc-3");
  auto be = make_backend(parse_device("cpu", 0));
  Model a(spec, *be), b(spec, *be);
  a.init(1);
  b.init(2);
  EXPECT_NE(a.export_params()[0].data, b.export_params()[0].data);
}

TEST(Training, PartialLastBatchIsTrained) {
  ModelSpec spec = *builtin_spec("disc-3");
  spec.train.epochs = 2;
  spec.train.batch = 300;  // 1000 = 3 * 300 + 100
  auto be = make_backend(parse_device("cpu", 0));
  Model model(spec, *be);
  const Dataset data = load_data(spec.data, data_request(spec, model.classes())).train;
  model.init(0);
  const TrainResult r = train_model(model, data, spec.train);
  EXPECT_EQ(r.steps_per_epoch, 4);
  EXPECT_EQ(r.step_ms.count, 2 * 3 - 1);  // full batches only, warm-up excluded
  ASSERT_EQ(r.epochs.size(), 2u);
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

// The first n samples of a data set.
Dataset head(const Dataset& d, int64_t n) {
  Dataset out = d;
  out.samples = n;
  out.x.resize(n * d.features);
  out.y.resize(n);
  return out;
}

TEST(Training, SmallCnnLearnsFashionMnistFarAboveChance) {
  if (!std::filesystem::is_directory("/usr/share/datasets/fashion-mnist")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/setup installs it)";
  }
  const ModelSpec spec = parse_spec(R"([model]
input = [1, 28, 28]
layers = [
  { type = "conv2d", out = 8, kernel = 3 }, { type = "relu" }, { type = "maxpool2d", kernel = 2 },
  { type = "dropout", p = 0.25 }, { type = "flatten" }, { type = "linear", out = 10 },
]
loss = "cross_entropy"
[train]
optimizer = { type = "adadelta", lr = 1.0, rho = 0.95, eps = 1e-7 }
batch = 32
epochs = 6
shuffle = true
[data]
source = "fashion-mnist"
)",
                                    "small-cnn.toml");
  auto be = make_backend(parse_device("cpu", 0));
  Model model(spec, *be);
  const DataSplit full = load_data(spec.data, data_request(spec, model.classes()));
  const DataSplit few{head(full.train, 600), head(full.test, 500)};
  model.init(spec.train.seed);
  const TrainResult r = train_model(model, few, spec.train);
  ASSERT_EQ(r.epochs.size(), 6u);
  EXPECT_EQ(r.test_samples, 500);
  // Chance is 10%; a few hundred images take this network well past 60%.
  EXPECT_GT(r.final_test_accuracy, 60.0);
  EXPECT_LT(r.epochs.back().test_loss, r.epochs.front().test_loss);
}

TEST(Training, OutOfRangeTokenIdsAreRefusedBeforeTraining) {
  ModelSpec spec = *builtin_spec("imdb-lstm");
  auto be = make_backend(parse_device("cpu", 0));
  Model model(spec, *be);
  Dataset data;
  data.samples = 2;
  data.features = 80;
  data.classes = 2;
  data.x.assign(160, 5.0f);
  data.x[83] = 20000.0f;
  data.y = {0, 1};
  data.description = "ids.csv";
  model.init(0);
  testing::expect_user_error(
      [&] { train_model(model, data, spec.train); },
      {"data 'ids.csv': sample 1, position 3 holds 20000", "not a token id in [0, 20000)"});
}

}  // namespace
}  // namespace xo

// Fused trials (train/trials.h): each trial of a fused group ends with the result it gets alone
// (the same per-epoch losses, errors, test figures and rates, and the same final weights, to f32
// rounding) for an MLP, a CNN with BatchNorm and dropout and an LSTM, under SGD with momentum, Adam
// and schedules, with every setting that may differ between trials differing; a diverging trial
// stops alone; what cannot be fused is refused, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "model/fused_network.h"
#include "model/model.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/random_data.h"
#include "support/temp_dir.h"
#include "train/memory.h"
#include "train/trainer.h"
#include "train/trials.h"

namespace xo {
namespace {

using testing::expect_user_error;
using testing::random_data;
using testing::TempDir;
namespace fs = std::filesystem;

struct Case {
  const char* name;
  const char* spec;
  DataSplit (*data)() = nullptr;
  // The largest difference measured between a fused trial and the same trial alone, relative to
  // the figure (losses, test figures) or to the largest weight of its tensor; 0: bit-identical.
  double tolerance = 0;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

DataSplit disc_split() {
  ModelSpec spec = *builtin_spec("disc-4");
  return load_data(spec.data, data_request(spec, 2));
}
DataSplit image_split() { return {random_data(100, 64, 3, 1), random_data(30, 64, 3, 2)}; }
DataSplit token_split() { return {random_data(80, 6, 2, 3, 50), random_data(20, 6, 2, 4, 50)}; }
DataSplit noise_split() { return {random_data(100, 8, 3, 5), random_data(40, 8, 3, 6)}; }

const Case kCases[] = {
    {"mlp-sgd-momentum-step-schedule", R"([model]
input = [2]
layers = [ { type = "linear", out = 8 }, { type = "tanh" }, { type = "linear", out = 16 },
           { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1, momentum = 0.9, weight_decay = 1e-4 }
batch = 96
epochs = 4
shuffle = true
seed = 5
[train.schedule]
type = "step"
step_size = 2
gamma = 0.5
)",
     disc_split, 0},  // every width a power of two: the same loops alone and fused
    {"mlp-dropout-adam-cosine", R"([model]
input = [8]
layers = [ { type = "linear", out = 32 }, { type = "relu" }, { type = "dropout", p = 0.2 },
           { type = "linear", out = 16 }, { type = "sigmoid" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 24
epochs = 4
shuffle = true
seed = 3
[train.schedule]
type = "cosine"
)",
     noise_split, 1e-5},
    {"cnn-batchnorm-dropout-sgd", R"([model]
input = [1, 8, 8]
layers = [ { type = "conv2d", out = 4, kernel = 3 }, { type = "batchnorm2d" }, { type = "relu" },
           { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.25 },
           { type = "flatten" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.05, momentum = 0.8 }
batch = 16
epochs = 3
shuffle = true
seed = 7
)",
     image_split, 1e-5},
    {"lstm-adam", R"([model]
input = [6]
layers = [ { type = "embedding", vocab = 50, out = 8 }, { type = "lstm", out = 8 },
           { type = "linear", out = 1 } ]
loss = "bce"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 16
epochs = 2
shuffle = true
seed = 9
)",
     token_split, 1e-5},
    {"mlp-plateau-early-stopping", R"([model]
input = [8]
layers = [ { type = "linear", out = 16 }, { type = "relu" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.5, momentum = 0.9 }
batch = 24
epochs = 12
shuffle = true
seed = 11
[train.schedule]
type = "plateau"
monitor = "loss"
factor = 0.5
patience = 0
threshold = 0.05
cooldown = 1
[train.early_stopping]
monitor = "test_loss"
patience = 3
restore_best = true
)",
     noise_split, 1e-5},
};

// Trial t of a search around `base`: everything a trial may change, changed (the learning rate,
// the optimizer's other settings, the seed of the initial weights, shuffling and dropout, the
// dropout rates, the epochs).
ModelSpec trial_spec(const ModelSpec& base, int t) {
  ModelSpec s = base;
  OptimizerSettings& o = s.train.optimizer;
  o.lr *= 1.0 + 0.5 * t;
  if (o.type == OptimizerType::SGD) o.momentum = std::max(0.0, o.momentum - 0.1 * t);
  if (o.type == OptimizerType::Adam) {
    o.beta1 = 0.9 - 0.05 * t;
    o.eps = 1e-8 * (t + 1);
  }
  o.weight_decay += 1e-4 * t;
  s.train.seed += static_cast<uint64_t>(t);
  for (LayerSpec& l : s.layers) {
    if (l.type == LayerType::Dropout) l.p = 0.1 + 0.1 * t;
  }
  if (t == 3) s.train.epochs -= 1;  // a trial that ends before the others
  return s;
}

struct Alone {
  TrainResult result;
  std::vector<NamedTensor> weights;
};

// `spec` trained alone on `device` (the CPU: one thread, one shard).
Alone train_alone(const ModelSpec& spec, const DataSplit& data, const std::string& device = "cpu",
                  const std::string& precision = "f32") {
  auto be = make_backend(parse_device(device, 1, precision));
  Model model(spec, *be);
  model.init(spec.train.seed);
  ExecutionOptions exec;
  exec.shards = 1;
  Alone a{train_model(model, data, spec.train, {}, exec), {}};
  a.weights = model.export_params();
  return a;
}

// Trial t's parameters at t times this from trial 0's: a Linear in -> out (with its bias) padded to
// 64-byte lines, and a line more so that the padding shows.
int64_t padded_stride(int64_t in, int64_t out) { return (in * out + out + 15) / 16 * 16 + 16; }

// `n` values uniform in [-1, 1).
std::vector<float> uniform_values(Rng& rng, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(rng.uniform(-1, 1));
  return v;
}

// |a - b| relative to max(|a|, |b|, floor): 0 where both are NaN.
double relative(double a, double b, double floor = 1e-3) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), floor});
}

// The largest relative difference between two runs' figures and weights.
double difference(const TrainResult& fused, const Alone& alone, const std::vector<NamedTensor>& w,
                  const std::string& where) {
  const TrainResult& r = alone.result;
  EXPECT_EQ(fused.epochs.size(), r.epochs.size()) << where;
  EXPECT_EQ(fused.steps_taken, r.steps_taken) << where;
  EXPECT_EQ(fused.stopped_early, r.stopped_early) << where;
  EXPECT_EQ(fused.best_epoch, r.best_epoch) << where;
  EXPECT_EQ(fused.restored_best, r.restored_best) << where;
  double worst = 0;
  for (size_t e = 0; e < std::min(fused.epochs.size(), r.epochs.size()); ++e) {
    const EpochRecord &x = fused.epochs[e], &y = r.epochs[e];
    EXPECT_EQ(x.lr, y.lr) << where << ", epoch " << e + 1;
    worst = std::max({worst, relative(x.loss, y.loss), relative(x.test_loss, y.test_loss),
                      relative(x.train_error, y.train_error, 1.0),
                      relative(x.test_accuracy, y.test_accuracy, 1.0)});
  }
  EXPECT_EQ(w.size(), alone.weights.size()) << where;
  for (size_t i = 0; i < std::min(w.size(), alone.weights.size()); ++i) {
    const auto& a = w[i].data;
    const auto& b = alone.weights[i].data;
    EXPECT_EQ(a.size(), b.size()) << where << ", " << w[i].name;
    float scale = 1e-3f;
    for (float v : b) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
      worst = std::max(worst, static_cast<double>(std::abs(a[k] - b[k]) / scale));
    }
  }
  return worst;
}

// Four trials of `c` (trial_spec: every setting apart, then `vary`) fused on `device`, each against
// the same trial alone there: the largest difference.
double fused_against_alone(const Case& c, const std::string& device,
                           const std::function<void(ModelSpec&, int)>& vary = {},
                           std::optional<FusedStepping> stepping = std::nullopt,
                           const std::string& precision = "f32") {
  const ModelSpec base = parse_spec(c.spec, std::string(c.name) + ".toml");
  const DataSplit data = c.data();
  constexpr int kTrials = 4;
  auto be = make_backend(parse_device(device, 2, precision));
  std::vector<ModelSpec> specs;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<FusedTrial> trials;
  std::vector<int> epochs_seen(kTrials, 0);
  for (int t = 0; t < kTrials; ++t) {
    specs.push_back(trial_spec(base, t));
    if (vary) vary(specs.back(), t);
    models.push_back(std::make_unique<Model>(specs.back(), *be));
    models.back()->init(specs.back().train.seed);
    trials.push_back({models.back().get(), specs.back().train,
                      [&epochs_seen, t](const EpochRecord&, int64_t) { ++epochs_seen[t]; }});
  }
  FusedOptions options;
  options.stepping = stepping;
  const std::vector<TrainResult> fused = train_fused(trials, data, options);
  EXPECT_EQ(fused.size(), static_cast<size_t>(kTrials));
  double worst = 0;
  for (size_t t = 0; t < std::min(fused.size(), static_cast<size_t>(kTrials)); ++t) {
    const std::string where = fmt::format("{} on {}, trial {}", c.name, device, t + 1);
    const Alone alone = train_alone(specs[t], data, device, precision);
    worst = std::max(worst, difference(fused[t], alone, models[t]->export_params(), where));
    EXPECT_EQ(epochs_seen[t], static_cast<int>(alone.result.epochs.size())) << where;
    EXPECT_EQ(fused[t].shards, 1) << where;
    EXPECT_EQ(fused[t].fused_trials, kTrials) << where;
  }
  std::printf("%s on %s at %s (%s): the largest difference from the trials alone: %.3g\n", c.name,
              device.c_str(), precision.c_str(),
              stepping ? fused_stepping_name(*stepping) : "as chosen", worst);
  return worst;
}

class Fused : public ::testing::TestWithParam<Case> {};

TEST_P(Fused, EachTrialEndsAsItDoesAlone) {
  const Case& c = GetParam();
  EXPECT_LE(fused_against_alone(c, "cpu"), c.tolerance) << c.name;
}

// At --precision bf16 (the products of the larger layers, convolutions and LSTMs in bf16), on a CPU
// with AMX or AVX-512 BF16.
TEST_P(Fused, Bf16EachTrialEndsAsItDoesAlone) {
  if (cpu_bf16_unit().empty()) GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16";
  const Case& c = GetParam();
  EXPECT_LE(fused_against_alone(c, "cpu", {}, std::nullopt, "bf16"), c.tolerance) << c.name;
}

// The CPU's cases are small enough to step side by side (or, the CNN, one after another): the
// same trials as one FusedNetwork, as a larger model's go on a CPU and every model's on a GPU.
TEST_P(Fused, EachTrialEndsAsItDoesAloneSteppingTogether) {
  const Case& c = GetParam();
  EXPECT_LE(fused_against_alone(c, "cpu", {}, FusedStepping::Together), c.tolerance) << c.name;
}

// Trials whose products are past one thread's (oneDNN's kernels, made for the backend's threads
// alone) step side by side on one thread each, with kernels made for one thread, and end as they
// do alone.
DataSplit wide_split() { return {random_data(256, 64, 10, 12), random_data(64, 64, 10, 13)}; }
const Case kWide{"wide-mlp-dropout-rmsprop", R"([model]
input = [64]
layers = [ { type = "linear", out = 512 }, { type = "relu" }, { type = "dropout", p = 0.2 },
           { type = "linear", out = 512 }, { type = "relu" }, { type = "linear", out = 10 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "rmsprop", lr = 0.001 }
batch = 128
epochs = 3
shuffle = true
seed = 4
)",
                 wide_split, 1e-5};

// They step side by side as chosen (model/fused_network.h); a trial that goes on after the others
// have ended steps alone, on every thread.
TEST(FusedTrials, WideTrialsSteppingSideBySideEndAsTheyDoAlone) {
  EXPECT_LE(fused_against_alone(kWide, "cpu"), kWide.tolerance);
  auto one_goes_on = [](ModelSpec& s, int t) {
    if (t > 0) s.train.epochs = 1;
  };
  EXPECT_LE(fused_against_alone(kWide, "cpu", one_goes_on), kWide.tolerance);
  if (cpu_bf16_unit().empty()) GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16";
  EXPECT_LE(fused_against_alone(kWide, "cpu", one_goes_on, std::nullopt, "bf16"), kWide.tolerance);
}

// How trials step on a 2-thread CPU (model/fused_network.h): side by side where a trial alone is
// one thread's work of crossover's own loops (a group of one too), one after another where
// convolutions do most of the work, together where oneDNN's batch normalisation runs, side by side
// otherwise (a group of one: the trial alone); on one thread one after another for crossover's own
// loops but the smallest; on a GPU always together.
TEST(FusedTrials, TrialsStepAsTheModelAndDeviceSay) {
  auto be = make_backend(parse_device("cpu", 2));
  ModelSpec lstm = parse_spec(kCases[3].spec, "lstm.toml");
  ModelSpec wide_lstm = lstm;
  wide_lstm.layers[1].out = 256;  // its products past one thread's
  ModelSpec batch_norm = parse_spec(kCases[4].spec, "mlp.toml");
  batch_norm.layers.insert(batch_norm.layers.begin() + 1, LayerSpec{LayerType::BatchNorm1d});
  constexpr FusedStepping kSide = FusedStepping::SideBySide,
                          kApart = FusedStepping::OneAfterAnother,
                          kTogether = FusedStepping::Together;
  const struct {
    ModelSpec spec;
    FusedStepping cpu, one;  // four trials, one
  } cases[] = {
      {*builtin_spec("disc-4"), kSide, kSide},
      {*builtin_spec("disc-7"), kSide, kSide},
      {*builtin_spec("disc-8"), kSide, kApart},  // two batch shards alone
      {*builtin_spec("mnist-mlp"), kSide, kApart},
      {parse_spec(kCases[1].spec, "mlp.toml"), kSide, kSide},  // with dropout
      {batch_norm, kTogether, kApart},                         // oneDNN's batch normalisation
      {lstm, kSide, kApart},
      {wide_lstm, kSide, kApart},
      {parse_spec(kCases[2].spec, "cnn.toml"), kApart, kApart},
      {*builtin_spec("mnist-cnn"), kApart, kApart},
  };
  for (const auto& c : cases) {
    Model model(c.spec, *be);
    const int64_t batch = c.spec.train.batch;
    EXPECT_EQ(fused_stepping_name(fused_stepping(model.nodes(), model.tensors(), batch,
                                                 DeviceKind::Cpu, be->execution_policy(), 4)),
              std::string(fused_stepping_name(c.cpu)))
        << c.spec.name;
    EXPECT_EQ(fused_stepping_name(fused_stepping(model.nodes(), model.tensors(), batch,
                                                 DeviceKind::Cpu, be->execution_policy(), 1)),
              std::string(fused_stepping_name(c.one)))
        << c.spec.name << ", a group of one";
    for (int trials : {1, 4})
      EXPECT_EQ(fused_stepping(model.nodes(), model.tensors(), batch, DeviceKind::Gpu,
                               be->execution_policy(), trials),
                FusedStepping::Together)
          << c.spec.name;
  }
  // One thread: nothing to step side by side on; models of crossover's own loops one after
  // another, but those whose step is as short as its kernel calls (disc-2, disc-3), and the
  // others as on two.
  auto one = make_backend(parse_device("cpu", 1));
  const struct {
    ModelSpec spec;
    FusedStepping cpu;
  } one_thread[] = {
      {*builtin_spec("disc-2"), FusedStepping::Together},
      {*builtin_spec("disc-3"), FusedStepping::Together},
      {*builtin_spec("disc-4"), FusedStepping::OneAfterAnother},
      {*builtin_spec("disc-8"), FusedStepping::OneAfterAnother},
      {*builtin_spec("mnist-mlp"), FusedStepping::OneAfterAnother},
      {parse_spec(kCases[1].spec, "mlp.toml"), FusedStepping::OneAfterAnother},
      {batch_norm, FusedStepping::Together},
      {lstm, FusedStepping::Together},
      {*builtin_spec("mnist-cnn"), FusedStepping::OneAfterAnother},
  };
  for (const auto& c : one_thread) {
    Model model(c.spec, *one);
    EXPECT_EQ(fused_stepping_name(fused_stepping(model.nodes(), model.tensors(), c.spec.train.batch,
                                                 DeviceKind::Cpu, one->execution_policy(), 4)),
              std::string(fused_stepping_name(c.cpu)))
        << c.spec.name << " on one thread";
  }
}

// On a GPU too (each Linear one launch for every trial, every trial's gather, loss and optimizer
// step one launch for all of them: Backend::fused_step; the whole fused step one CUDA Graph),
// against each trial alone on that GPU (train_model, its own recorded step).
TEST_P(Fused, GpuFuseEachTrialEndsAsItDoesOnTheGpuAlone) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  const Case& c = GetParam();
  EXPECT_LE(fused_against_alone(c, "cuda"), c.tolerance) << c.name;
}

// Trials whose optimizers are of different kinds (SGD with momentum, Adam, plain SGD, RMSprop)
// fuse too: each steps its own (on a GPU no launch takes them all, so each trial's kernels run one
// by one), and each ends as it does alone.
void other_optimizers(ModelSpec& s, int t) {
  OptimizerSettings& o = s.train.optimizer;
  const OptimizerType kinds[] = {OptimizerType::SGD, OptimizerType::Adam, OptimizerType::SGD,
                                 OptimizerType::RMSprop};
  o.type = kinds[t % 4];
  if (t == 1) o.lr = 0.01;
  if (t == 2) o.momentum = 0;
  if (t == 3) o.lr = 0.001;
}

TEST(FusedTrials, TrialsOfOtherOptimizersEachEndAsTheyDoAlone) {
  EXPECT_LE(fused_against_alone(kCases[0], "cpu", other_optimizers), kCases[0].tolerance);
}

TEST(FusedTrials, GpuFuseTrialsOfOtherOptimizersEachEndAsTheyDoOnTheGpuAlone) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  EXPECT_LE(fused_against_alone(kCases[0], "cuda", other_optimizers), kCases[0].tolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, Fused, ::testing::ValuesIn(kCases), [](const auto& param_info) {
  std::string n = param_info.param.name;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

// The CNN case without its BatchNorm (so that alone it may train in batch shards): its trials
// step one after another in a fused group on a CPU (fused_stepping), each its own Network.
ModelSpec conv_spec() {
  ModelSpec s = parse_spec(kCases[2].spec, "cnn.toml");
  std::erase_if(s.layers, [](const LayerSpec& l) { return l.type == LayerType::BatchNorm2d; });
  return s;
}
ModelSpec mlp_spec(int c) { return parse_spec(kCases[c].spec, "mlp.toml"); }

// Trials that step apart (a CPU's convolutional model) each end exactly as they do alone on the
// same device (its batch shards and threads), bit for bit: each steps its own Network, in rounds.
// A CNN large enough (16 MFLOP a step) for a batch in shards on two threads.
TEST(FusedTrials, ConvolutionalTrialsStepApartEachExactlyAsItTrainsAlone) {
  ModelSpec base = conv_spec();
  base.input = {1, 16, 16};
  base.layers[0].out = 16;
  base.train.batch = 128;
  const DataSplit data{random_data(300, 256, 3, 7), random_data(60, 256, 3, 8)};
  auto be = make_backend(parse_device("cpu", 2));
  constexpr int kTrials = 4;
  std::vector<ModelSpec> specs;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<FusedTrial> trials;
  for (int t = 0; t < kTrials; ++t) {
    specs.push_back(trial_spec(base, t));
    models.push_back(std::make_unique<Model>(specs.back(), *be));
    models.back()->init(specs.back().train.seed);
    trials.push_back({models.back().get(), specs.back().train, {}});
  }
  ASSERT_EQ(fused_stepping(models[0]->nodes(), models[0]->tensors(), base.train.batch,
                           DeviceKind::Cpu, be->execution_policy(), kTrials),
            FusedStepping::OneAfterAnother);
  const std::vector<TrainResult> fused = train_fused(trials, data);
  for (int t = 0; t < kTrials; ++t) {
    const auto i = static_cast<size_t>(t);
    Model alone(specs[i], *be);
    alone.init(specs[i].train.seed);
    Alone a{train_model(alone, data, specs[i].train), alone.export_params()};
    const std::string where = fmt::format("trial {}", t + 1);
    EXPECT_EQ(difference(fused[i], a, models[i]->export_params(), where), 0.0) << where;
    EXPECT_EQ(models[i]->parameter_hash(), alone.parameter_hash()) << where;
    EXPECT_EQ(fused[i].shards, a.result.shards) << where;
    EXPECT_GT(a.result.shards, 1) << where;  // in shards, as alone
    EXPECT_EQ(fused[i].fused_trials, kTrials) << where;
    EXPECT_GT(fused[i].step_ms.median, 0) << where;
    EXPECT_TRUE(std::isnan(fused[i].forward_backward_ms)) << where;  // the group's step, whole
  }
}

// A trial whose learning rate makes its loss overflow stops alone, with the result it gets alone
// (stopped at the same step); the others train to the end as they do alone. An MLP (its trials
// together) and, on a CPU, a CNN (its trials apart).
void diverging_trial_stops_alone(const std::string& device, const ModelSpec& base = mlp_spec(0),
                                 DataSplit (*split)() = disc_split) {
  const DataSplit data = split();
  auto be = make_backend(parse_device(device, 2));
  std::vector<ModelSpec> specs;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<FusedTrial> trials;
  for (int t = 0; t < 3; ++t) {
    ModelSpec s = base;
    s.train.schedule.reset();
    s.train.optimizer.lr = t == 1 ? 1e30 : 0.1;
    s.train.seed += static_cast<uint64_t>(t);
    specs.push_back(s);
    models.push_back(std::make_unique<Model>(s, *be));
    models.back()->init(s.train.seed);
    trials.push_back({models.back().get(), s.train, {}});
  }
  const std::vector<TrainResult> fused = train_fused(trials, data);
  for (int t = 0; t < 3; ++t) {
    const Alone alone = train_alone(specs[static_cast<size_t>(t)], data, device);
    EXPECT_EQ(fused[static_cast<size_t>(t)].stopped_diverged, t == 1);
    EXPECT_EQ(alone.result.stopped_diverged, t == 1);
    EXPECT_EQ(fused[static_cast<size_t>(t)].diverged_step, alone.result.diverged_step);
    EXPECT_EQ(fused[static_cast<size_t>(t)].diverged_epoch, alone.result.diverged_epoch);
    EXPECT_LE(
        difference(fused[static_cast<size_t>(t)], alone,
                   models[static_cast<size_t>(t)]->export_params(), fmt::format("trial {}", t + 1)),
        1e-5);
  }
}

TEST(FusedTrials, ADivergingTrialStopsAloneAndTheOthersGoOn) {
  diverging_trial_stops_alone("cpu");
  diverging_trial_stops_alone("cpu", conv_spec(), image_split);
}

// On a GPU the loss is checked every 256 steps and at each epoch's end, as train_model checks it
// there: the diverging trial stops at the step it stops alone.
TEST(FusedTrials, GpuFuseADivergingTrialStopsAloneAndTheOthersGoOn) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  diverging_trial_stops_alone("cuda");
}

// A rung of successive halving: paused after an epoch of its four, each trial says so.
TEST(FusedTrials, ARungPausesEveryTrialAfterItsEpochs) {
  const ModelSpec base = parse_spec(kCases[0].spec, "mlp.toml");
  const DataSplit data = disc_split();
  auto be = make_backend(parse_device("cpu", 2));
  std::vector<std::unique_ptr<Model>> models;
  std::vector<FusedTrial> trials;
  for (int t = 0; t < 2; ++t) {
    models.push_back(std::make_unique<Model>(base, *be));
    models.back()->init(base.train.seed);
    trials.push_back({models.back().get(), base.train, {}});
  }
  const auto fused = train_fused(trials, data, {.pause_after_epochs = 1});
  for (const TrainResult& r : fused) {
    EXPECT_TRUE(r.paused);
    EXPECT_EQ(r.epochs.size(), 1u);
  }
  // The same trial twice: the same figures, bit for bit.
  EXPECT_EQ(models[0]->parameter_hash(), models[1]->parameter_hash());
  EXPECT_EQ(fused[0].epochs[0].loss, fused[1].epochs[0].loss);
}

// A group paused at a rung, resumed, stopped between two epochs and resumed again ends
// bit-identical to the group never stopped: each trial's checkpoints are taken at the same step as
// the others'. An MLP (its trials together) and a CNN (apart, in rounds cut at each checkpoint).
// damage_one: trial 2's newest checkpoint damaged before the last resume, so that it resumes from
// the one before, behind the others: it catches up while they wait, and still every trial ends
// bit-identical to the group never stopped (before, the two trained apart, in other shards).
void paused_and_stopped_group_resumes_bit_identical(
    const ModelSpec& base, DataSplit (*split)(), bool damage_one = false,
    std::optional<FusedStepping> stepping = std::nullopt) {
  const DataSplit data = split();
  constexpr int kTrials = 3;
  TempDir dir("fused-resume");
  std::vector<std::string> notes;
  // Trains the group; `stop_at`: a stop request after this epoch of trial 1 (0: none).
  auto run = [&](bool checkpoints, bool resume, int64_t pause, int64_t stop_at,
                 std::vector<std::string>& hashes) {
    auto be = make_backend(parse_device("cpu", 2));
    std::vector<std::unique_ptr<Model>> models;
    std::vector<FusedTrial> trials;
    for (int t = 0; t < kTrials; ++t) {
      const ModelSpec s = trial_spec(base, t);
      models.push_back(std::make_unique<Model>(s, *be));
      models.back()->init(s.train.seed);
      FusedTrial trial{models.back().get(), s.train, {}, {}};
      if (t == 0 && stop_at > 0) {
        trial.on_epoch = [stop_at](const EpochRecord& e, int64_t) {
          if (e.epoch == stop_at) request_stop();
        };
      }
      if (checkpoints) {
        trial.checkpoint.dir = dir.path() / fmt::format("t{}", t);
        trial.checkpoint.every = {3, 0};
        trial.checkpoint.resume = resume;
        trial.checkpoint.note = [&notes](const std::string& m) { notes.push_back(m); };
      }
      trials.push_back(std::move(trial));
    }
    const auto results =
        train_fused(trials, data, {.pause_after_epochs = pause, .stepping = stepping});
    clear_stop_request();
    hashes.clear();
    for (const auto& m : models) hashes.push_back(m->parameter_hash());
    return results;
  };
  std::vector<std::string> whole, resumed;
  run(false, false, 0, 0, whole);
  const auto paused = run(true, false, 1, 0, resumed);
  for (const TrainResult& r : paused) EXPECT_TRUE(r.paused);
  const auto stopped = run(true, true, 0, 2, resumed);
  for (const TrainResult& r : stopped) {
    EXPECT_TRUE(r.interrupted);
    EXPECT_GT(r.resumed_at_step, 0);
  }
  if (damage_one) {
    std::vector<fs::path> kept;
    for (const auto& e : fs::directory_iterator(dir.path() / "t1"))
      if (e.path().extension() == ".json") kept.push_back(e.path());
    ASSERT_EQ(kept.size(), 2u);
    std::sort(kept.begin(), kept.end());  // step-000000000012.json: zero-padded
    std::ofstream(kept.back(), std::ios::trunc) << "{\"damaged\": true}";
  }
  notes.clear();
  const auto ended = run(true, true, 0, 0, resumed);
  const bool waited = std::any_of(notes.begin(), notes.end(), [](const std::string& m) {
    return m.find("it waits there while the trials behind catch up") != std::string::npos;
  });
  EXPECT_EQ(waited, damage_one) << ::testing::PrintToString(notes);
  for (const TrainResult& r : ended) {
    EXPECT_FALSE(r.interrupted);
    EXPECT_FALSE(r.paused);
  }
  EXPECT_EQ(whole, resumed);
  EXPECT_EQ(ended[0].epochs.size(), static_cast<size_t>(base.train.epochs));
  EXPECT_EQ(ended[3 - 1].epochs.size(), static_cast<size_t>(base.train.epochs));
}

TEST(FusedTrials, APausedAndStoppedGroupResumesBitIdentical) {
  paused_and_stopped_group_resumes_bit_identical(mlp_spec(1), noise_split);
}

TEST(FusedTrials, APausedAndStoppedGroupOfConvolutionalTrialsResumesBitIdentical) {
  paused_and_stopped_group_resumes_bit_identical(conv_spec(), image_split);
}

// Side by side (each trial its own network, as this small MLP steps), and together (each Linear
// one batched product over the trials: the trial behind catches up in a group of one).
TEST(FusedTrials, ATrialResumedBehindItsGroupCatchesUpAndAllEndBitIdentical) {
  paused_and_stopped_group_resumes_bit_identical(mlp_spec(1), noise_split, true);
  paused_and_stopped_group_resumes_bit_identical(mlp_spec(1), noise_split, true,
                                                 FusedStepping::Together);
}

TEST(FusedTrials, AConvolutionalTrialResumedBehindItsGroupCatchesUpAndAllEndBitIdentical) {
  paused_and_stopped_group_resumes_bit_identical(conv_spec(), image_split, true);
}

// A halving rung's survivor regrouped alone: a group of one trains its trial in the batch shards
// it takes alone (disc-8: two; a larger group's: one), and goes on from the checkpoint its group
// of two paused at, saying so, to the end the group of two would have given it, to f32 rounding.
TEST(FusedTrials, ARegroupedTrialGoesOnInItsOwnShards) {
  ModelSpec base = *builtin_spec("disc-8");
  base.train.epochs = 3;
  const DataSplit data = disc_split();
  TempDir dir("fused-regrouped");
  auto be = make_backend(parse_device("cpu", 2));
  std::vector<std::string> notes;
  // `k` trials (seeds apart) from epoch 0 or their checkpoints, paused after `pause` epochs.
  auto run = [&](int k, bool checkpoints, bool resume, int64_t pause) {
    std::vector<std::unique_ptr<Model>> models;
    std::vector<FusedTrial> trials;
    for (int t = 0; t < k; ++t) {
      ModelSpec s = base;
      s.train.seed += static_cast<uint64_t>(t);
      models.push_back(std::make_unique<Model>(s, *be));
      models.back()->init(s.train.seed);
      FusedTrial trial{models.back().get(), s.train, {}, {}};
      if (checkpoints) {
        trial.checkpoint.dir = dir.path() / fmt::format("t{}", t);
        trial.checkpoint.every = {5, 0};
        trial.checkpoint.resume = resume;
        trial.checkpoint.note = [&notes](const std::string& m) { notes.push_back(m); };
      }
      trials.push_back(std::move(trial));
    }
    return train_fused(trials, data, {.pause_after_epochs = pause});
  };
  const std::vector<TrainResult> whole = run(2, false, false, 0);
  ASSERT_EQ(whole[0].shards, 1);
  const std::vector<TrainResult> paused = run(2, true, false, 1);
  ASSERT_TRUE(paused[0].paused);
  EXPECT_TRUE(paused[0].resumed_differently.empty());
  // Alone, paused again after epoch 2, then to the end from that checkpoint of its own shards:
  // the first resume's cause is carried to the end.
  const std::vector<TrainResult> regrouped = run(1, true, true, 2);
  EXPECT_NE(regrouped[0].resumed_differently.find("written in 1 batch shard"), std::string::npos)
      << regrouped[0].resumed_differently;
  const std::vector<TrainResult> alone = run(1, true, true, 0);
  EXPECT_EQ(alone[0].shards, 2);
  EXPECT_FALSE(alone[0].paused);
  EXPECT_GT(alone[0].resumed_at_step, 0);
  EXPECT_EQ(alone[0].resumed_differently, regrouped[0].resumed_differently);
  EXPECT_TRUE(whole[0].resumed_differently.empty());
  ASSERT_EQ(alone[0].epochs.size(), 3u);
  const bool told = std::any_of(notes.begin(), notes.end(), [](const std::string& m) {
    return m.find("written in 1 batch shard (a fused group's), and this run takes 2") !=
           std::string::npos;
  });
  EXPECT_TRUE(told) << ::testing::PrintToString(notes);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(alone[0].epochs[e].loss, whole[0].epochs[e].loss,
                1e-5 * std::abs(whole[0].epochs[e].loss))
        << "epoch " << e + 1;
  }
}

// A step limit (to time the group) stops every trial there, inside an epoch or at its end: an MLP
// of 11 steps an epoch (its trials together), a CNN of 7 (apart).
TEST(FusedTrials, AStepLimitStopsEveryTrialThere) {
  for (const auto& [base, split, per_epoch] : {std::tuple{mlp_spec(0), &disc_split, int64_t{11}},
                                               std::tuple{conv_spec(), &image_split, int64_t{7}}}) {
    const DataSplit data = split();
    auto be = make_backend(parse_device("cpu", 2));
    for (const int64_t limit : {int64_t{5}, per_epoch, per_epoch + 4}) {
      std::vector<std::unique_ptr<Model>> models;
      std::vector<FusedTrial> trials;
      for (int t = 0; t < 2; ++t) {
        models.push_back(std::make_unique<Model>(base, *be));
        models.back()->init(base.train.seed + static_cast<uint64_t>(t));
        trials.push_back({models.back().get(), base.train, {}, {}});
      }
      const auto fused = train_fused(trials, data, {.max_steps = limit});
      for (const TrainResult& r : fused) {
        EXPECT_EQ(r.steps_taken, limit) << limit;
        EXPECT_EQ(r.epochs.size(), static_cast<size_t>(limit / per_epoch)) << limit;
        EXPECT_FALSE(r.interrupted);
        EXPECT_TRUE(r.step_limited) << limit;  // no stuck warning for a measurement
      }
    }
  }
}

// A group's memory: each trial's run alone but its data, K times, and the data once per data set;
// how many fit is what the device has free over one trial's share.
TEST(FusedTrials, AGroupsMemoryIsEachTrialsRunWithTheDataOnce) {
  const ModelSpec base = parse_spec(kCases[2].spec, "cnn.toml");
  const DataSplit data = image_split();
  auto be = make_backend(parse_device("cpu", 1));
  Model model(base, *be);
  ExecutionOptions alone;
  alone.shards = 1;
  const MemoryEstimate one = training_memory(model, data, base.train, alone);
  const MemoryEstimate group = fused_memory(model, data, base.train, 5, 2);
  EXPECT_EQ(group.parameters, 5 * one.parameters);
  EXPECT_EQ(group.optimizer, 5 * one.optimizer);
  EXPECT_EQ(group.activations, 5 * one.activations);
  EXPECT_EQ(group.data, 2 * one.data);
  // What is free moves with the machine's other processes: read around the call, 64 MiB apart.
  const int64_t before = *be->free_memory_bytes();  // the CPU says what is free
  const auto fit = fused_trials_that_fit(model, data, base.train);
  const int64_t after = *be->free_memory_bytes();
  ASSERT_TRUE(fit.has_value());
  const int64_t each = one.total() - one.data, slack = int64_t{64} << 20;
  EXPECT_GE(*fit, (std::min(before, after) / 2 - slack - one.data) / each);
  EXPECT_LE(*fit, (std::max(before, after) / 2 + slack - one.data) / each);
}

TEST(FusedTrials, WhatCannotBeFusedIsRefusedSayingWhy) {
  const ModelSpec base = parse_spec(kCases[0].spec, "mlp.toml");
  const DataSplit data = disc_split();
  auto be = make_backend(parse_device("cpu", 1));
  ModelSpec wider = base;
  wider.layers[2].out = 32;
  ModelSpec other_batch = base;
  other_batch.train.batch = 50;
  Model a(base, *be), b(wider, *be), c(other_batch, *be);
  std::vector<FusedTrial> shapes{{&a, base.train, {}}, {&b, wider.train, {}}};
  expect_user_error([&] { train_fused(shapes, data); },
                    {"cannot train as one", "trial 2 has another architecture", "layer 3"});
  std::vector<FusedTrial> batches{{&a, base.train, {}}, {&c, other_batch.train, {}}};
  expect_user_error([&] { train_fused(batches, data); },
                    {"trial 2 trains on batches of 50", "trial 1 on batches of 96"});
}

// The GPU's batched Linear (the small kernels with the trial as a grid dimension, and cuBLASLt's
// strided batches for layers past them) against the CPU's, forward and backward, every
// activation, at a stride; the padding between trials' weights is never written; a trial alone
// in a fused run (trials 1, a stride) too.
TEST(FusedTrials, CudaFuseTheBatchedLinearEqualsTheCpus) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  auto cpu = make_backend(parse_device("cpu", 1));
  auto gpu = make_backend(parse_device("cuda", 0));
  constexpr int64_t kBatch = 5;
  // Small kernels (7 x 6, 8 x 16, 64 x 2), then cuBLASLt (600 in, 520 out: past 512).
  for (const auto& [kTrials, kIn, kOut, act] :
       {std::tuple{int64_t{3}, int64_t{7}, int64_t{6}, Activation::None},
        std::tuple{int64_t{3}, int64_t{8}, int64_t{16}, Activation::Tanh},
        std::tuple{int64_t{3}, int64_t{64}, int64_t{2}, Activation::Sigmoid},
        std::tuple{int64_t{1}, int64_t{8}, int64_t{16}, Activation::ReLU},
        std::tuple{int64_t{3}, int64_t{600}, int64_t{40}, Activation::ReLU},
        std::tuple{int64_t{2}, int64_t{24}, int64_t{520}, Activation::Tanh},
        std::tuple{int64_t{1}, int64_t{600}, int64_t{8}, Activation::None}}) {
    const int64_t kStride = padded_stride(kIn, kOut);
    Rng rng(static_cast<uint64_t>(kIn * 1000 + kOut));
    auto fill = [&](int64_t n) { return uniform_values(rng, n); };
    const std::vector<float> params = fill(kTrials * kStride), src = fill(kTrials * kBatch * kIn),
                             d_dst = fill(kTrials * kBatch * kOut);
    const LinearShape shape{kBatch, kIn, kOut, true, act, true, false, kTrials, kStride};
    // The CPU's.
    std::vector<float> dst(static_cast<size_t>(kTrials * kBatch * kOut)), g = d_dst;
    std::vector<float> grads(params.size()), d_src(src.size());
    auto on_cpu = cpu->linear(shape);
    on_cpu->forward(src.data(), params.data(), params.data() + kOut * kIn, dst.data());
    on_cpu->backward(src.data(), params.data(), dst.data(), g.data(), grads.data(),
                     grads.data() + kOut * kIn, d_src.data());
    // The GPU's, its gradients' padding set to a marker first.
    auto upload = [&](const std::vector<float>& v) {
      DeviceBuffer b = gpu->allocate(sizeof(float) * v.size());
      gpu->upload(b.as<float>(), v.data(), sizeof(float) * v.size());
      return b;
    };
    auto download = [&](const DeviceBuffer& b, size_t n) {
      std::vector<float> v(n);
      gpu->download(v.data(), b.as<float>(), sizeof(float) * n);
      return v;
    };
    DeviceBuffer p = upload(params), x = upload(src), dy = upload(d_dst),
                 dw = upload(std::vector<float>(params.size(), 7.0f)), y = upload(dst),
                 dx = upload(src);
    auto on_gpu = gpu->linear(shape);
    on_gpu->forward(x.as<float>(), p.as<float>(), p.as<float>() + kOut * kIn, y.as<float>());
    on_gpu->backward(x.as<float>(), p.as<float>(), y.as<float>(), dy.as<float>(), dw.as<float>(),
                     dw.as<float>() + kOut * kIn, dx.as<float>());
    gpu->synchronize();
    const std::string what =
        fmt::format("{} trials of {} x {} {}", kTrials, kIn, kOut, activation_name(act));
    auto expect_near = [&](const std::vector<float>& a, const std::vector<float>& b,
                           const char* name) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], b[i], 2e-5f * std::max(1.0f, std::abs(b[i])))
            << what << ", " << name << "[" << i << "]";
      }
    };
    expect_near(download(y, dst.size()), dst, "dst");
    std::vector<float> gpu_grads = download(dw, grads.size());
    for (int64_t t = 0; t < kTrials; ++t) {
      for (int64_t i = kOut * kIn + kOut; i < kStride; ++i) {
        ASSERT_EQ(gpu_grads[static_cast<size_t>(t * kStride + i)], 7.0f) << what << ", padding";
        gpu_grads[static_cast<size_t>(t * kStride + i)] = 0.0f;
      }
    }
    expect_near(gpu_grads, grads, "d_weights and d_bias");
    expect_near(download(dx, d_src.size()), d_src, "d_src");
  }
}

// The batched Linear against one kernel per trial, at a stride, with every activation: forward
// and backward bit-identical where both take the small loops, else equal to f32 rounding (the
// loops' own arithmetic is checked against a reference in test_ops.cpp's Linear cases).
TEST(FusedTrials, TheBatchedLinearEqualsOneKernelPerTrial) {
  auto be = make_backend(parse_device("cpu", 1));
  constexpr int64_t kTrials = 3, kBatch = 21;  // 2 blocks of 8 rows and 5 left (32 x 2)
  // oneDNN's batched product (7 x 6), and the loops of small powers of two (8 x 16, 2 x 4); outputs
  // narrower than a vector over inputs a vector wide or more, d_W along the inputs (64 x 2, 32 x 2,
  // 16 x 8); a batch of 21, so that d_W's last row is summed alone and the forward takes
  // blocks of rows (16 / OUT at once) and rows left over. Both widths 16 or more (16 x 32, 64 x 16,
  // 32 x 64): W transposed in 16 x 16 tiles, d_W along the inputs.
  for (const auto& [kIn, kOut, act] : {std::tuple{int64_t{7}, int64_t{6}, Activation::None},
                                       std::tuple{int64_t{7}, int64_t{6}, Activation::ReLU},
                                       std::tuple{int64_t{8}, int64_t{16}, Activation::Tanh},
                                       std::tuple{int64_t{64}, int64_t{2}, Activation::Sigmoid},
                                       std::tuple{int64_t{32}, int64_t{2}, Activation::ReLU},
                                       std::tuple{int64_t{16}, int64_t{8}, Activation::None},
                                       std::tuple{int64_t{2}, int64_t{4}, Activation::ReLU},
                                       std::tuple{int64_t{16}, int64_t{32}, Activation::ReLU},
                                       std::tuple{int64_t{64}, int64_t{16}, Activation::Tanh},
                                       std::tuple{int64_t{32}, int64_t{64}, Activation::None}}) {
    const int64_t kStride = padded_stride(kIn, kOut);
    Rng rng(static_cast<uint64_t>(kIn * 100 + kOut));
    auto fill = [&](int64_t n) { return uniform_values(rng, n); };
    std::vector<float> params = fill(kTrials * kStride), src = fill(kTrials * kBatch * kIn),
                       d_dst = fill(kTrials * kBatch * kOut);
    auto batched = be->linear({kBatch, kIn, kOut, true, act, true, false, kTrials, kStride});
    auto one = be->linear({kBatch, kIn, kOut, true, act, true, false});
    std::vector<float> dst(static_cast<size_t>(kTrials * kBatch * kOut)), dst1(dst.size());
    std::vector<float> grads(params.size()), grads1(params.size());
    std::vector<float> d_src(src.size()), d_src1(src.size());
    std::vector<float> g = d_dst, g1 = d_dst;
    batched->forward(src.data(), params.data(), params.data() + kOut * kIn, dst.data());
    batched->backward(src.data(), params.data(), dst.data(), g.data(), grads.data(),
                      grads.data() + kOut * kIn, d_src.data());
    for (int64_t t = 0; t < kTrials; ++t) {
      const float* w = params.data() + t * kStride;
      float* y = dst1.data() + t * kBatch * kOut;
      one->forward(src.data() + t * kBatch * kIn, w, w + kOut * kIn, y);
      one->backward(src.data() + t * kBatch * kIn, w, y, g1.data() + t * kBatch * kOut,
                    grads1.data() + t * kStride, grads1.data() + t * kStride + kOut * kIn,
                    d_src1.data() + t * kBatch * kIn);
    }
    // Widths that are powers of two up to 64 x 64: one model's layer takes the fused loops as a
    // group of one, so each trial computes exactly what it computes alone. Elsewhere oneDNN's
    // batched products add in another order than one product's: the last bits differ, more over
    // longer sums.
    const auto power_of_two = [](int64_t n) { return n >= 1 && n <= 64 && (n & (n - 1)) == 0; };
    const bool small = power_of_two(kIn) && power_of_two(kOut) && kIn * kOut <= 64 * 64;
    const float tolerance =
        small ? 0.0f : 1e-6f * static_cast<float>(std::max<int64_t>(1, std::max(kIn, kOut) / 16));
    auto expect_near = [&](const std::vector<float>& a, const std::vector<float>& b,
                           const char* what) {
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], tolerance * std::max(1.0f, std::abs(b[i])))
            << activation_name(act) << ", " << what << "[" << i << "]";
      }
    };
    expect_near(dst, dst1, "dst");
    expect_near(grads, grads1, "d_weights and d_bias");
    expect_near(d_src, d_src1, "d_src");
    // Each trial's weights alone: the padding between them is never written.
    for (int64_t t = 0; t < kTrials; ++t) {
      for (int64_t i = kOut * kIn + kOut; i < kStride; ++i) EXPECT_EQ(grads[t * kStride + i], 0.0f);
    }
  }
}

// An LSTM of kTrials trials (their parameters at a stride with padding after each) on a
// backend, forward then backward: as one fused kernel (LstmShape::trials) or one kernel per trial.
struct LstmTrials {
  static constexpr int64_t kTrials = 3, kBatch = 3, kSteps = 5, kInput = 7;
  int64_t layers = 1, hidden = 6;
  bool sequence = false, need_d_src = true;
  std::vector<int64_t> offsets;  // each layer's weight_ih, weight_hh, bias_ih, bias_hh
  int64_t stride = 0;
  std::vector<float> params, src, d_dst;

  LstmTrials(int64_t layer_count, bool whole_sequence, bool d_src_needed, int64_t hidden_size)
      : layers(layer_count),
        hidden(hidden_size),
        sequence(whole_sequence),
        need_d_src(d_src_needed) {
    const int64_t gate_rows = 4 * hidden;
    int64_t size = 0;
    for (int64_t k = 0; k < layers; ++k) {
      for (const int64_t n :
           {gate_rows * (k == 0 ? kInput : hidden), gate_rows * hidden, gate_rows, gate_rows}) {
        offsets.push_back(size);
        size += n;
      }
    }
    stride = (size + 13 + 15) / 16 * 16;  // padding, and whole 64-byte lines (model_stride)
    Rng rng(static_cast<uint64_t>(layers * 1000 + hidden * 10 + (sequence ? 1 : 0)));
    params = uniform_values(rng, kTrials * stride);
    src = uniform_values(rng, kTrials * kBatch * kSteps * kInput);
    d_dst = uniform_values(rng, kTrials * kBatch * out());
  }
  int64_t out() const { return sequence ? kSteps * hidden : hidden; }
  std::string what() const {
    return fmt::format("{} layer(s) of {}, sequence {}, d_src {}", layers, hidden, sequence,
                       need_d_src);
  }

  struct Result {
    std::vector<float> dst, grads, d_src;
  };
  // The gradients start as 7s, so that a write into the padding between trials shows.
  Result run(Backend& be, bool fused) const {
    auto upload = [&](const std::vector<float>& v) {
      DeviceBuffer b = be.allocate(sizeof(float) * std::max<size_t>(v.size(), 1));
      if (!v.empty()) be.upload(b.as<float>(), v.data(), sizeof(float) * v.size());
      return b;
    };
    auto download = [&](const DeviceBuffer& b, size_t n) {
      std::vector<float> v(n);
      if (n > 0) be.download(v.data(), b.as<float>(), sizeof(float) * n);
      return v;
    };
    const size_t dst_size = static_cast<size_t>(kTrials * kBatch * out());
    DeviceBuffer p = upload(params), x = upload(src), dy = upload(d_dst),
                 dw = upload(std::vector<float>(params.size(), 7.0f)),
                 y = upload(std::vector<float>(dst_size)),
                 dx = upload(std::vector<float>(need_d_src ? src.size() : 0));
    LstmShape shape{kBatch, kSteps, kInput, hidden, layers, sequence, need_d_src, false};
    if (fused) {
      shape.models = kTrials;
      shape.model_stride = stride;
    }
    auto kernel = be.lstm(shape);
    const int64_t in = kBatch * kSteps * kInput, o = kBatch * out();
    for (int64_t t = 0; t < (fused ? 1 : kTrials); ++t) {
      std::vector<LstmLayerParams> lp;
      std::vector<LstmLayerGrads> lg;
      for (int64_t k = 0; k < layers; ++k) {
        const int64_t* off = &offsets[static_cast<size_t>(4 * k)];
        const float* w = p.as<float>() + t * stride;
        float* g = dw.as<float>() + t * stride;
        lp.push_back({w + off[0], w + off[1], w + off[2], w + off[3]});
        lg.push_back({g + off[0], g + off[1], g + off[2], g + off[3]});
      }
      kernel->forward(x.as<float>() + t * in, lp.data(), y.as<float>() + t * o);
      kernel->backward(x.as<float>() + t * in, lp.data(), dy.as<float>() + t * o, lg.data(),
                       need_d_src ? dx.as<float>() + t * in : nullptr);
    }
    be.synchronize();
    return {download(y, dst_size), download(dw, params.size()),
            download(dx, need_d_src ? src.size() : 0)};
  }
};

// Each case's kernels against one per trial, to `tolerance` relative to max(1, |expected|).
void expect_near_lstm(const LstmTrials& c, const LstmTrials::Result& got,
                      const LstmTrials::Result& want, float tolerance) {
  auto near = [&](const std::vector<float>& a, const std::vector<float>& b, const char* name) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], tolerance * std::max(1.0f, std::abs(b[i])))
          << c.what() << ", " << name << "[" << i << "]";
    }
  };
  near(got.dst, want.dst, "dst");
  near(got.grads, want.grads, "gradients");  // the padding between trials: 7 in both
  near(got.d_src, want.d_src, "d_src");
}

const LstmTrials kLstmCases[] = {{1, false, false, 6}, {1, true, true, 6},  {2, false, true, 6},
                                 {2, true, false, 6},  {1, true, true, 72}, {2, false, true, 72}};

// The fused trials' LSTM (its per-step products batched over the trials up to 64 hidden units,
// trial by trial above) against one kernel per trial: one and two layers, the whole sequence or
// its last step out, with and without a gradient for the input; forward and backward equal to f32
// rounding (the batched products sum in another order than one trial's: within 3e-7 measured).
TEST(FusedTrials, TheBatchedLstmEqualsOneKernelPerTrial) {
  auto be = make_backend(parse_device("cpu", 1));
  ASSERT_TRUE(be->lstm_fuses_models());
  for (const LstmTrials& c : kLstmCases) {
    expect_near_lstm(c, c.run(*be, true), c.run(*be, false), 1e-6f);
  }
}

// The GPU's fused LSTM (every trial's step one launch, the trial as blockIdx.z; the products as
// cuBLASLt's strided batches) against the CPU's LSTM one trial at a time; its gradients' padding
// between trials never written.
TEST(FusedTrials, CudaFuseTheBatchedLstmEqualsTheCpus) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  auto cpu = make_backend(parse_device("cpu", 1));
  auto gpu = make_backend(parse_device("cuda", 0));
  for (const LstmTrials& c : kLstmCases) {
    expect_near_lstm(c, c.run(*gpu, true), c.run(*cpu, false), 2e-5f);
  }
}

// The GPU fuses a group's LSTM as one kernel by default (CROSSOVER_GPU_FUSE_LSTM=0 turns it
// off), and each fused LSTM trial ends as it does on the GPU alone.
TEST(FusedTrials, GpuFuseTheLstmAsOneKernelEachTrialEndsAsItDoesOnTheGpuAlone) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  ASSERT_EQ(::setenv("CROSSOVER_GPU_FUSE_LSTM", "0", 1), 0);
  EXPECT_FALSE(make_backend(parse_device("cuda", 0))->lstm_fuses_models());
  ::unsetenv("CROSSOVER_GPU_FUSE_LSTM");
  const Case& lstm = kCases[3];
  ASSERT_EQ(std::string(lstm.name), "lstm-adam");
  EXPECT_TRUE(make_backend(parse_device("cuda", 0))->lstm_fuses_models());
  const double difference = fused_against_alone(lstm, "cuda");
  EXPECT_LE(difference, lstm.tolerance);
}

}  // namespace
}  // namespace xo

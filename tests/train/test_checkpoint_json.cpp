// A checkpoint's JSON through its field lists: every double of the state read back bit for bit
// (NaN, the infinities, -0 and subnormals included), and a checkpoint in the layout written before
// the field lists (crossover.checkpoint/2 of 0.2.x: "nan" strings, `train_error`, the loss sums as
// arrays) read back to the same state as the new writer's.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/hash.h"
#include "io/json_fields.h"
#include "train/checkpoint_json.h"

namespace xo {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The run the state below stands in: epoch 3 of 10, step 2 of 5, batches of 4 of 20 samples.
const CheckpointRun kRun{10, 5, 4, 20, true};
constexpr int64_t kSteps = 3 * 5 + 2;

CheckpointSnapshot snapshot() {
  CheckpointSnapshot s(42);
  TrainState& t = s.state;
  t.epoch = 3;
  t.step = 2;
  t.steps_taken = kSteps;
  t.in_epoch = true;
  t.timed = 2;
  t.epoch_ms = 0.1 + 0.2;
  t.shuffle_rng.uniform();
  for (int32_t i = 0; i < 20; ++i) t.order.push_back((i * 7) % 20);
  // Doubles that a 15-digit or a null writer would change: not finite, -0, subnormal, 1/3.
  t.epochs = {{1, 1.0 / 3, 50.5, 0.25, kNaN, kNaN, kNaN, kNaN, 0.1},
              {2, kInf, 12.0, 1e-310, 0.7, 61.0, kNaN, kNaN, 0.05},
              {3, -0.0, 0.0, 2.5, 0.6, 62.5, 0.9, 55.0, 0.025}};
  t.train_seconds = 0.25 + 1e-310 + 2.5;
  t.checked_loss_sum = 2.0 / 3;
  t.checked_step = 1;
  t.last_finite_loss = 0.6931471805599453;
  t.last_finite_epoch = 3;
  t.last_finite_step = 1;
  t.resumed_differently = "written in 2 batch shards";
  t.schedule = {0.025, 3, -kInf, 1, 0};
  t.early_stopping = {kInf, 0, 0, false};
  for (double ms : {3.5, 1.25, 1.5}) t.times.step.add(ms);
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> ms(0.5, 2.0);
  for (size_t i = 0; i <= TimingSeries::kExactSamples + 10; ++i) t.times.data.add(ms(g));
  t.times.forward_backward.add(kNaN);
  s.optimizer_steps = kSteps;
  s.step_counter = kSteps;
  s.position = 8;
  s.stats[0] = {1.0 / 7, 5, 8};
  s.stats[1] = {0, 0, 0};
  return s;
}

CheckpointRead read_back(const std::string& text) {
  const ReadCheckpointJson j = parse_checkpoint_json(text, "step-000000000017.json");
  return read_checkpoint_state(j, kRun, kSteps, TrainState(42));
}

std::string written(const CheckpointSnapshot& s) {
  return checkpoint_json(s, "mlp", RunFingerprint{"0.2.0", "spec", "data", "cpu", "settings"},
                         "step-000000000017.safetensors", "bytes")
      .dump(1);
}

// The same double, bit for bit (every NaN the writer writes is the quiet NaN).
void expect_same(double a, double b, const std::string& what) {
  EXPECT_EQ(std::bit_cast<uint64_t>(a), std::bit_cast<uint64_t>(b))
      << what << ": " << a << ", " << b;
}

void expect_same(const TimingSeries& a, const TimingSeries& b, const std::string& what) {
  ASSERT_EQ(a.folded(), b.folded()) << what;
  expect_same(a.warmup(), b.warmup(), what + " warm-up");
  if (!a.folded()) {
    const std::vector<double> x = a.samples(), y = b.samples();
    ASSERT_EQ(x.size(), y.size()) << what;
    for (size_t i = 0; i < x.size(); ++i) expect_same(x[i], y[i], what);
    return;
  }
  const TimingSeries::Folded &x = a.folded_state(), &y = b.folded_state();
  EXPECT_EQ(x.count, y.count) << what;
  expect_same(x.mean, y.mean, what + " mean");
  expect_same(x.m2, y.m2, what + " m2");
  expect_same(x.min, y.min, what + " min");
  expect_same(x.max, y.max, what + " max");
  EXPECT_EQ(x.bins, y.bins) << what;
}

void expect_same(const CheckpointRead& r, const CheckpointSnapshot& s) {
  const TrainState &a = r.state, &b = s.state;
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.steps_taken, b.steps_taken);
  EXPECT_EQ(a.in_epoch, b.in_epoch);
  EXPECT_EQ(a.timed, b.timed);
  expect_same(a.epoch_ms, b.epoch_ms, "epoch_ms");
  EXPECT_EQ(a.shuffle_rng.state(), b.shuffle_rng.state());
  EXPECT_EQ(a.order, b.order);
  ASSERT_EQ(a.epochs.size(), b.epochs.size());
  for (size_t i = 0; i < a.epochs.size(); ++i) {
    const EpochRecord &x = a.epochs[i], &y = b.epochs[i];
    const std::string e = "epoch " + std::to_string(i + 1);
    EXPECT_EQ(x.epoch, y.epoch) << e;
    expect_same(x.loss, y.loss, e + " loss");
    expect_same(x.train_error, y.train_error, e + " train_error");
    expect_same(x.seconds, y.seconds, e + " seconds");
    expect_same(x.test_loss, y.test_loss, e + " test_loss");
    expect_same(x.test_accuracy, y.test_accuracy, e + " test_accuracy");
    expect_same(x.val_loss, y.val_loss, e + " val_loss");
    expect_same(x.val_accuracy, y.val_accuracy, e + " val_accuracy");
    expect_same(x.lr, y.lr, e + " lr");
  }
  expect_same(a.train_seconds, b.train_seconds, "train_seconds");
  EXPECT_EQ(a.diverged_epoch, b.diverged_epoch);
  expect_same(a.checked_loss_sum, b.checked_loss_sum, "loss_check.sum");
  EXPECT_EQ(a.checked_step, b.checked_step);
  expect_same(a.last_finite_loss, b.last_finite_loss, "last_finite_loss");
  EXPECT_EQ(a.last_finite_epoch, b.last_finite_epoch);
  EXPECT_EQ(a.last_finite_step, b.last_finite_step);
  EXPECT_EQ(a.resumed_differently, b.resumed_differently);
  expect_same(a.schedule.lr, b.schedule.lr, "schedule.lr");
  EXPECT_EQ(a.schedule.last_epoch, b.schedule.last_epoch);
  expect_same(a.schedule.best, b.schedule.best, "schedule.best");
  EXPECT_EQ(a.schedule.num_bad_epochs, b.schedule.num_bad_epochs);
  EXPECT_EQ(a.schedule.cooldown_counter, b.schedule.cooldown_counter);
  expect_same(a.early_stopping.best, b.early_stopping.best, "early_stopping.best");
  EXPECT_EQ(a.early_stopping.wait, b.early_stopping.wait);
  EXPECT_EQ(a.early_stopping.best_epoch, b.early_stopping.best_epoch);
  EXPECT_EQ(a.early_stopping.stop, b.early_stopping.stop);
  expect_same(a.times.step, b.times.step, "times.step");
  expect_same(a.times.data, b.times.data, "times.data");
  expect_same(a.times.forward_backward, b.times.forward_backward, "times.forward_backward");
  expect_same(a.times.optimizer, b.times.optimizer, "times.optimizer");
  const CheckpointCounters& c = r.counters;
  EXPECT_EQ(c.optimizer_steps, s.optimizer_steps);
  EXPECT_EQ(c.dropout_step, s.step_counter);
  EXPECT_EQ(c.position, s.position);
  for (int i = 0; i < 2; ++i) {
    expect_same(c.stats[i].loss_sum, s.stats[i].loss_sum, "loss_sum");
    expect_same(c.stats[i].correct, s.stats[i].correct, "correct");
    expect_same(c.stats[i].samples, s.stats[i].samples, "samples");
  }
}

TEST(CheckpointJson, EveryDoubleOfTheStateReadsBackBitForBit) {
  const CheckpointSnapshot s = snapshot();
  ASSERT_TRUE(s.state.times.data.folded());
  expect_same(read_back(written(s)), s);
}

TEST(CheckpointJson, WritesTheResultsNamesOfAnEpoch) {
  const auto j = nlohmann::json::parse(written(snapshot()));
  const auto& e = j.at("epochs").at(1);
  EXPECT_TRUE(e.contains("train_error_percent")) << e.dump();
  EXPECT_TRUE(e.contains("test_accuracy_percent")) << e.dump();
  EXPECT_EQ(e.at("loss"), "inf");
  EXPECT_EQ(j.at("early_stopping").at("best"), "inf");
  EXPECT_EQ(j.at("schedule").at("best"), "-inf");
  EXPECT_EQ(j.begin().key(), "checksum") << "sorted here; the file keeps the listed order";
  EXPECT_EQ(nlohmann::ordered_json::parse(written(snapshot())).begin().key(), "format");
}

// The JSON as checkpoint_json wrote it before the field lists (crossover.checkpoint/2 of 0.2.x):
// every field by hand, non-finite numbers as strings, the percentages' plain names, the loss sums
// as arrays; signed as it was.
std::string old_layout(const CheckpointSnapshot& s) {
  using OJson = nlohmann::ordered_json;
  auto number = [](double v) -> OJson {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  };
  auto numbers = [&](const std::vector<double>& v) {
    OJson a = OJson::array();
    for (double x : v) a.push_back(number(x));
    return a;
  };
  auto series = [&](const TimingSeries& t) -> OJson {
    if (!t.folded()) return numbers(t.samples());
    const TimingSeries::Folded& f = t.folded_state();
    OJson bins = OJson::array(), samples = OJson::array();
    for (const auto& [bin, n] : f.bins) {
      bins.push_back(bin);
      samples.push_back(n);
    }
    return {{"warmup", number(t.warmup())}, {"count", f.count},
            {"mean", number(f.mean)},       {"m2", number(f.m2)},
            {"min", number(f.min)},         {"max", number(f.max)},
            {"bins", std::move(bins)},      {"samples", std::move(samples)}};
  };
  auto stats = [&](const LossStats& x) {
    return OJson{number(x.loss_sum), number(x.correct), number(x.samples)};
  };
  const TrainState& t = s.state;
  OJson epochs = OJson::array();
  for (const EpochRecord& e : t.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"loss", number(e.loss)},
                      {"train_error", number(e.train_error)},
                      {"seconds", number(e.seconds)},
                      {"test_loss", number(e.test_loss)},
                      {"test_accuracy", number(e.test_accuracy)},
                      {"val_loss", number(e.val_loss)},
                      {"val_accuracy", number(e.val_accuracy)},
                      {"lr", number(e.lr)}});
  }
  OJson j = {
      {"format", "crossover.checkpoint/2"},
      {"model", "mlp"},
      {"fingerprint",
       {{"version", "0.2.0"},
        {"spec", "spec"},
        {"data", "data"},
        {"device", "cpu"},
        {"settings", "settings"},
        {"ranks", 1}}},
      {"tensors",
       {{"file", "step-000000000017.safetensors"}, {"bytes", 5}, {"hash", "0123456789abcdef"}}},
      {"epoch", t.epoch},
      {"in_epoch", t.in_epoch},
      {"step", t.step},
      {"steps_taken", t.steps_taken},
      {"optimizer_steps", s.optimizer_steps},
      {"dropout_step", s.step_counter},
      {"position", s.position},
      {"loss_stats", stats(s.stats[0])},
      {"partial_loss_stats", stats(s.stats[1])},
      {"shuffle_generator", t.shuffle_rng.state()},
      {"order", t.order},
      {"epochs", epochs},
      {"train_seconds", number(t.train_seconds)},
      {"diverged_epoch", t.diverged_epoch},
      {"resumed_differently", t.resumed_differently},
      {"schedule",
       {{"lr", number(t.schedule.lr)},
        {"last_epoch", t.schedule.last_epoch},
        {"best", number(t.schedule.best)},
        {"num_bad_epochs", t.schedule.num_bad_epochs},
        {"cooldown_counter", t.schedule.cooldown_counter}}},
      {"early_stopping",
       {{"best", number(t.early_stopping.best)},
        {"wait", t.early_stopping.wait},
        {"best_epoch", t.early_stopping.best_epoch},
        {"stop", t.early_stopping.stop}}},
      {"loss_check",
       {{"sum", number(t.checked_loss_sum)},
        {"step", t.checked_step},
        {"last_finite_loss", number(t.last_finite_loss)},
        {"last_finite_epoch", t.last_finite_epoch},
        {"last_finite_step", t.last_finite_step}}},
      {"times",
       {{"timed_steps", t.timed},
        {"epoch_ms", number(t.epoch_ms)},
        {"step", series(t.times.step)},
        {"data", series(t.times.data)},
        {"forward_backward", series(t.times.forward_backward)},
        {"optimizer", series(t.times.optimizer)}}}};
  j["checksum"] = Hasher().text(j.dump()).hex();
  return j.dump(1);
}

TEST(CheckpointJson, TheLayoutBeforeTheFieldListsReadsAsTheNewWritersDoes) {
  const CheckpointSnapshot s = snapshot();
  const CheckpointRead old = read_back(old_layout(s));
  expect_same(old, s);
  expect_same(read_back(written(s)), s);
}

// A checkpoint of 0.2.0 had no rate per epoch, no train_seconds and no note: the run's one rate,
// the epochs' seconds summed and no note.
TEST(CheckpointJson, ACheckpointOf020ReadsWithTheRunsRate) {
  auto j = nlohmann::ordered_json::parse(old_layout(snapshot()));
  j.erase("checksum");
  for (auto& e : j["epochs"]) e.erase("lr");
  for (const char* key : {"train_seconds", "resumed_differently", "schedule", "early_stopping"}) {
    j.erase(key);
  }
  j["checksum"] = Hasher().text(j.dump()).hex();
  TrainState base(42);
  base.schedule.lr = 0.125;
  const CheckpointRead r =
      read_checkpoint_state(parse_checkpoint_json(j.dump(), "old.json"), kRun, kSteps, base);
  for (const EpochRecord& e : r.state.epochs) EXPECT_EQ(e.lr, 0.125);
  EXPECT_EQ(r.state.train_seconds, 0.25 + 1e-310 + 2.5);
  EXPECT_TRUE(r.state.resumed_differently.empty());
  EXPECT_EQ(r.state.schedule.lr, 0.125);
}

// io/json_fields.h's exact kind: any double's bits back, through a dump and a parse.
TEST(CheckpointJson, AnExactFieldReadsBackEveryBitPattern) {
  struct Figure {
    double v = 0;
  };
  auto fields = [](auto& io, auto& f) { io.exact("v", f.v); };
  std::mt19937_64 g(1);
  for (int i = 0; i < 100000; ++i) {
    Figure in{std::bit_cast<double>(g())};
    if (std::isnan(in.v)) in.v = kNaN;
    const auto j = nlohmann::json::parse(fields_json(in, fields).dump());
    const JsonSource source{"x.json", ReadMode::Strict};
    const Figure out = read_fields<Figure>(JsonIn(j, "", source), fields);
    ASSERT_EQ(std::bit_cast<uint64_t>(in.v), std::bit_cast<uint64_t>(out.v)) << in.v;
  }
}

}  // namespace
}  // namespace xo

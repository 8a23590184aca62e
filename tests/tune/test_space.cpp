// The search space of `crossover tune`: --vary over any spec key (axes, dotted keys, TYPE.KEY,
// short names), grids, seeded random samples and log ranges, and every bad key or value named.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "core/format.h"
#include "model/spec.h"
#include "support/expect_error.h"
#include "tune/space.h"

namespace xo {
namespace {

using testing::expect_user_error;

ModelSpec mlp() { return *builtin_spec("mnist-mlp"); }

TEST(TuneSpace, DottedKeysSetTheSpecAsItsFileWould) {
  const ModelSpec base = mlp();
  const ModelSpec lr = with_spec_value(base, parse_spec_key("train.optimizer.lr"), "0.01");
  EXPECT_DOUBLE_EQ(lr.train.optimizer.lr, 0.01);
  EXPECT_EQ(lr.name, "mnist-mlp[train.optimizer.lr=0.01]");
  const ModelSpec adam = with_spec_value(lr, parse_spec_key("optimizer"), "adam");
  EXPECT_EQ(adam.train.optimizer.type, OptimizerType::Adam);
  EXPECT_EQ(adam.name, "mnist-mlp[train.optimizer.lr=0.01,optimizer=adam]");
  EXPECT_EQ(with_spec_value(base, parse_spec_key("train.batch"), "64").train.batch, 64);
  const ModelSpec batch = with_spec_value(base, parse_spec_key("batch"), "32");  // the axis
  EXPECT_EQ(batch.train.batch, 32);
  EXPECT_EQ(batch.name, "mnist-mlp[batch=32]");  // named as the sweep names it
  EXPECT_EQ(with_spec_value(*builtin_spec("disc-2"), parse_spec_key("depth"), "5").name, "disc-5");
  EXPECT_EQ(with_spec_value(base, parse_spec_key("model.layers.0.out"), "256").layers[0].out, 256);
  EXPECT_DOUBLE_EQ(
      with_spec_value(base, parse_spec_key("data.validation_split"), "0.1").data.validation_split,
      0.1);
  // Everything else stays.
  EXPECT_EQ(lr.layers.size(), base.layers.size());
  EXPECT_EQ(lr.data.source, base.data.source);
  EXPECT_EQ(lr.train.epochs, base.train.epochs);
}

TEST(TuneSpace, ALayerTypeKeySetsEveryLayerOfThatTypeButTheOutputsWidth) {
  const ModelSpec base = mlp();
  const ModelSpec p = with_spec_value(base, parse_spec_key("dropout.p"), "0.5");
  int dropouts = 0;
  for (const LayerSpec& l : p.layers) {
    if (l.type == LayerType::Dropout) {
      EXPECT_DOUBLE_EQ(l.p, 0.5);
      ++dropouts;
    }
  }
  EXPECT_EQ(dropouts, 2);
  const ModelSpec wide = with_spec_value(base, parse_spec_key("linear.out"), "128");
  EXPECT_EQ(wide.layers[0].out, 128);
  EXPECT_EQ(wide.layers[3].out, 128);
  EXPECT_EQ(wide.layers.back().out, 10);  // the classes
}

// Settings set together on one reading of the spec's text (with_spec_values) give the spec, name
// and errors that setting them one at a time gives, with an axis, another optimizer and a dotted
// key of the layers among them (set alone, in order).
TEST(TuneSpace, ValuesSetTogetherMakeTheSpecSetOneAtATime) {
  const ModelSpec base = mlp();
  const std::vector<std::vector<std::pair<std::string, std::string>>> cases = {
      {{"lr", "0.05"}, {"seed", "7"}, {"train.batch", "32"}, {"dropout.p", "0.3"}},
      {{"train.optimizer.alpha", "0.9"}, {"data.validation_split", "0.2"}, {"epochs", "3"}},
      {{"lr", "0.2"}, {"optimizer", "adam"}, {"seed", "2"}, {"linear.out", "64"}},
      {{"width", "32"},
       {"lr", "0.01"},
       {"seed", "3"},
       {"model.layers.0.out", "16"},
       {"dropout.p", "0.1"},
       {"train.optimizer.weight_decay", "0.001"}},
  };
  for (const auto& settings : cases) {
    std::vector<SpecSetting> keyed;
    ModelSpec one_at_a_time = base;
    for (const auto& [key, value] : settings) {
      keyed.emplace_back(parse_spec_key(key), value);
      one_at_a_time = with_spec_value(one_at_a_time, keyed.back().first, value);
    }
    const ModelSpec together = with_spec_values(base, keyed);
    EXPECT_EQ(to_toml(together), to_toml(one_at_a_time)) << together.name;
    EXPECT_EQ(together.name, one_at_a_time.name);
    EXPECT_EQ(together.origin, one_at_a_time.origin);
  }
  // The value the reader refuses is named, wherever it is among those set together.
  for (size_t bad = 0; bad < 3; ++bad) {
    std::vector<SpecSetting> keyed = {{parse_spec_key("lr"), "0.1"},
                                      {parse_spec_key("seed"), "4"},
                                      {parse_spec_key("dropout.p"), "0.2"}};
    keyed[bad].second = "-1";
    expect_user_error([&] { with_spec_values(base, keyed); },
                      {fmt::format("--vary {}=-1", keyed[bad].first.text)});
  }
}

TEST(TuneSpace, BadKeysAndValuesAreNamed) {
  const ModelSpec base = mlp();
  expect_user_error([] { parse_spec_key("learning_rate"); },
                    {"unknown key 'learning_rate'", "train.optimizer.lr", "dropout.p"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("train.optimizer.lr"), "-1"); },
                    {"--vary train.optimizer.lr=-1", "lr"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("optimizer"), "adamm"); },
                    {"--vary optimizer=adamm", "adamm", "adam"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("train.batchsize"), "3"); },
                    {"--vary train.batchsize=3", "batchsize"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("model.layers.9.out"), "3"); },
                    {"--vary model.layers.9.out=3", "7 items", "index 9"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("conv2d.out"), "3"); },
                    {"--vary conv2d.out=3", "no conv2d layer"});
  expect_user_error([&] { with_spec_value(base, parse_spec_key("width"), "0.5"); },
                    {"--vary width=0.5", "positive integer"});
  // Keys that are not bare TOML keys (toml++ writes some of them back unquoted, and that text
  // did not read: a fuzzer's finding, fuzz/regressions/tune/), in the key and in a table value.
  const ModelSpec cnn = *builtin_spec("mnist-cnn");  // several dropout layers: the text re-read
  // (A message shows a tab in what it quotes as \t.)
  for (const char* key : {"dropout.p\tq", "dropout.p'q", "dropout.\"p\"p\" "}) {
    expect_user_error([&] { with_spec_value(cnn, parse_spec_key(key), "1.0"); },
                      {fmt::format("--vary {}=1.0", message_safe(key)), "not a key of a spec"});
  }
  expect_user_error([&] { with_spec_value(cnn, parse_spec_key("dropout.p"), "{ \"a'b\" = 1 }"); },
                    {"--vary dropout.p=", "'a'b' is not a key of a spec"});
  // The reader's line numbers are of text made here, not of a file: never shown.
  try {
    with_spec_value(base, parse_spec_key("train.epochs"), "0");
    FAIL() << "epochs = 0 was taken";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).find("<vary>"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("--vary train.epochs=0: ", 0), 0u) << e.what();
  }
}

TEST(TuneSpace, ArgumentsParseIntoListsAndRanges) {
  const Dimension list = parse_dimension("optimizer=sgd,adam");
  EXPECT_EQ(list.values, (std::vector<std::string>{"sgd", "adam"}));
  EXPECT_FALSE(list.range);
  const Dimension ints = parse_dimension("train.batch=32..35");
  EXPECT_EQ(ints.values, (std::vector<std::string>{"32", "33", "34", "35"}));
  const Dimension log = parse_dimension("lr=1e-4..1e-1:log");
  EXPECT_TRUE(log.range && log.log && !log.integer);
  EXPECT_TRUE(log.values.empty());
  EXPECT_DOUBLE_EQ(log.low, 1e-4);
  EXPECT_DOUBLE_EQ(log.high, 1e-1);
  // Commas inside brackets belong to a value.
  EXPECT_EQ(parse_dimension("model.layers.0.kernel=[3, 3],[5, 5]").values.size(), 2u);
  expect_user_error([] { parse_dimension("lr"); }, {"--vary 'lr'", "KEY=V1,V2"});
  expect_user_error([] { parse_dimension("lr=0.1..0.01"); }, {"must go up"});
  expect_user_error([] { parse_dimension("lr=0..1:log"); }, {"log range needs A > 0"});
  expect_user_error([] { parse_dimension("lr=0.1,:log"); }, {"':log' follows a range"});
  expect_user_error([] { parse_dimension("lr=0.1,,0.2"); }, {"an empty value"});
  expect_user_error([] { parse_dimension("lr=a..b"); }, {"needs two numbers"});
  expect_user_error([] { parse_dimension("width=1.5..8"); }, {"takes integers"});
  // Ranges at the ends of int64 neither overflow nor loop for ever.
  expect_user_error([] { parse_dimension("seed=9223372036854775800..9223372036854775807"); },
                    {"beyond 2^53"});
  expect_user_error([] { parse_dimension("seed=-9007199254740993..9007199254740993"); },
                    {"beyond 2^53"});
  EXPECT_EQ(parse_dimension("seed=9007199254740990..9007199254740992").values.size(), 3u);
}

TEST(TuneSpace, TheGridIsEveryCombinationWithTheLastKeyFastest) {
  const std::vector<Dimension> dims = {parse_dimension("lr=0.1,0.01"),
                                       parse_dimension("train.batch=32,64,128")};
  const std::vector<Assignment> g = grid(dims);
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[0], (Assignment{{"lr", "0.1"}, {"train.batch", "32"}}));
  EXPECT_EQ(g[1], (Assignment{{"lr", "0.1"}, {"train.batch", "64"}}));
  EXPECT_EQ(g[5], (Assignment{{"lr", "0.01"}, {"train.batch", "128"}}));
  expect_user_error([] { grid({parse_dimension("lr=1e-4..1e-1:log")}); },
                    {"--vary 'lr=1e-4..1e-1:log'", "--samples"});
}

TEST(TuneSpace, SamplesAreSeededDistinctAndInsideTheirRanges) {
  const std::vector<Dimension> dims = {parse_dimension("lr=1e-4..1e-1:log"),
                                       parse_dimension("optimizer=sgd,adam"),
                                       parse_dimension("width=16..4096:log")};
  const std::vector<Assignment> a = sample(dims, 200, 7);
  EXPECT_EQ(a, sample(dims, 200, 7));
  EXPECT_NE(a, sample(dims, 200, 8));
  ASSERT_EQ(a.size(), 200u);
  int below_1e3 = 0, small_width = 0;
  for (const Assignment& t : a) {
    const double lr = std::stod(t[0].second);
    EXPECT_GE(lr, 1e-4 * 0.9999);
    EXPECT_LE(lr, 1e-1 * 1.0001);
    below_1e3 += lr < 1e-3;
    EXPECT_TRUE(t[1].second == "sgd" || t[1].second == "adam");
    const int width = std::stoi(t[2].second);
    EXPECT_GE(width, 16);
    EXPECT_LE(width, 4096);
    small_width += width < 256;
  }
  // Log-uniform: a third of the draws in the first decade of three (uniform would give 0.9%).
  EXPECT_GT(below_1e3, 40);
  EXPECT_LT(below_1e3, 95);
  EXPECT_GT(small_width, 70);  // half of the log range of widths lies below 256
  // A small space gives what it has.
  EXPECT_EQ(sample({parse_dimension("optimizer=sgd,adam")}, 5, 1).size(), 2u);
}

TEST(TuneSpace, EveryValueIsCheckedOnTheSpecBeforeAnyTrial) {
  const ModelSpec base = mlp();
  check_dimensions(base,
                   {parse_dimension("lr=1e-4..1e-1:log"), parse_dimension("dropout.p=0,0.5")});
  expect_user_error([&] { check_dimensions(base, {parse_dimension("dropout.p=0.2,1.5")}); },
                    {"--vary dropout.p=1.5"});
  const ModelSpec t =
      trial_spec(base, {parse_dimension("lr=0.1,0.2"), parse_dimension("dropout.p=0.3")},
                 {{"lr", "0.2"}, {"dropout.p", "0.3"}});
  EXPECT_DOUBLE_EQ(t.train.optimizer.lr, 0.2);
  EXPECT_DOUBLE_EQ(t.layers[2].p, 0.3);
}

}  // namespace
}  // namespace xo

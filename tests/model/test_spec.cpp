// Spec parsing: full specs, defaults, the built-ins, to_toml round trips, the shipped files, and
// every mistake a user can make, each reported with the file, the line, the key and the fix.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/spec.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

#ifndef CROSSOVER_SOURCE_DIR
#define CROSSOVER_SOURCE_DIR "."  // a manual build run from the repository root
#endif

namespace xo {
namespace {

namespace fs = std::filesystem;

using testing::user_error;

void expect_contains(const std::string& message, const std::vector<std::string>& pieces) {
  for (const auto& piece : pieces) {
    EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
}

// Joins lines with '\n', so that the line numbers in the expectations can be read off the list.
std::string lines(const std::vector<std::string>& ls) {
  std::string out;
  for (const auto& l : ls) out += l + "\n";
  return out;
}

// A valid [model] of 8 lines (layers on lines 4 to 6); `tail` starts on line 9.
std::string model_and(const std::vector<std::string>& tail = {}) {
  std::vector<std::string> ls = {
      "[model]",                            // 1
      "input = [2]",                        // 2
      "layers = [",                         // 3
      "  { type = \"linear\", out = 4 },",  // 4
      "  { type = \"relu\" },",             // 5
      "  { type = \"linear\", out = 2 },",  // 6
      "]",                                  // 7
      "loss = \"cross_entropy\"",           // 8
  };
  ls.insert(ls.end(), tail.begin(), tail.end());
  return lines(ls);
}

// A [model] whose layers (one per line) start on line 4.
std::string with_layers(const std::vector<std::string>& layers, const std::string& input = "[2]") {
  std::vector<std::string> ls = {"[model]", "input = " + input, "layers = ["};
  for (const auto& l : layers) ls.push_back("  " + l + ",");
  ls.push_back("]");
  ls.push_back("loss = \"cross_entropy\"");
  return lines(ls);
}

// [train] on line 9 and the optimizer on line 10.
std::string with_optimizer(const std::string& optimizer) {
  return model_and({"[train]", "optimizer = " + optimizer});
}

// Every field but the line numbers and the origin, which say where a spec came from, not what it
// is.
void expect_same(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.input, b.input);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.layers[i].type, b.layers[i].type);
    EXPECT_EQ(a.layers[i].out, b.layers[i].out);
    EXPECT_EQ(a.layers[i].bias, b.layers[i].bias);
    EXPECT_EQ(a.layers[i].kernel, b.layers[i].kernel);
    EXPECT_EQ(a.layers[i].stride, b.layers[i].stride);
    EXPECT_EQ(a.layers[i].padding, b.layers[i].padding);
    EXPECT_EQ(a.layers[i].p, b.layers[i].p);
    EXPECT_EQ(a.layers[i].vocab, b.layers[i].vocab);
    EXPECT_EQ(a.layers[i].layers, b.layers[i].layers);
    EXPECT_EQ(a.layers[i].sequence, b.layers[i].sequence);
    EXPECT_EQ(a.layers[i].negative_slope, b.layers[i].negative_slope);
  }
  EXPECT_EQ(a.loss, b.loss);
  const OptimizerSettings &x = a.train.optimizer, &y = b.train.optimizer;
  EXPECT_EQ(x.type, y.type);
  // Exact equality on purpose: to_toml must write doubles that read back bit for bit.
  EXPECT_EQ(x.lr, y.lr);
  EXPECT_EQ(x.momentum, y.momentum);
  EXPECT_EQ(x.dampening, y.dampening);
  EXPECT_EQ(x.nesterov, y.nesterov);
  EXPECT_EQ(x.beta1, y.beta1);
  EXPECT_EQ(x.beta2, y.beta2);
  EXPECT_EQ(x.eps, y.eps);
  EXPECT_EQ(x.weight_decay, y.weight_decay);
  EXPECT_EQ(x.alpha, y.alpha);
  EXPECT_EQ(x.rho, y.rho);
  EXPECT_EQ(a.data.test_samples, b.data.test_samples);
  EXPECT_EQ(a.data.test, b.data.test);
  EXPECT_EQ(a.data.validation_split, b.data.validation_split);
  EXPECT_EQ(a.train.batch, b.train.batch);
  EXPECT_EQ(a.train.epochs, b.train.epochs);
  EXPECT_EQ(a.train.shuffle, b.train.shuffle);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.data.source, b.data.source);
  // A sample count is part of a generated source only: a file's (a note when given) is not kept.
  if (a.data.source == "disc" || a.data.source == "imdb-synthetic" || a.data.source.empty()) {
    EXPECT_EQ(a.data.samples, b.data.samples);
  }
}

// A folder of its own for each test: ctest runs the tests of this binary in parallel processes.
void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// --- Valid specs ------------------------------------------------------------------------------

constexpr const char* kFullSgd = R"(# every key of an SGD spec
[model]
name = "mixed"
input = [3]
layers = [
  { type = "linear", out = 16, bias = true },
  { type = "tanh" },
  { type = "linear", out = 8, bias = false },
  { type = "sigmoid" },
  { type = "linear", out = 3 },
  { type = "relu" },
]
loss = "cross_entropy"

[train]
batch = 32
epochs = 7
shuffle = true
seed = 42

[train.optimizer]  # the same as an inline optimizer = { ... }
type = "sgd"
lr = 0.05
momentum = 0.9
dampening = 0.0
nesterov = true
weight_decay = 1e-4

[data]
source = "csv:points.csv"
samples = 10
)";

TEST(SpecParse, ReadsEveryKeyOfAnSgdSpec) {
  const ModelSpec s = parse_spec(kFullSgd, "specs/full.toml");
  EXPECT_EQ(s.name, "mixed");  // the name key wins over the file stem
  EXPECT_EQ(s.origin, "specs/full.toml");
  EXPECT_EQ(s.input, std::vector<int64_t>{3});
  ASSERT_EQ(s.layers.size(), 6u);
  const std::vector<LayerType> types = {LayerType::Linear,  LayerType::Tanh,   LayerType::Linear,
                                        LayerType::Sigmoid, LayerType::Linear, LayerType::ReLU};
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(s.layers[i].type, types[i]) << i;
    EXPECT_EQ(s.layers[i].line, static_cast<int>(6 + i)) << i;
  }
  EXPECT_EQ(s.layers[0].out, 16);
  EXPECT_TRUE(s.layers[0].bias);
  EXPECT_EQ(s.layers[2].out, 8);
  EXPECT_FALSE(s.layers[2].bias);
  EXPECT_EQ(s.layers[4].out, 3);
  EXPECT_TRUE(s.layers[4].bias);  // the default
  EXPECT_EQ(s.loss, LossType::CrossEntropy);
  const OptimizerSettings& o = s.train.optimizer;
  EXPECT_EQ(o.type, OptimizerType::SGD);
  EXPECT_DOUBLE_EQ(o.lr, 0.05);
  EXPECT_DOUBLE_EQ(o.momentum, 0.9);
  EXPECT_DOUBLE_EQ(o.dampening, 0.0);
  EXPECT_TRUE(o.nesterov);
  EXPECT_DOUBLE_EQ(o.weight_decay, 1e-4);
  EXPECT_EQ(s.train.batch, 32);
  EXPECT_EQ(s.train.epochs, 7);
  EXPECT_TRUE(s.train.shuffle);
  EXPECT_EQ(s.train.seed, 42u);
  // parse_spec has no file, so a relative CSV path stays as written.
  EXPECT_EQ(s.data.source, "csv:points.csv");
  EXPECT_EQ(s.data.samples, 10);
}

TEST(SpecParse, ReadsEveryKeyOfAnAdamSpec) {
  const ModelSpec s = parse_spec(
      with_optimizer(
          "{ type = \"adam\", lr = 3e-4, beta1 = 0.8, beta2 = 0.95, eps = 1e-6, weight_decay = 0.5 "
          "}"),
      "adam.toml");
  const OptimizerSettings& o = s.train.optimizer;
  EXPECT_EQ(o.type, OptimizerType::Adam);
  EXPECT_DOUBLE_EQ(o.lr, 3e-4);
  EXPECT_DOUBLE_EQ(o.beta1, 0.8);
  EXPECT_DOUBLE_EQ(o.beta2, 0.95);
  EXPECT_DOUBLE_EQ(o.eps, 1e-6);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.5);
}

TEST(SpecParse, AdamDefaultsAreSpecHDefaults) {
  const OptimizerSettings o =
      parse_spec(with_optimizer("{ type = \"adam\" }"), "a.toml").train.optimizer;
  const OptimizerSettings d;
  EXPECT_EQ(o.lr, d.lr);
  EXPECT_EQ(o.beta1, d.beta1);
  EXPECT_EQ(o.beta2, d.beta2);
  EXPECT_EQ(o.eps, d.eps);
  EXPECT_EQ(o.weight_decay, 0.0);  // L2 off for Adam, as in torch.optim.Adam
}

TEST(SpecParse, AdamWTakesBetasAndPyTorchsDefaultDecay) {
  const OptimizerSettings o =
      parse_spec(with_optimizer("{ type = \"adamw\", lr = 0.001, betas = [0.8, 0.99] }"), "a.toml")
          .train.optimizer;
  EXPECT_EQ(o.type, OptimizerType::AdamW);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(o.beta1, 0.8);
  EXPECT_DOUBLE_EQ(o.beta2, 0.99);
  // An explicit 0 turns the decay off rather than falling back to the default.
  EXPECT_EQ(parse_spec(with_optimizer("{ type = \"adamw\", weight_decay = 0.0 }"), "a.toml")
                .train.optimizer.weight_decay,
            0.0);
  // Integer betas are numbers too.
  const OptimizerSettings z =
      parse_spec(with_optimizer("{ type = \"adam\", betas = [0, 0.5] }"), "a.toml").train.optimizer;
  EXPECT_EQ(z.beta1, 0.0);
  EXPECT_EQ(z.beta2, 0.5);
}

// A sample count only means something to a generated source: for a file it is said, not silently
// dropped, and to_toml writes none.
TEST(SpecParse, SamplesForAFileSourceIsANoteAndIsNotWritten) {
  const std::string text =
      "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 2 } ]\n"
      "loss = \"cross_entropy\"\n[data]\nsource = \"csv:points.csv\"\nsamples = 500\n";
  const ModelSpec spec = parse_spec(text, "mine.toml");
  ASSERT_EQ(spec.notes.size(), 1u);
  EXPECT_EQ(spec.notes[0],
            "data.samples = 500 is not used: 'csv:points.csv' brings its own rows (only the "
            "generated sources, disc and imdb-synthetic, take a sample count)");
  EXPECT_EQ(to_toml(spec).find("samples"), std::string::npos) << to_toml(spec);
  const ModelSpec disc = parse_spec(
      "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 2 } ]\n"
      "loss = \"cross_entropy\"\n[data]\nsource = \"disc\"\nsamples = 500\n",
      "disc.toml");
  EXPECT_TRUE(disc.notes.empty());
  EXPECT_NE(to_toml(disc).find("samples = 500"), std::string::npos);
}

// A test split from its own CSV, and a validation split held out of the training set, as Keras's
// validation_data and validation_split; both written back by to_toml.
TEST(SpecParse, ATestCsvAndAValidationSplitReadAndWriteBack) {
  const ModelSpec spec = parse_spec(
      "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 2 } ]\n"
      "loss = \"cross_entropy\"\n[data]\nsource = \"csv:train.csv\"\ntest = \"csv:test.csv\"\n"
      "validation_split = 0.2\n",
      "mine.toml");
  EXPECT_EQ(spec.data.test, "csv:test.csv");
  EXPECT_EQ(spec.data.validation_split, 0.2);
  expect_contains(to_toml(spec), {"test = \"csv:test.csv\"\n", "validation_split = 0.2\n"});
  const ModelSpec back = parse_spec(to_toml(spec), "again.toml");
  expect_same(back, spec);
}

TEST(SpecParse, DefaultsAreThoseOfSpecH) {
  const ModelSpec s =
      parse_spec(lines({"[model]", "input = [2]", "layers = [{ type = \"linear\", out = 2 }]",
                        "loss = \"cross_entropy\""}),
                 "some/dir/tiny.toml");
  EXPECT_EQ(s.name, "tiny");  // the file stem
  EXPECT_EQ(s.origin, "some/dir/tiny.toml");
  ModelSpec expected;
  expected.name = "tiny";
  expected.input = {2};
  expected.layers = {LayerSpec{LayerType::Linear, 2, true, 3}};
  expect_same(s, expected);  // TrainSpec and DataSpec as default-constructed
  EXPECT_EQ(s.train.optimizer.type, OptimizerType::SGD);
  EXPECT_DOUBLE_EQ(s.train.optimizer.lr, 0.1);
  EXPECT_EQ(s.train.optimizer.momentum, 0.0);
  EXPECT_FALSE(s.train.optimizer.nesterov);
  EXPECT_EQ(s.train.optimizer.weight_decay, 0.0);
  EXPECT_EQ(s.train.batch, 100);
  EXPECT_EQ(s.train.epochs, 100);
  EXPECT_FALSE(s.train.shuffle);
  EXPECT_EQ(s.train.seed, 0u);
  EXPECT_EQ(s.data.source, "disc");
  EXPECT_EQ(s.data.samples, 1000);
}

TEST(SpecParse, PartialTablesKeepTheOtherDefaults) {
  const ModelSpec s = parse_spec(
      model_and({"[train]", "optimizer = { lr = 0.5 }", "epochs = 3", "[data]", "samples = 20"}),
      "p.toml");
  EXPECT_EQ(s.train.optimizer.type, OptimizerType::SGD);  // type defaults to sgd
  EXPECT_DOUBLE_EQ(s.train.optimizer.lr, 0.5);
  EXPECT_EQ(s.train.optimizer.momentum, 0.0);
  EXPECT_EQ(s.train.batch, 100);
  EXPECT_EQ(s.train.epochs, 3);
  EXPECT_EQ(s.data.source, "disc");
  EXPECT_EQ(s.data.samples, 20);
  // Empty tables are fine too.
  const ModelSpec e = parse_spec(model_and({"[train]", "[data]"}), "e.toml");
  EXPECT_EQ(e.train.batch, 100);
  EXPECT_EQ(e.data.source, "disc");
}

TEST(SpecParse, IntegersAreAcceptedWhereNumbersAreExpected) {
  const OptimizerSettings o =
      parse_spec(with_optimizer("{ lr = 1, momentum = 0, weight_decay = 0 }"), "i.toml")
          .train.optimizer;
  EXPECT_EQ(o.lr, 1.0);
  EXPECT_EQ(o.momentum, 0.0);
}

TEST(SpecParse, AModelMayEndInAnActivation) {
  const ModelSpec s = parse_spec(
      with_layers({"{ type = \"linear\", out = 5 }", "{ type = \"sigmoid\" }"}, "[7]"), "act.toml");
  const auto shapes = infer_shapes(s);
  ASSERT_EQ(shapes.size(), 2u);
  EXPECT_EQ(shapes[0], std::vector<int64_t>{5});
  EXPECT_EQ(shapes[1], std::vector<int64_t>{5});
  EXPECT_EQ(parameter_count(s), 7 * 5 + 5);
}

TEST(SpecParse, ArrayOfTablesSyntaxWorksToo) {
  const ModelSpec s = parse_spec(lines({
                                     "[model]",                   // 1
                                     "input = [2]",               // 2
                                     "loss = \"cross_entropy\"",  // 3
                                     "[[model.layers]]",          // 4
                                     "type = \"linear\"",         // 5
                                     "out = 3",                   // 6
                                     "[[model.layers]]",          // 7
                                     "type = \"tanh\"",           // 8
                                     "[[model.layers]]",          // 9
                                     "type = \"linear\"",         // 10
                                     "out = 2",                   // 11
                                 }),
                                 "aot.toml");
  ASSERT_EQ(s.layers.size(), 3u);
  EXPECT_EQ(s.layers[0].out, 3);
  EXPECT_EQ(s.layers[1].type, LayerType::Tanh);
  EXPECT_EQ(s.layers[0].line, 4);
  EXPECT_EQ(s.layers[2].line, 9);
}

TEST(SpecParse, LayerLinesPointAtEachInlineTable) {
  const ModelSpec s =
      parse_spec(lines({
                     "[model]",
                     "input = [2]",
                     "layers = [ { type = \"linear\", out = 4 }, { type = \"relu\" },",
                     "",
                     "  { type = \"linear\", out = 2 } ]",
                     "loss = \"cross_entropy\"",
                 }),
                 "l.toml");
  ASSERT_EQ(s.layers.size(), 3u);
  EXPECT_EQ(s.layers[0].line, 3);
  EXPECT_EQ(s.layers[1].line, 3);
  EXPECT_EQ(s.layers[2].line, 5);
}

TEST(SpecParse, InferShapesGivesTheShapeAfterEachLayer) {
  const auto shapes = infer_shapes(parse_spec(kFullSgd, "full.toml"));
  const std::vector<std::vector<int64_t>> expected = {{16}, {16}, {8}, {8}, {3}, {3}};
  EXPECT_EQ(shapes, expected);
  // Bias-free layers count no bias.
  EXPECT_EQ(parameter_count(parse_spec(kFullSgd, "full.toml")),
            (3 * 16 + 16) + (16 * 8) + (8 * 3 + 3));
}

// --- Errors -----------------------------------------------------------------------------------

struct ErrorCase {
  std::string name;
  std::string toml;
  std::vector<std::string> expected;  // substrings of the message, besides the origin
};

std::ostream& operator<<(std::ostream& out, const ErrorCase& c) { return out << c.name; }

const std::string kLinear2 = "{ type = \"linear\", out = 2 }";

std::vector<ErrorCase> error_cases() {
  return {
      // TOML itself.
      {"syntax_unclosed_header", "[model\ninput = [2]\n", {"bad.toml:1:", "TOML syntax error"}},
      {"syntax_missing_comma",
       lines({"[model]", "input = [2]", "layers = [ { type = \"linear\" out = 2 } ]"}),
       {"bad.toml:3:", "TOML syntax error", "column"}},
      {"syntax_duplicate_key",
       lines({"[model]", "input = [2]", "input = [3]"}),
       {"bad.toml:3:", "TOML syntax error", "input"}},

      // The top level.
      {"missing_model",
       lines({"[train]", "batch = 4"}),
       {"bad.toml:1:", "model", "missing", "expected a [model] table"}},
      {"empty_file", "", {"bad.toml:1:", "model", "missing"}},
      {"model_not_a_table", "model = 3\n", {"bad.toml:1:", "model", "got the integer 3", "table"}},
      {"unknown_top_level_table",
       model_and({"[trian]", "batch = 3"}),
       {"bad.toml:9:", "trian", "unknown key", "expected one of: model, train, data"}},
      {"unknown_top_level_key",
       "seed = 1\n" + model_and(),
       {"bad.toml:1:", "seed", "unknown key", "model, train, data"}},
      {"train_not_a_table",
       "train = \"fast\"\n" + model_and(),
       {"bad.toml:1:", "train", "got the string \"fast\"", "expected a [train] table"}},
      {"data_not_a_table",
       "data = [1]\n" + model_and(),
       {"bad.toml:1:", "data", "got the list [1]", "expected a [data] table"}},
      // After [model], "train = ..." belongs to the model table: still caught, as a model key.
      {"train_key_inside_model",
       model_and({"train = { batch = 4 }"}),
       {"bad.toml:9:", "model.train", "unknown key", "name, input, layers, loss"}},

      // [model]
      {"unknown_model_key",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\"",
              "dropout = 0.5"}),
       {"bad.toml:5:", "model.dropout", "unknown key",
        "expected one of: name, input, layers, loss"}},
      {"first_unknown_key_in_the_file_is_named",
       lines({"[model]", "zeta = 1", "alpha = 2", "input = [2]", "layers = [" + kLinear2 + "]",
              "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.zeta", "unknown key"}},
      {"name_not_a_string",
       lines({"[model]", "name = 8", "input = [2]", "layers = [" + kLinear2 + "]",
              "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.name", "got the integer 8", "expected a string"}},
      {"name_empty",
       lines({"[model]", "name = \"\"", "input = [2]", "layers = [" + kLinear2 + "]",
              "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.name", "empty name"}},
      {"missing_input",
       lines({"", "[model]", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input", "missing", "list of positive integers"}},
      {"input_not_a_list",
       lines({"[model]", "input = 2", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input", "got the integer 2", "list of positive integers"}},
      {"input_empty",
       lines({"[model]", "input = []", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input", "got an empty list", "non-empty list"}},
      {"input_zero",
       lines({"[model]", "input = [0]", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input[0]", "got the integer 0", "expected a positive integer"}},
      {"input_negative",
       lines({"[model]", "input = [2, -3]", "layers = [" + kLinear2 + "]",
              "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input[1]", "got the integer -3", "positive integer"}},
      {"input_float",
       lines(
           {"[model]", "input = [2.0]", "layers = [" + kLinear2 + "]", "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input[0]", "got the float 2.0", "positive integer"}},
      {"input_string",
       lines({"[model]", "input = [\"2\"]", "layers = [" + kLinear2 + "]",
              "loss = \"cross_entropy\""}),
       {"bad.toml:2:", "model.input[0]", "got the string \"2\"", "positive integer"}},
      {"input_rank_two",
       with_layers({"{ type = \"linear\", out = 4 }", kLinear2}, "[2, 3]"),
       {"bad.toml:4:", "model.layers[0]",
        "linear needs an input of rank 1 (features; add a flatten layer before it), got [2, 3]"}},
      {"input_rank_two_behind_an_activation",
       with_layers({"{ type = \"relu\" }", kLinear2}, "[2, 3]"),
       {"bad.toml:5:", "model.layers[1]",
        "linear needs an input of rank 1 (features; add a flatten layer before it), got [2, 3]"}},

      // model.layers
      {"missing_layers",
       lines({"[model]", "input = [2]", "loss = \"cross_entropy\""}),
       {"bad.toml:1:", "model.layers", "missing", "list of layer tables"}},
      {"layers_not_a_list",
       lines({"[model]", "input = [2]", "layers = \"relu\"", "loss = \"cross_entropy\""}),
       {"bad.toml:3:", "model.layers", "got the string \"relu\"", "list of layer tables"}},
      {"layers_empty",
       lines({"[model]", "input = [2]", "layers = []", "loss = \"cross_entropy\""}),
       {"bad.toml:3:", "model.layers", "got an empty list", "non-empty list of layer tables"}},
      {"layer_not_a_table",
       with_layers({kLinear2, "\"relu\""}),
       {"bad.toml:5:", "model.layers[1]", "got the string \"relu\"", "expected a layer table"}},
      {"layer_missing_type",
       with_layers({"{ out = 4 }", kLinear2}),
       {"bad.toml:4:", "model.layers[0].type", "missing", "linear, relu, tanh, sigmoid"}},
      {"layer_type_not_a_string",
       with_layers({"{ type = 1 }", kLinear2}),
       {"bad.toml:4:", "model.layers[0].type", "got the integer 1", "linear, relu, tanh, sigmoid"}},
      {"layer_key_typo",
       with_layers({kLinear2, "{ typ = \"relu\" }"}),
       {"bad.toml:5:", "model.layers[1].typ", "unknown key", "expected one of: type, out, bias"}},
      {"layer_unknown_key",
       with_layers({"{ type = \"linear\", out = 4, activation = \"relu\" }", kLinear2}),
       {"bad.toml:4:", "model.layers[0].activation", "unknown key", "type, out, bias"}},
      {"unknown_layer_type",
       with_layers({"{ type = \"linear\", out = 4 }", "{ type = \"relux\" }", kLinear2}),
       {"bad.toml:5:", "model.layers[1].type", "unknown layer type 'relux'",
        "(expected one of: linear, relu, tanh, sigmoid, conv2d, maxpool2d, avgpool2d, dropout, "
        "flatten, embedding, lstm, global_avgpool, global_maxpool, batchnorm1d, batchnorm2d, "
        "leaky_relu)"}},
      {"layer_type_is_case_sensitive",
       with_layers({"{ type = \"Linear\", out = 4 }", kLinear2}),
       {"bad.toml:4:", "model.layers[0].type", "unknown layer type 'Linear'"}},
      {"negative_width",
       with_layers({"{ type = \"linear\", out = -4 }", kLinear2}),
       {"bad.toml:4:", "model.layers[0].out: width -4 must be a positive integer"}},
      {"zero_width",
       with_layers({kLinear2, "{ type = \"relu\" }", "{ type = \"linear\", out = 0 }"}),
       {"bad.toml:6:", "model.layers[2].out: width 0 must be a positive integer"}},
      {"width_is_a_string",
       with_layers({"{ type = \"linear\", out = \"4\" }"}),
       {"bad.toml:4:", "model.layers[0].out", "got the string \"4\"", "expected an integer"}},
      // The layers of the classic networks: shapes that do not chain, keys that do not belong.
      {"conv_on_flat_input",
       with_layers({"{ type = \"conv2d\", out = 4, kernel = 3 }", kLinear2}, "[784]"),
       {"bad.toml:4:",
        "model.layers[0]: conv2d needs an input of rank 3 ([channels, height, "
        "width]), got [784]"}},
      {"conv_kernel_does_not_fit",
       with_layers(
           {"{ type = \"conv2d\", out = 4, kernel = 5 }", "{ type = \"flatten\" }", kLinear2},
           "[1, 3, 3]"),
       {"bad.toml:4:",
        "model.layers[0]: a 5x5 kernel does not fit the input [1, 3, 3] with "
        "padding 0"}},
      {"conv_missing_kernel",
       with_layers({"{ type = \"conv2d\", out = 4 }", kLinear2}, "[1, 8, 8]"),
       {"bad.toml:4:", "model.layers[0].kernel", "missing", "expected an integer"}},
      {"pool_padding_over_half_the_kernel",
       with_layers({"{ type = \"maxpool2d\", kernel = 2, padding = 2 }", "{ type = \"flatten\" }",
                    kLinear2},
                   "[1, 8, 8]"),
       {"bad.toml:4:", "model.layers[0].padding",
        "padding 2 must be >= 0 and at most half the "
        "kernel"}},
      {"linear_after_conv_without_flatten",
       with_layers({"{ type = \"conv2d\", out = 2, kernel = 3 }", kLinear2}, "[1, 5, 5]"),
       {"bad.toml:5:",
        "model.layers[1]: linear needs an input of rank 1 (features; add a flatten "
        "layer before it), got [2, 3, 3]"}},
      {"dropout_p_one",
       with_layers({kLinear2, "{ type = \"dropout\", p = 1.0 }"}),
       {"bad.toml:5:", "model.layers[1].p", "1.0 must be in [0, 1)"}},
      {"relu_takes_no_kernel",
       with_layers({kLinear2, "{ type = \"relu\", kernel = 3 }"}),
       {"bad.toml:5:", "model.layers[1].kernel",
        "a relu layer takes no 'kernel' (it has no "
        "settings)"}},
      {"linear_takes_no_kernel",
       with_layers({"{ type = \"linear\", out = 2, kernel = 3 }"}),
       {"bad.toml:4:", "model.layers[0].kernel",
        "a linear layer takes no 'kernel' (it takes: out, bias)"}},
      {"embedding_not_first",
       with_layers({kLinear2, "{ type = \"embedding\", vocab = 10, out = 4 }"}),
       {"bad.toml:5:",
        "model.layers[1]: embedding reads token ids, so it must be the first "
        "layer"}},
      {"lstm_on_flat_input",
       with_layers({"{ type = \"lstm\", out = 4 }", kLinear2}),
       {"bad.toml:4:", "model.layers[0]: lstm needs an input of rank 2 ([steps, features]"}},
      {"lstm_zero_layers",
       with_layers({"{ type = \"embedding\", vocab = 10, out = 4 }",
                    "{ type = \"lstm\", out = 4, layers = 0 }", kLinear2},
                   "[5]"),
       {"bad.toml:5:", "model.layers[1].layers", "layer count 0 must be a positive integer"}},
      {"batchnorm2d_on_flat_input",
       with_layers({"{ type = \"linear\", out = 4 }", "{ type = \"batchnorm2d\" }", kLinear2}),
       {"bad.toml:5:", "model.layers[1]: batchnorm2d needs an input of rank 3"}},
      {"batchnorm1d_on_an_image",
       with_layers({"{ type = \"batchnorm1d\" }", "{ type = \"flatten\" }", kLinear2}, "[1, 5, 5]"),
       {"bad.toml:4:", "batchnorm1d normalises [channels] or [channels, length], got [1, 5, 5]"}},
      {"batchnorm_zero_eps",
       with_layers(
           {"{ type = \"linear\", out = 4 }", "{ type = \"batchnorm1d\", eps = 0 }", kLinear2}),
       {"bad.toml:5:", "model.layers[1].eps", "must be > 0"}},
      {"leaky_relu_negative_slope",
       with_layers({"{ type = \"linear\", out = 4 }",
                    "{ type = \"leaky_relu\", negative_slope = -0.5 }", kLinear2}),
       {"bad.toml:5:", "model.layers[1].negative_slope", "-0.5 must be >= 0",
        "the slope for inputs below zero"}},
      {"leaky_relu_takes_no_p",
       with_layers({"{ type = \"linear\", out = 4 }", "{ type = \"leaky_relu\", p = 0.5 }",
                    kLinear2}),
       {"bad.toml:5:", "model.layers[1].p", "a leaky_relu layer takes no 'p'", "negative_slope"}},
      {"batchnorm_momentum_above_one",
       with_layers({"{ type = \"linear\", out = 4 }", "{ type = \"batchnorm1d\", momentum = 1.5 }",
                    kLinear2}),
       {"bad.toml:5:", "model.layers[1].momentum", "1.5 must be in [0, 1]"}},
      {"global_pool_on_flat_input",
       with_layers({kLinear2, "{ type = \"global_maxpool\" }"}),
       {"bad.toml:5:", "model.layers[1]: global_maxpool needs an input of rank 2"}},
      {"width_is_a_float",
       with_layers({"{ type = \"linear\", out = 4.5 }"}),
       {"bad.toml:4:", "model.layers[0].out", "got the float 4.5", "expected an integer"}},
      {"missing_width",
       with_layers({"{ type = \"linear\" }"}),
       {"bad.toml:4:", "model.layers[0].out", "missing", "expected an integer"}},
      {"bias_not_a_boolean",
       with_layers({"{ type = \"linear\", out = 2, bias = \"no\" }"}),
       {"bad.toml:4:", "model.layers[0].bias", "got the string \"no\"", "expected true or false"}},
      {"activation_with_a_width",
       with_layers({kLinear2, "{ type = \"relu\", out = 3 }"}),
       {"bad.toml:5:", "model.layers[1].out", "a relu layer takes no 'out'"}},
      {"activation_with_a_bias",
       with_layers({kLinear2, "{ type = \"tanh\", bias = false }"}),
       {"bad.toml:5:", "model.layers[1].bias", "a tanh layer takes no 'bias'"}},
      {"one_class",
       with_layers({"{ type = \"linear\", out = 4 }", "{ type = \"relu\" }",
                    "{ type = \"linear\", out = 1 }"}),
       {"bad.toml:6:", "model.layers[2]", "cross_entropy", "at least 2", "got [1]"}},
      {"one_class_then_an_activation",
       with_layers({"{ type = \"linear\", out = 1 }", "{ type = \"sigmoid\" }"}),
       {"bad.toml:5:", "model.layers[1]", "cross_entropy", "at least 2", "got [1]"}},
      {"no_linear_layer",
       with_layers({"{ type = \"relu\" }", "{ type = \"tanh\" }"}),
       {"bad.toml:4:", "model.layers", "expected at least one linear layer"}},

      // model.loss
      {"missing_loss",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]"}),
       {"bad.toml:1:", "model.loss", "missing", "cross_entropy"}},
      {"unknown_loss",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]", "loss = \"huber\""}),
       {"bad.toml:4:", "model.loss", "unknown loss 'huber'",
        "(expected one of: cross_entropy, bce, mse)"}},
      {"mse_with_two_outputs",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]", "loss = \"mse\""}),
       {"bad.toml:3:", "model.layers[0]", "mse needs the last layer to output one value",
        "got [2]"}},
      {"long_values_are_summarised",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]",
              "loss = [\"cross_entropy\", \"mse\", \"nll\", \"hinge\", \"huber\", \"kl\"]"}),
       {"bad.toml:4:", "model.loss", "got a list of 6 items"}},
      {"loss_not_a_string",
       lines({"[model]", "input = [2]", "layers = [" + kLinear2 + "]", "loss = [\"mse\"]"}),
       {"bad.toml:4:", "model.loss", "got the list [\"mse\"]", "cross_entropy"}},

      // [train]
      {"unknown_train_key",
       model_and({"[train]", "bach = 3"}),
       {"bad.toml:10:", "train.bach", "unknown key",
        "expected one of: optimizer, batch, epochs, shuffle, seed"}},
      {"negative_batch",
       model_and({"[train]", "batch = -1"}),
       {"bad.toml:10:", "train.batch", "-1 must be a positive integer"}},
      {"zero_batch",
       model_and({"[train]", "batch = 0"}),
       {"bad.toml:10:", "train.batch", "0 must be a positive integer"}},
      {"batch_is_a_float",
       model_and({"[train]", "batch = 10.5"}),
       {"bad.toml:10:", "train.batch", "got the float 10.5", "expected an integer"}},
      {"batch_is_a_string",
       model_and({"[train]", "batch = \"100\""}),
       {"bad.toml:10:", "train.batch", "got the string \"100\"", "expected an integer"}},
      {"zero_epochs",
       model_and({"[train]", "epochs = 0"}),
       {"bad.toml:10:", "train.epochs", "0 must be a positive integer"}},
      {"shuffle_not_a_boolean",
       model_and({"[train]", "shuffle = \"yes\""}),
       {"bad.toml:10:", "train.shuffle", "got the string \"yes\"", "expected true or false"}},
      {"negative_seed",
       model_and({"[train]", "seed = -1"}),
       {"bad.toml:10:", "train.seed", "-1 must be an integer >= 0"}},
      {"optimizer_not_a_table",
       with_optimizer("\"sgd\""),
       {"bad.toml:10:", "train.optimizer", "got the string \"sgd\"", "expected a table",
        "sgd, adam, adamw"}},

      // train.optimizer
      {"optimizer_as_a_table_header",
       model_and({"[train.optimizer]", "type = \"adam\"", "lr = -1"}),
       {"bad.toml:11:", "train.optimizer.lr", "-1.0 must be > 0"}},
      {"table_value_in_a_layer",
       with_layers({"{ type = \"linear\", out = { width = 4 } }"}),
       {"bad.toml:4:", "model.layers[0].out", "got a table", "expected an integer"}},
      {"unknown_optimizer",
       with_optimizer("{ type = \"lbfgs\" }"),
       {"bad.toml:10:", "train.optimizer.type", "unknown optimizer 'lbfgs'",
        "(expected one of: sgd, adam, adamw, rmsprop, adadelta)"}},
      {"optimizer_type_not_a_string",
       with_optimizer("{ type = 1 }"),
       {"bad.toml:10:", "train.optimizer.type", "got the integer 1", "sgd, adam, adamw"}},
      {"optimizer_key_typo",
       with_optimizer("{ type = \"sgd\", learning_rate = 0.1 }"),
       {"bad.toml:10:", "train.optimizer.learning_rate", "unknown key",
        "lr, momentum, dampening, nesterov, weight_decay"}},
      {"adam_key_on_sgd",
       with_optimizer("{ lr = 0.1, beta1 = 0.9 }"),
       {"bad.toml:10:", "train.optimizer.beta1", "unknown key", "momentum"}},
      {"sgd_key_on_adam",
       with_optimizer("{ type = \"adam\", momentum = 0.9 }"),
       {"bad.toml:10:", "train.optimizer.momentum", "unknown key",
        "lr, beta1, beta2, betas, eps, weight_decay"}},
      {"negative_lr",
       with_optimizer("{ type = \"sgd\", lr = -0.1 }"),
       {"bad.toml:10:", "train.optimizer.lr", "-0.1 must be > 0"}},
      {"zero_lr",
       with_optimizer("{ type = \"adam\", lr = 0.0 }"),
       {"bad.toml:10:", "train.optimizer.lr", "0.0 must be > 0"}},
      {"lr_is_a_string",
       with_optimizer("{ lr = \"0.1\" }"),
       {"bad.toml:10:", "train.optimizer.lr", "got the string \"0.1\"",
        "expected a finite number"}},
      {"lr_is_nan",
       with_optimizer("{ lr = nan }"),
       {"bad.toml:10:", "train.optimizer.lr", "got the float nan", "finite number"}},
      {"lr_is_infinite",
       with_optimizer("{ lr = inf }"),
       {"bad.toml:10:", "train.optimizer.lr", "got the float inf", "finite number"}},
      {"momentum_above_one",
       with_optimizer("{ momentum = 1.5 }"),
       {"bad.toml:10:", "train.optimizer.momentum", "1.5 must be in [0, 1)"}},
      {"momentum_one",
       with_optimizer("{ momentum = 1.0 }"),
       {"bad.toml:10:", "train.optimizer.momentum", "1.0 must be in [0, 1)"}},
      {"negative_momentum",
       with_optimizer("{ momentum = -0.5 }"),
       {"bad.toml:10:", "train.optimizer.momentum", "-0.5 must be in [0, 1)"}},
      {"dampening_out_of_range",
       with_optimizer("{ momentum = 0.9, dampening = 2.0 }"),
       {"bad.toml:10:", "train.optimizer.dampening", "2.0 must be in [0, 1]"}},
      {"negative_weight_decay",
       with_optimizer("{ weight_decay = -1e-4 }"),
       {"bad.toml:10:", "train.optimizer.weight_decay", "-0.0001 must be >= 0"}},
      {"nesterov_without_momentum",
       with_optimizer("{ type = \"sgd\", nesterov = true }"),
       {"bad.toml:10:", "train.optimizer.nesterov", "momentum > 0 and dampening = 0",
        "got momentum 0.0"}},
      {"nesterov_with_dampening",
       with_optimizer("{ momentum = 0.9, dampening = 0.1, nesterov = true }"),
       {"bad.toml:10:", "train.optimizer.nesterov", "dampening = 0", "dampening 0.1"}},
      {"nesterov_not_a_boolean",
       with_optimizer("{ momentum = 0.9, nesterov = 1 }"),
       {"bad.toml:10:", "train.optimizer.nesterov", "got the integer 1", "true or false"}},
      {"beta1_one",
       with_optimizer("{ type = \"adam\", beta1 = 1.0 }"),
       {"bad.toml:10:", "train.optimizer.beta1", "1.0 must be in [0, 1)"}},
      {"negative_beta2",
       with_optimizer("{ type = \"adamw\", beta2 = -0.1 }"),
       {"bad.toml:10:", "train.optimizer.beta2", "-0.1 must be in [0, 1)"}},
      {"betas_one_number",
       with_optimizer("{ type = \"adam\", betas = [0.9] }"),
       {"bad.toml:10:", "train.optimizer.betas", "got the list [0.9]", "two numbers in [0, 1)"}},
      {"betas_out_of_range",
       with_optimizer("{ type = \"adam\", betas = [0.9, 1.0] }"),
       {"bad.toml:10:", "train.optimizer.betas", "got the list [0.9, 1.0]",
        "two numbers in [0, 1)"}},
      {"betas_not_a_list",
       with_optimizer("{ type = \"adam\", betas = 0.9 }"),
       {"bad.toml:10:", "train.optimizer.betas", "got the float 0.9", "two numbers"}},
      {"betas_strings",
       with_optimizer("{ type = \"adam\", betas = [\"0.9\", \"0.99\"] }"),
       {"bad.toml:10:", "train.optimizer.betas", "got the list [\"0.9\", \"0.99\"]",
        "two numbers"}},
      {"betas_and_beta1",
       with_optimizer("{ type = \"adam\", beta1 = 0.8, betas = [0.9, 0.99] }"),
       {"bad.toml:10:", "train.optimizer.beta1", "given twice", "betas"}},
      {"zero_eps",
       with_optimizer("{ type = \"adam\", eps = 0.0 }"),
       {"bad.toml:10:", "train.optimizer.eps", "0.0 must be > 0"}},
      {"negative_eps",
       with_optimizer("{ type = \"adamw\", eps = -1e-8 }"),
       {"bad.toml:10:", "train.optimizer.eps", "must be > 0"}},

      // [data]
      {"unknown_data_key",
       model_and({"[data]", "sample = 10"}),
       {"bad.toml:10:", "data.sample", "unknown key", "expected one of: source, samples"}},
      {"test_samples_for_a_file_source",
       model_and({"[data]", "source = \"fashion-mnist\"", "test_samples = 100"}),
       {"bad.toml:11:", "data.test_samples",
        "only generated sources (disc, imdb-synthetic) take test_samples"}},
      {"test_that_is_not_a_csv",
       model_and({"[data]", "source = \"csv:a.csv\"", "test = \"fashion-mnist\""}),
       {"bad.toml:11:", "data.test", "'fashion-mnist' is not a file of samples", "csv:PATH",
        "safetensors:PATH"}},
      {"test_file_and_test_samples",
       model_and({"[data]", "source = \"disc\"", "test_samples = 10", "test = \"csv:t.csv\""}),
       {"bad.toml:12:", "data.test", "test_samples = 10 both name the test split"}},
      {"validation_split_of_one",
       model_and({"[data]", "validation_split = 1.0"}),
       {"bad.toml:10:", "data.validation_split", "1.0 must be in (0, 1)",
        "Keras's validation_split"}},
      {"validation_split_of_zero",
       model_and({"[data]", "validation_split = 0"}),
       {"bad.toml:10:", "data.validation_split", "0.0 must be in (0, 1)"}},
      {"unknown_source",
       model_and({"[data]", "source = \"mnist\""}),
       {"bad.toml:10:", "data.source", "unknown source 'mnist'",
        "\"disc\", \"csv:PATH\", \"safetensors:PATH\", \"fashion-mnist\", \"idx:DIR\", "
        "\"imdb:DIR\", \"imdb-synthetic\""}},
      {"source_prefix_is_case_sensitive",
       model_and({"[data]", "source = \"CSV:x.csv\""}),
       {"bad.toml:10:", "data.source", "unknown source 'CSV:x.csv'"}},
      {"source_not_a_string",
       model_and({"[data]", "source = 1"}),
       {"bad.toml:10:", "data.source", "got the integer 1", "csv:PATH"}},
      {"empty_csv_path",
       model_and({"[data]", "source = \"csv:\""}),
       {"bad.toml:10:", "data.source", "empty path", "csv:PATH"}},
      {"zero_samples",
       model_and({"[data]", "samples = 0"}),
       {"bad.toml:10:", "data.samples", "0 must be a positive integer"}},
      {"negative_samples",
       model_and({"[data]", "samples = -5"}),
       {"bad.toml:10:", "data.samples", "-5 must be a positive integer"}},
      {"samples_is_a_float",
       model_and({"[data]", "samples = 1e3"}),
       {"bad.toml:10:", "data.samples", "got the float 1000.0", "expected an integer"}},
  };
}

class SpecErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecErrorTest, NamesFileLineKeyAndExpectation) {
  const ErrorCase& c = GetParam();
  const std::string message = user_error([&] { parse_spec(c.toml, "bad.toml"); });
  EXPECT_EQ(message.rfind("bad.toml", 0), 0u) << "the message starts with the file: " << message;
  expect_contains(message, c.expected);
}

INSTANTIATE_TEST_SUITE_P(Errors, SpecErrorTest, ::testing::ValuesIn(error_cases()),
                         [](const auto& test) { return test.param.name; });

// infer_shapes also guards specs built in code, which have no lines: the message then names the
// origin and the layer, without a made-up line number.
TEST(SpecShapes, CodeBuiltSpecsAreCheckedToo) {
  ModelSpec s = *builtin_spec("disc-3");
  s.input = {2, 2};
  std::string message = user_error([&] { infer_shapes(s); });
  expect_contains(message, {"built-in: model.layers[0]: linear needs an input of rank 1"});
  EXPECT_EQ(message.find("built-in:0"), std::string::npos) << message;

  s = *builtin_spec("disc-3");
  s.layers[2].out = -1;
  expect_contains(user_error([&] { infer_shapes(s); }),
                  {"built-in: model.layers[2].out: width -1 must be a positive integer"});

  s = *builtin_spec("disc-3");
  s.input = {0};
  expect_contains(user_error([&] { parameter_count(s); }), {"model.input[0]", "positive"});

  s.input = {};
  expect_contains(user_error([&] { infer_shapes(s); }), {"model.input", "empty"});

  s = *builtin_spec("disc-3");
  s.layers.clear();
  expect_contains(user_error([&] { infer_shapes(s); }), {"model.layers", "empty"});

  s = *builtin_spec("disc-3");
  s.layers.back().out = 1;
  expect_contains(user_error([&] { infer_shapes(s); }),
                  {"model.layers[4]", "cross_entropy", "got [1]"});
}

TEST(SpecShapes, AbsurdWidthsAreRefusedInsteadOfOverflowing) {
  // 2^40 * 2^40 weights do not fit in int64: the count must fail cleanly, not wrap around.
  const std::string toml = with_layers(
      {"{ type = \"linear\", out = 1099511627776 }", "{ type = \"linear\", out = 1099511627776 }"});
  expect_contains(user_error([&] { parse_spec(toml, "huge.toml"); }),
                  {"huge.toml:5:", "model.layers[1]", "too many parameters"});
}

// Sizes that overflowed int64 (undefined behaviour, reported by UBSan) or wrapped to a small count
// that built a model other than the spec's: each is refused naming the file, the line and the
// field. Layers start on line 4.
TEST(SpecShapes, SizesThatWouldOverflowAreRefusedNamingTheField) {
  struct Case {
    std::string toml;
    std::vector<std::string> expected;
  };
  const std::vector<Case> cases = {
      // 2 x padding overflowed before the kernel was compared with the padded side.
      {with_layers({"{ type = \"conv2d\", out = 2, kernel = 3, padding = 4611686018427387904 }",
                    "{ type = \"flatten\" }", "{ type = \"linear\", out = 2 }"},
                   "[1, 8, 8]"),
       {"big.toml:4:", "model.layers[0].padding", "4611686018427387904", "too large"}},
      {with_layers({"{ type = \"maxpool2d\", kernel = 3, padding = 9223372036854775807 }",
                    "{ type = \"flatten\" }", "{ type = \"linear\", out = 2 }"},
                   "[1, 8, 8]"),
       {"big.toml:4:", "model.layers[0].padding", "at most half the kernel"}},
      // An LSTM's four gates: 4 x out overflowed in its weights' shapes.
      {with_layers(
           {"{ type = \"embedding\", vocab = 10, out = 4 }",
            "{ type = \"lstm\", out = 2305843009213693952 }", "{ type = \"linear\", out = 2 }"},
           "[10]"),
       {"big.toml:5:", "model.layers[1].out", "2305843009213693952", "gates"}},
      // 3 x 6148914691236517206 is 2^64 + 2: wrapped, it trained a model of two features.
      {with_layers({"{ type = \"flatten\" }", "{ type = \"linear\", out = 2 }"},
                   "[3, 6148914691236517206]"),
       {"big.toml", "model.input", "more than 2^50 values per sample"}},
      // A convolution whose output per sample is beyond any device, with inputs that are not.
      {with_layers({"{ type = \"conv2d\", out = 1048576, kernel = 1 }", "{ type = \"flatten\" }",
                    "{ type = \"linear\", out = 2 }"},
                   "[1, 65536, 65536]"),
       {"big.toml:4:", "model.layers[0]", "conv2d outputs [1048576, 65536, 65536]",
        "more than 2^50"}},
      {with_layers({"{ type = \"embedding\", vocab = 1125899906842624, out = 2 }",
                    "{ type = \"lstm\", out = 2 }", "{ type = \"linear\", out = 2 }"},
                   "[10]"),
       {"big.toml:4:", "model.layers[0]", "too many parameters",
        "weight is [1125899906842624, 2]"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.toml);
    expect_contains(user_error([&] { parse_spec(c.toml, "big.toml"); }), c.expected);
  }
}

// A spec built in code reaches the checks without the parser: a flatten whose product wraps is
// refused there too (layer_output_shape is called on layers one at a time).
TEST(SpecShapes, AFlattenOfTooManyFeaturesIsRefused) {
  ModelSpec s = *builtin_spec("disc-3");
  s.layers.insert(s.layers.begin(), LayerSpec{});
  s.layers.front().type = LayerType::Flatten;
  expect_contains(user_error([&] {
                    layer_output_shape(s, 0, {3, 6148914691236517206});
                  }),
                  {"built-in: model.layers[0]", "flattening [3, 6148914691236517206]",
                   "more than 2^50 features"});
}

// --- Built-ins --------------------------------------------------------------------------------

// Parameters as PyTorch counts them, from the shapes alone: in * out + out per Linear.
int64_t linear_parameters(const ModelSpec& s) {
  const auto shapes = infer_shapes(s);
  int64_t total = 0;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (s.layers[i].type != LayerType::Linear) continue;
    const int64_t in = i == 0 ? s.input[0] : shapes[i - 1][0];
    const int64_t out = shapes[i][0];
    total += in * out + (s.layers[i].bias ? out : 0);
  }
  return total;
}

TEST(SpecBuiltin, NamesAreDisc2ToDisc12AndTheClassics) {
  std::vector<std::string> expected;
  for (int l = 2; l <= 12; ++l) expected.push_back("disc-" + std::to_string(l));
  for (const char* name : {"mnist-mlp", "mnist-cnn", "imdb-lstm"}) expected.push_back(name);
  EXPECT_EQ(builtin_spec_names(), expected);
  for (const char* name : {"disc-1", "disc-13", "disc-0", "DISC-8", "disc-08", "disc8", "disc-", "",
                           "specs/disc-8.toml"}) {
    EXPECT_FALSE(builtin_spec(name).has_value()) << name;
  }
}

TEST(SpecBuiltin, DiscModelsHaveTheClassicSizes) {
  EXPECT_EQ(linear_parameters(*builtin_spec("disc-8")), 44710);
  EXPECT_EQ(linear_parameters(*builtin_spec("disc-10")), 703142);
  EXPECT_EQ(linear_parameters(*builtin_spec("disc-12")), 11201190);
  for (int l = 2; l <= 12; ++l) {
    const std::string name = "disc-" + std::to_string(l);
    EXPECT_EQ(parameter_count(*builtin_spec(name)), linear_parameters(*builtin_spec(name))) << name;
  }
}

// The counts Keras prints for its examples (the LSTM's two bias vectors are PyTorch's: Keras has
// one, 512 fewer).
TEST(SpecBuiltin, ClassicModelsHaveTheirPublishedSizes) {
  EXPECT_EQ(parameter_count(*builtin_spec("mnist-mlp")), 669706);
  EXPECT_EQ(parameter_count(*builtin_spec("mnist-cnn")), 1199882);
  EXPECT_EQ(parameter_count(*builtin_spec("imdb-lstm")),
            2560000 + 4 * 128 * (128 + 128) + 2 * 512 + 129);
  const auto shapes = infer_shapes(*builtin_spec("mnist-cnn"));
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{32, 26, 26}));
  EXPECT_EQ(shapes[4], (std::vector<int64_t>{64, 12, 12}));
  EXPECT_EQ(shapes[6], (std::vector<int64_t>{9216}));
  EXPECT_EQ(infer_shapes(*builtin_spec("imdb-lstm"))[1], (std::vector<int64_t>{128}));
}

TEST(SpecBuiltin, DiscLDoublesTheWidthThenClassifies) {
  for (int depth = 2; depth <= 12; ++depth) {
    const std::string name = "disc-" + std::to_string(depth);
    SCOPED_TRACE(name);
    const ModelSpec s = *builtin_spec(name);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(s.origin, "built-in");
    EXPECT_EQ(s.input, std::vector<int64_t>{2});
    // Linear, ReLU pairs doubling from 2 to 2^depth, then Linear(2^depth, 2).
    ASSERT_EQ(s.layers.size(), static_cast<size_t>(2 * depth - 1));
    int64_t width = 2;
    for (int i = 0; i + 1 < depth; ++i) {
      width *= 2;
      EXPECT_EQ(s.layers[2 * i].type, LayerType::Linear);
      EXPECT_EQ(s.layers[2 * i].out, width);
      EXPECT_TRUE(s.layers[2 * i].bias);
      EXPECT_EQ(s.layers[2 * i + 1].type, LayerType::ReLU);
    }
    EXPECT_EQ(width, int64_t{1} << depth);
    EXPECT_EQ(s.layers.back().type, LayerType::Linear);
    EXPECT_EQ(s.layers.back().out, 2);
    for (const LayerSpec& l : s.layers) EXPECT_EQ(l.line, 0);
    EXPECT_EQ(s.loss, LossType::CrossEntropy);
    EXPECT_EQ(s.train.optimizer.type, OptimizerType::SGD);
    EXPECT_EQ(s.train.optimizer.lr, 0.1);
    EXPECT_EQ(s.train.optimizer.momentum, 0.0);
    EXPECT_FALSE(s.train.optimizer.nesterov);
    EXPECT_EQ(s.train.optimizer.weight_decay, 0.0);
    EXPECT_EQ(s.train.batch, 100);
    EXPECT_EQ(s.train.epochs, 100);
    EXPECT_FALSE(s.train.shuffle);
    EXPECT_EQ(s.train.seed, 0u);
    EXPECT_EQ(s.data.source, "disc");
    EXPECT_EQ(s.data.samples, 1000);
  }
  // disc-8 spelled out, as the issue does.
  const ModelSpec d8 = *builtin_spec("disc-8");
  EXPECT_EQ(d8.layers.size(), 15u);  // 8 Linear + 7 ReLU
  EXPECT_EQ(d8.layers.front().out, 4);
  EXPECT_EQ(d8.layers[12].out, 256);
  EXPECT_EQ(d8.layers.back().out, 2);
}

// --- to_toml ----------------------------------------------------------------------------------

void expect_round_trip(const ModelSpec& s) {
  const std::string text = to_toml(s);
  SCOPED_TRACE(text);
  const ModelSpec back = parse_spec(text, "again.toml");
  expect_same(back, s);
  EXPECT_EQ(to_toml(back), text);  // a fixed point: rendering what was read changes nothing
}

TEST(SpecToToml, WritesTheDocumentedLayout) {
  const std::string text = to_toml(*builtin_spec("disc-3"));
  expect_contains(text, {"[model]\nname = \"disc-3\"\ninput = [2]\nlayers = [\n"
                         "  { type = \"linear\", out = 4 },\n"
                         "  { type = \"relu\" },\n"
                         "  { type = \"linear\", out = 8 },\n"
                         "  { type = \"relu\" },\n"
                         "  { type = \"linear\", out = 2 },\n"
                         "]\nloss = \"cross_entropy\"\n",
                         "\n[train]\noptimizer = { type = \"sgd\", lr = 0.1, momentum = 0.0, ",
                         "batch = 100\nepochs = 100\nshuffle = false\nseed = 0\n",
                         "\n[data]\nsource = \"disc\"\nsamples = 1000\n"});
}

TEST(SpecToToml, RoundTripsEveryBuiltin) {
  for (const auto& name : builtin_spec_names()) {
    SCOPED_TRACE(name);
    expect_round_trip(*builtin_spec(name));
  }
}

TEST(SpecToToml, RoundTripsEveryKeyAndOptimizer) {
  expect_round_trip(parse_spec(kFullSgd, "full.toml"));
  ModelSpec s = parse_spec(kFullSgd, "full.toml");
  for (OptimizerType type : {OptimizerType::Adam, OptimizerType::AdamW}) {
    SCOPED_TRACE(optimizer_type_name(type));
    s.train.optimizer = OptimizerSettings{};
    s.train.optimizer.type = type;
    s.train.optimizer.lr = 3e-4;
    s.train.optimizer.beta1 = 0.85;
    s.train.optimizer.beta2 = 0.9999;
    s.train.optimizer.eps = 1e-7;
    s.train.optimizer.weight_decay = 0.0;  // explicit, so AdamW must not fall back to 0.01
    expect_round_trip(s);
  }
}

// leaky_relu writes its slope only where it is not PyTorch's default, and reads it back exactly.
TEST(SpecToToml, RoundTripsLeakyReluSlopes) {
  ModelSpec s = *builtin_spec("disc-4");
  s.layers[1].type = LayerType::LeakyReLU;
  s.layers[3].type = LayerType::LeakyReLU;
  s.layers[3].negative_slope = 0.3;
  const std::string text = to_toml(s);
  expect_contains(text, {"  { type = \"leaky_relu\" },\n",
                         "  { type = \"leaky_relu\", negative_slope = 0.3 },\n"});
  expect_round_trip(s);
  s.layers[1].negative_slope = 0.0;  // a ReLU, written as such
  expect_contains(to_toml(s), {"{ type = \"leaky_relu\", negative_slope = 0.0 }"});
  expect_round_trip(s);
  const ModelSpec parsed = parse_spec(to_toml(s), "again.toml");
  EXPECT_EQ(parsed.layers[1].negative_slope, 0.0);
  EXPECT_EQ(parsed.layers[3].negative_slope, 0.3);
}

TEST(SpecToToml, RoundTripsAwkwardValues) {
  ModelSpec s = *builtin_spec("disc-4");
  s.name = "odd \"name\" with \\ backslash, tab\t, newline\n, bell\a and ünïcode";
  s.data.source = "csv:/data/my \"quoted\" folder/train set.csv";
  s.layers[0].bias = false;
  s.layers[1].type = LayerType::Tanh;
  s.layers[3].type = LayerType::Sigmoid;
  s.train.optimizer.lr = 0.1 + 0.2;  // 0.30000000000000004: needs all 17 digits
  s.train.optimizer.momentum = 1.0 / 3.0;
  s.train.optimizer.dampening = 1.0;
  s.train.optimizer.weight_decay = 5e-324;  // the smallest subnormal
  s.train.batch = 1;
  s.train.epochs = std::numeric_limits<int64_t>::max();
  s.train.shuffle = true;
  s.train.seed = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  s.data.samples = 1;
  expect_round_trip(s);
  s.train.optimizer.lr = 1e22;  // large and integral: must still read back as the same double
  expect_round_trip(s);
}

// --- Files ------------------------------------------------------------------------------------

fs::path specs_dir() { return fs::path(CROSSOVER_SOURCE_DIR) / "specs"; }

TEST(SpecFiles, ShippedFilesAreExactlyTheBuiltins) {
  ASSERT_TRUE(fs::is_directory(specs_dir())) << specs_dir() << " (define CROSSOVER_SOURCE_DIR)";
  for (const auto& name : builtin_spec_names()) {
    SCOPED_TRACE(name);
    const fs::path path = specs_dir() / (name + ".toml");
    const ModelSpec builtin = *builtin_spec(name);
    const ModelSpec loaded = load_spec_file(path);
    expect_same(loaded, builtin);
    EXPECT_EQ(loaded.origin, path.string());
    expect_same(resolve_spec(path.string()), builtin);
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!name.starts_with("disc-")) {
      // Comment lines naming the example, then exactly to_toml.
      ASSERT_TRUE(text.starts_with("# " + name + ": Keras's "));
      EXPECT_TRUE(text.ends_with("\n" + to_toml(builtin)));
      EXPECT_NE(text.find(std::to_string(parameter_count(builtin)) + " parameters."),
                std::string::npos);
      continue;
    }
    // Byte for byte what the generator writes: a comment line, then to_toml.
    const int depth = std::stoi(name.substr(std::string("disc-").size()));
    const std::string header = "# " + name + ": the classic depth sweep (" + std::to_string(depth) +
                               " Linear layers doubling the width from 2 to " +
                               std::to_string(int64_t{1} << depth) + "), " +
                               std::to_string(parameter_count(builtin)) + " parameters.\n";
    EXPECT_EQ(text, header + to_toml(builtin));
  }
}

TEST(SpecFiles, EveryShippedSpecParses) {
  ASSERT_TRUE(fs::is_directory(specs_dir())) << specs_dir();
  int count = 0;
  for (const auto& entry : fs::directory_iterator(specs_dir())) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_spec_file(entry.path()));
    ++count;
  }
  EXPECT_GE(count, static_cast<int>(builtin_spec_names().size()));
}

TEST(SpecFiles, NameDefaultsToTheFileStemAndErrorsNameThePath) {
  const xo::testing::TempDir dir_folder("crossover_spec_stem");
  const auto& dir = dir_folder.path();
  write(dir / "my-model.toml", model_and());
  const ModelSpec s = load_spec_file(dir / "my-model.toml");
  EXPECT_EQ(s.name, "my-model");
  EXPECT_EQ(s.origin, (dir / "my-model.toml").string());

  write(dir / "broken.toml", model_and({"[train]", "batch = 0"}));
  expect_contains(user_error([&] { load_spec_file(dir / "broken.toml"); }),
                  {(dir / "broken.toml").string() + ":10: train.batch"});

  expect_contains(user_error([&] { load_spec_file(dir / "absent.toml"); }),
                  {(dir / "absent.toml").string(), "cannot open"});
}

TEST(SpecFiles, CsvPathsAreRelativeToTheSpecFile) {
  const xo::testing::TempDir dir_folder("crossover_spec_relative");
  const auto& dir = dir_folder.path();
  write(dir / "m.toml", model_and({"[data]", "source = \"csv:data/train.csv\""}));
  EXPECT_EQ(load_spec_file(dir / "m.toml").data.source, "csv:" + (dir / "data/train.csv").string());

  fs::create_directories(dir / "sub");
  write(dir / "sub" / "up.toml", model_and({"[data]", "source = \"csv:../shared.csv\""}));
  EXPECT_EQ(load_spec_file(dir / "sub" / "up.toml").data.source,
            "csv:" + (dir / "shared.csv").string());

  write(dir / "abs.toml", model_and({"[data]", "source = \"csv:/srv/data/points.csv\""}));
  EXPECT_EQ(load_spec_file(dir / "abs.toml").data.source, "csv:/srv/data/points.csv");

  // Text without a file keeps the path as written.
  EXPECT_EQ(
      parse_spec(model_and({"[data]", "source = \"csv:data/train.csv\""}), "t.toml").data.source,
      "csv:data/train.csv");
}

TEST(SpecResolve, BuiltinNamesFilesAndNeither) {
  expect_same(resolve_spec("disc-5"), *builtin_spec("disc-5"));
  EXPECT_EQ(resolve_spec("disc-5").origin, "built-in");

  const xo::testing::TempDir dir_folder("crossover_spec_resolve");
  const auto& dir = dir_folder.path();
  write(dir / "mine.toml", model_and());
  const ModelSpec s = resolve_spec((dir / "mine.toml").string());
  EXPECT_EQ(s.name, "mine");
  EXPECT_EQ(s.origin, (dir / "mine.toml").string());

  expect_contains(
      user_error([] { resolve_spec("foo"); }),
      {"'foo' is neither a built-in model (disc-2, disc-3", "imdb-lstm) nor a spec file"});
  expect_contains(user_error([] { resolve_spec("disc-99"); }), {"'disc-99'", "disc-2, disc-3"});
  expect_contains(user_error([&] { resolve_spec((dir / "absent.toml").string()); }),
                  {(dir / "absent.toml").string(), "not found", "disc-2"});
  expect_contains(user_error([&] { resolve_spec(dir.string()); }), {dir.string(), "not a file"});
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

TEST(SpecShapes, BceNeedsOneOutputAndEmbeddingsNeedTokenSequences) {
  ModelSpec s = *builtin_spec("disc-4");
  s.loss = LossType::BinaryCrossEntropy;
  expect_contains(user_error([&] { infer_shapes(s); }),
                  {"built-in: model.layers[6]: bce needs the last layer to output one "
                   "score (a linear with out = 1), got [2]"});
  s.layers.back().out = 1;
  EXPECT_EQ(infer_shapes(s).back(), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace xo

// Spec parsing: a full spec, defaults, the built-ins and the shipped files, and every error a user
// can make, each naming the file, the line and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/spec.h"
#include "support/expect_error.h"

namespace xo {
namespace {

constexpr const char* kValid = R"(# a comment
[model]
name = "mixed"
input = [3]
layers = [
  { type = "linear", out = 16 },
  { type = "tanh" },
  { type = "linear", out = 8, bias = false },
  { type = "sigmoid" },
  { type = "linear", out = 3 },
]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 1e-4 }
batch = 32
epochs = 7
shuffle = true
seed = 42
[data]
source = "csv:points.csv"
samples = 10
)";

TEST(Spec, ParsesEveryKey) {
  const ModelSpec s = parse_spec(kValid, "mixed.toml");
  EXPECT_EQ(s.name, "mixed");
  EXPECT_EQ(s.input, std::vector<int64_t>{3});
  ASSERT_EQ(s.layers.size(), 5u);
  EXPECT_EQ(s.layers[0].type, LayerType::Linear);
  EXPECT_EQ(s.layers[0].out, 16);
  EXPECT_EQ(s.layers[0].line, 6);
  EXPECT_EQ(s.layers[1].type, LayerType::Tanh);
  EXPECT_FALSE(s.layers[2].bias);
  EXPECT_EQ(s.layers[3].type, LayerType::Sigmoid);
  EXPECT_EQ(s.train.optimizer.type, "sgd");
  EXPECT_DOUBLE_EQ(s.train.optimizer.lr, 0.05);
  EXPECT_DOUBLE_EQ(s.train.optimizer.momentum, 0.9);
  EXPECT_TRUE(s.train.optimizer.nesterov);
  EXPECT_DOUBLE_EQ(s.train.optimizer.weight_decay, 1e-4);
  EXPECT_EQ(s.train.batch, 32);
  EXPECT_EQ(s.train.epochs, 7);
  EXPECT_TRUE(s.train.shuffle);
  EXPECT_EQ(s.train.seed, 42u);
  EXPECT_EQ(s.data.source, "csv:points.csv");
  EXPECT_EQ(s.data.samples, 10);
  const auto shapes = infer_shapes(s);
  EXPECT_EQ(shapes.back(), std::vector<int64_t>{3});
}

TEST(Spec, DefaultsFollowTheIssue) {
  const ModelSpec s = parse_spec(
      "[model]\ninput = [2]\nlayers = [{ type = \"linear\", out = 2 }]\nloss = \"cross_entropy\"\n",
      "dir/tiny.toml");
  EXPECT_EQ(s.name, "tiny");
  EXPECT_EQ(s.train.optimizer.type, "sgd");
  EXPECT_DOUBLE_EQ(s.train.optimizer.lr, 0.1);
  EXPECT_EQ(s.train.batch, 100);
  EXPECT_EQ(s.train.epochs, 100);
  EXPECT_FALSE(s.train.shuffle);
  EXPECT_EQ(s.data.source, "disc");
  EXPECT_EQ(s.data.samples, 1000);
}

TEST(Spec, AdamWDefaultsToPyTorchWeightDecay) {
  const ModelSpec s = parse_spec(
      "[model]\ninput = [2]\nlayers = [{ type = \"linear\", out = 2 }]\nloss = \"cross_entropy\"\n"
      "[train]\noptimizer = { type = \"adamw\", lr = 0.001, betas = [0.8, 0.99] }\n",
      "a.toml");
  EXPECT_DOUBLE_EQ(s.train.optimizer.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(s.train.optimizer.beta1, 0.8);
  EXPECT_DOUBLE_EQ(s.train.optimizer.beta2, 0.99);
}

struct ErrorCase {
  std::string name;
  std::string toml;
  std::vector<std::string> expected;  // substrings of the message
};

std::string with_layers(const std::string& layers, const std::string& extra = "") {
  return "[model]\ninput = [2]\nlayers = [\n" + layers + "\n]\nloss = \"cross_entropy\"\n" + extra;
}

std::vector<ErrorCase> error_cases() {
  const std::string ok_layers = "{ type = \"linear\", out = 2 }";
  return {
      {"syntax", "[model\ninput = [2]\n", {"bad.toml:1:", "TOML syntax error"}},
      {"unknown_layer_type",
       with_layers("{ type = \"linear\", out = 4 },\n{ type = \"relux\" },\n{ type = \"linear\", "
                   "out = 2 }"),
       {"bad.toml:5:", "model.layers[1].type", "unknown layer type 'relux'",
        "linear, relu, tanh, sigmoid"}},
      {"negative_width",
       with_layers("{ type = \"linear\", out = -4 },\n" + ok_layers),
       {"bad.toml:4:", "model.layers[0].out", "width -4 must be a positive integer"}},
      {"zero_width",
       with_layers("{ type = \"linear\", out = 0 },\n" + ok_layers),
       {"bad.toml:4:", "model.layers[0].out", "positive"}},
      {"width_is_a_string",
       with_layers("{ type = \"linear\", out = \"4\" }"),
       {"bad.toml:4:", "model.layers[0].out", "expected an integer, got a string"}},
      {"missing_width",
       with_layers("{ type = \"linear\" }"),
       {"bad.toml:4:", "model.layers[0].out", "missing"}},
      {"unknown_layer_key",
       with_layers("{ type = \"relu\", out = 3 },\n" + ok_layers),
       {"bad.toml:4:", "model.layers[0].out", "unknown key"}},
      {"missing_layers",
       "[model]\ninput = [2]\nloss = \"cross_entropy\"\n",
       {"bad.toml:1:", "model.layers", "missing"}},
      {"missing_model", "[train]\nbatch = 4\n", {"bad.toml", "model", "missing"}},
      {"missing_loss",
       "[model]\ninput = [2]\nlayers = [" + ok_layers + "]\n",
       {"bad.toml:1:", "model.loss", "missing"}},
      {"unknown_loss",
       with_layers(ok_layers).replace(with_layers(ok_layers).find("cross_entropy"), 13, "mse"),
       {"bad.toml:6:", "model.loss", "unknown loss 'mse'"}},
      {"unknown_top_level",
       with_layers(ok_layers, "[trian]\nbatch = 3\n"),
       {"bad.toml:7:", "trian", "unknown key", "model, train, data"}},
      {"typo_in_train",
       with_layers(ok_layers, "[train]\nbach = 3\n"),
       {"bad.toml:8:", "train.bach", "unknown key"}},
      {"negative_batch",
       with_layers(ok_layers, "[train]\nbatch = -1\n"),
       {"bad.toml:8:", "train.batch", "-1 must be a positive integer"}},
      {"zero_epochs",
       with_layers(ok_layers, "[train]\nepochs = 0\n"),
       {"bad.toml:8:", "train.epochs", "positive"}},
      {"negative_lr",
       with_layers(ok_layers, "[train]\noptimizer = { type = \"sgd\", lr = -0.1 }\n"),
       {"bad.toml:8:", "train.optimizer.lr", "must be positive"}},
      {"momentum_out_of_range",
       with_layers(ok_layers, "[train]\noptimizer = { type = \"sgd\", momentum = 1.5 }\n"),
       {"bad.toml:8:", "train.optimizer.momentum", "[0, 1)"}},
      {"nesterov_without_momentum",
       with_layers(ok_layers, "[train]\noptimizer = { type = \"sgd\", nesterov = true }\n"),
       {"bad.toml:8:", "train.optimizer.nesterov", "momentum > 0"}},
      {"unknown_optimizer",
       with_layers(ok_layers, "[train]\noptimizer = { type = \"lbfgs\" }\n"),
       {"bad.toml:8:", "train.optimizer.type", "unknown optimizer 'lbfgs'", "sgd, adam, adamw"}},
      {"sgd_key_on_adam",
       with_layers(ok_layers, "[train]\noptimizer = { type = \"adam\", momentum = 0.9 }\n"),
       {"bad.toml:8:", "train.optimizer.momentum", "unknown key"}},
      {"bad_source",
       with_layers(ok_layers, "[data]\nsource = \"mnist\"\n"),
       {"bad.toml:8:", "data.source", "unknown source 'mnist'", "csv:PATH"}},
      {"empty_csv_path",
       with_layers(ok_layers, "[data]\nsource = \"csv:\"\n"),
       {"bad.toml:8:", "data.source", "needs a path"}},
      {"input_not_positive",
       "[model]\ninput = [0]\nlayers = [" + ok_layers + "]\nloss = \"cross_entropy\"\n",
       {"bad.toml:2:", "model.input[0]", "positive integer"}},
      {"input_rank_two",
       "[model]\ninput = [2, 3]\nlayers = [" + ok_layers + "]\nloss = \"cross_entropy\"\n",
       {"bad.toml:3:", "model.layers[0]", "linear needs a flat input of rank 1, got [2, 3]"}},
      {"one_class",
       with_layers("{ type = \"linear\", out = 4 },\n{ type = \"linear\", out = 1 }"),
       {"bad.toml:5:", "model.layers[1]", "cross_entropy", "at least 2", "got [1]"}},
      {"no_linear", with_layers("{ type = \"relu\" }"), {"bad.toml", "at least one linear"}},
  };
}

class SpecErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecErrorTest, NamesFileLineKeyAndExpectation) {
  const ErrorCase& c = GetParam();
  testing::expect_user_error([&] { parse_spec(c.toml, "bad.toml"); }, c.expected);
}

INSTANTIATE_TEST_SUITE_P(Errors, SpecErrorTest, ::testing::ValuesIn(error_cases()),
                         [](const auto& case_info) { return case_info.param.name; });

TEST(Spec, BuiltinDiscModelsHaveTheClassicSizes) {
  EXPECT_EQ(builtin_spec_names().size(), 11u);
  EXPECT_EQ(parameter_count(parse_spec(kValid, "mixed.toml")), 3 * 16 + 16 + 16 * 8 + 8 * 3 + 3);
  EXPECT_EQ(parameter_count(*builtin_spec("disc-8")), 44710);
  EXPECT_EQ(parameter_count(*builtin_spec("disc-10")), 703142);
  EXPECT_EQ(parameter_count(*builtin_spec("disc-12")), 11201190);
  const ModelSpec d8 = *builtin_spec("disc-8");
  EXPECT_EQ(d8.layers.size(), 15u);  // 8 Linear + 7 ReLU
  EXPECT_EQ(d8.layers.front().out, 4);
  EXPECT_EQ(d8.layers[12].out, 256);
  EXPECT_EQ(d8.layers.back().out, 2);
  EXPECT_FALSE(builtin_spec("disc-13").has_value());
}

void expect_same(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.input, b.input);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].type, b.layers[i].type);
    EXPECT_EQ(a.layers[i].out, b.layers[i].out);
    EXPECT_EQ(a.layers[i].bias, b.layers[i].bias);
  }
  const OptimizerSpec &x = a.train.optimizer, &y = b.train.optimizer;
  EXPECT_EQ(x.type, y.type);
  EXPECT_EQ(x.lr, y.lr);
  EXPECT_EQ(x.momentum, y.momentum);
  EXPECT_EQ(x.nesterov, y.nesterov);
  EXPECT_EQ(x.weight_decay, y.weight_decay);
  EXPECT_EQ(x.beta1, y.beta1);
  EXPECT_EQ(x.beta2, y.beta2);
  EXPECT_EQ(x.eps, y.eps);
  EXPECT_EQ(a.train.batch, b.train.batch);
  EXPECT_EQ(a.train.epochs, b.train.epochs);
  EXPECT_EQ(a.train.shuffle, b.train.shuffle);
  EXPECT_EQ(a.train.seed, b.train.seed);
  EXPECT_EQ(a.data.source, b.data.source);
  EXPECT_EQ(a.data.samples, b.data.samples);
}

TEST(Spec, ToTomlRoundTrips) {
  const ModelSpec s = parse_spec(kValid, "mixed.toml");
  expect_same(parse_spec(to_toml(s), "again.toml"), s);
  ModelSpec adam = *builtin_spec("disc-3");
  adam.train.optimizer.type = "adam";
  adam.train.optimizer.lr = 3e-4;
  expect_same(parse_spec(to_toml(adam), "adam.toml"), adam);
}

TEST(Spec, ShippedFilesEqualTheBuiltins) {
  for (const auto& name : builtin_spec_names()) {
    SCOPED_TRACE(name);
    const auto path = std::filesystem::path(CROSSOVER_SOURCE_DIR) / "specs" / (name + ".toml");
    expect_same(load_spec_file(path), *builtin_spec(name));
    expect_same(resolve_spec(path.string()), *builtin_spec(name));
  }
}

TEST(Spec, CsvPathsAreRelativeToTheSpecFile) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "spec_relative";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "m.toml") << with_layers("{ type = \"linear\", out = 2 }",
                                               "[data]\nsource = \"csv:data/train.csv\"\n");
  EXPECT_EQ(load_spec_file(dir / "m.toml").data.source, "csv:" + (dir / "data/train.csv").string());
}

TEST(Spec, ResolveNamesTheBuiltinsWhenNothingMatches) {
  testing::expect_user_error([] { resolve_spec("disc-99"); }, {"'disc-99'", "disc-2, disc-3"});
}

}  // namespace
}  // namespace xo

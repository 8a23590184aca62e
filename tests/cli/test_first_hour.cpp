// What a new user with a Keras or PyTorch background reaches for in the first hour. My data goes
// where my model goes: every command that trains takes --data, --test-data and --init as `train`
// does (before, `advise`, `tune` and `sweep` refused --data, "The following arguments were not
// expected", and trained the spec on its own [data] source, failing on the feature count).
// `--optimizer` on the command line; epoch lines that fit one screen; `models --show NAME`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using xo::testing::run_cli;

// A classifier of 3 features whose spec names the disc set (2 features): it trains only on data
// given in its place.
constexpr char kSpec[] = R"([model]
name = "three"
input = [3]
layers = [ { type = "linear", out = 8 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
batch = 10
epochs = 1
[data]
source = "disc"
samples = 40
)";

// `rows` samples of 3 features and a class in {0, 1}.
void write_points(const fs::path& file, int rows) {
  std::ofstream out(file);
  for (int i = 0; i < rows; ++i) {
    out << fmt::format("{},{},{},{}\n", 0.1 * i, 1.0 - 0.05 * i, (i % 5) * 0.2, i % 2);
  }
}

class DataFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() / "spec.toml") << kSpec;
    write_points(dir_.path() / "points.csv", 60);
    write_points(dir_.path() / "test.csv", 20);
  }
  xo::testing::TempDir dir_{"data-flags"};
};

TEST_F(DataFlags, WithoutThemTheSpecsOwnDataIsRefusedOnItsFeatureCount) {
  const auto r = run_cli("train spec.toml --threads 1", dir_.path());
  EXPECT_EQ(r.status, 2) << r.output;
}

// Each training command, with --data and --test-data in place of the spec's own: every one
// trains (exit 0) on the CSV's 60 rows.
TEST_F(DataFlags, EveryCommandThatTrainsTakesThem) {
  const std::string data = " --data points.csv --test-data test.csv --threads 1";
  const struct {
    const char* name;
    std::string args;
  } commands[] = {
      {"train", "train spec.toml" + data},
      {"advise", "advise spec.toml --steps 3 --devices cpu --out advise-out" + data},
      {"sweep",
       "sweep spec.toml --vary batch=10,20 --steps 3 --devices cpu --out sweep-out" + data},
      {"run", "run --models spec.toml --devices cpu --out run-out" + data},
      {"tune", "tune spec.toml --vary lr=0.1,0.2 --fuse off --parallel 1 --out tune-out" + data},
  };
  for (const auto& c : commands) {
    const auto r = run_cli(c.args, dir_.path());
    EXPECT_EQ(r.status, 0) << c.name << ": " << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.find("not expected"), std::string::npos) << c.name << "\n" << r.output;
  }
  // The tune trials' specs name the files, made absolute (they train in folders of their own).
  std::ifstream trial(dir_.path() / "tune-out" / "trials" / "t01" / "spec.toml");
  std::string spec((std::istreambuf_iterator<char>(trial)), std::istreambuf_iterator<char>());
  EXPECT_NE(spec.find("points.csv"), std::string::npos) << spec;
  EXPECT_NE(spec.find("test.csv"), std::string::npos) << spec;
}

// The run's header says what it read: the data, the test split and the initial weights.
TEST_F(DataFlags, TheHeaderEchoesTheDataAndTheInitialWeights) {
  ASSERT_EQ(
      run_cli("train spec.toml --data points.csv --threads 1 --save w.safetensors", dir_.path())
          .status,
      0);
  const auto r = run_cli(
      "train spec.toml --data points.csv --test-data test.csv --init w.safetensors --threads 1",
      dir_.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("points.csv"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test: csv:test.csv (20 samples)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("initial weights: " + (dir_.path() / "w.safetensors").string()),
            std::string::npos)
      << r.output;
}

TEST_F(DataFlags, ATestFileThatIsNotACsvIsRefusedNamingTheFlag) {
  const auto r =
      run_cli("advise spec.toml --data points.csv --test-data fashion-mnist", dir_.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--test-data fashion-mnist: not a CSV file"), std::string::npos)
      << r.output;
}

// `crossover evaluate`: a trained model's loss and accuracy on data, as Keras's model.evaluate;
// on the test split the same figures training reported after its last epoch.
TEST_F(DataFlags, EvaluateGivesATrainedModelsFiguresOnData) {
  const auto trained = run_cli(
      "train spec.toml --data points.csv --test-data test.csv --epochs 3 --threads 1 "
      "--save w.safetensors --json train.json",
      dir_.path());
  ASSERT_EQ(trained.status, 0) << trained.output;
  const auto r = run_cli(
      "evaluate spec.toml --data points.csv --test-data test.csv --init w.safetensors "
      "--threads 1 --json eval.json",
      dir_.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("  data: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  test: loss "), std::string::npos) << r.output;
  std::ifstream t(dir_.path() / "train.json"), e(dir_.path() / "eval.json");
  const auto train = nlohmann::json::parse(t), eval = nlohmann::json::parse(e);
  ASSERT_EQ(eval["splits"].size(), 2u) << eval.dump();
  EXPECT_EQ(eval["splits"][1]["split"], "test");
  EXPECT_EQ(eval["splits"][1]["samples"], 20);
  EXPECT_DOUBLE_EQ(eval["splits"][1]["loss"].get<double>(),
                   train["epochs"].back()["test_loss"].get<double>())
      << train["epochs"].back().dump();
  // No weights to evaluate: refused, saying what to give.
  const auto untrained = run_cli("evaluate spec.toml --data points.csv", dir_.path());
  EXPECT_EQ(untrained.status, 2) << untrained.output;
  EXPECT_NE(untrained.output.find("give --init FILE"), std::string::npos) << untrained.output;
}

// --optimizer NAME: torch.optim's rule with its defaults, the learning rate said; a name it does
// not know is refused with the choices.
TEST(FirstHour, TheOptimizerIsAFlagWithTorchsDefaults) {
  const xo::testing::TempDir dir("optimizer-flag");
  const auto adam = run_cli("train disc-2 --optimizer adam --epochs 1 --threads 1", dir.path());
  ASSERT_EQ(adam.status, 0) << adam.output;
  EXPECT_NE(adam.output.find("note: --optimizer adam: lr 0.001 (torch.optim's default"),
            std::string::npos)
      << adam.output;
  EXPECT_NE(adam.output.find("adam lr 0.001 on cpu"), std::string::npos) << adam.output;
  const auto rate =
      run_cli("train disc-2 --optimizer rmsprop --lr 0.02 --epochs 1 --threads 1", dir.path());
  ASSERT_EQ(rate.status, 0) << rate.output;
  EXPECT_NE(rate.output.find("rmsprop lr 0.02 on cpu"), std::string::npos) << rate.output;
  EXPECT_EQ(rate.output.find("torch.optim's default"), std::string::npos) << rate.output;
  const auto bad = run_cli("train disc-2 --optimizer adamm", dir.path());
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("adamw"), std::string::npos) << bad.output;
}

// 100 epochs print within one screen: the first, the last and every fourth between.
TEST(FirstHour, ALongRunsEpochLinesFitOneScreen) {
  const xo::testing::TempDir dir("epoch-lines");
  const auto r = run_cli("train disc-2 --epochs 100 --threads 1", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  int lines = 0;
  for (size_t at = r.output.find("\nepoch "); at != std::string::npos;
       at = r.output.find("\nepoch ", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, 26) << r.output;
  for (const char* epoch : {"epoch   1/100 ", "epoch   4/100 ", "epoch 100/100 "}) {
    EXPECT_NE(r.output.find(epoch), std::string::npos) << epoch << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("epoch   2/100 "), std::string::npos) << r.output;
}

// `models --show NAME` prints a built-in spec as a file that trains as the built-in does.
TEST(FirstHour, ABuiltInSpecIsShownAsAFileThatTrains) {
  const xo::testing::TempDir dir("models-show");
  const auto shown = run_cli("models --show disc-4", dir.path());
  ASSERT_EQ(shown.status, 0) << shown.output;
  EXPECT_EQ(shown.output.find("# disc-4: 4 layers, 230 parameters"), 0u) << shown.output;
  std::ofstream(dir.path() / "mine.toml") << shown.output;
  const auto from_file =
      run_cli("train mine.toml --epochs 2 --threads 1 --json file.json", dir.path());
  ASSERT_EQ(from_file.status, 0) << from_file.output;
  const auto built_in =
      run_cli("train disc-4 --epochs 2 --threads 1 --json builtin.json", dir.path());
  ASSERT_EQ(built_in.status, 0) << built_in.output;
  std::ifstream a(dir.path() / "file.json"), b(dir.path() / "builtin.json");
  const auto ja = nlohmann::json::parse(a), jb = nlohmann::json::parse(b);
  EXPECT_EQ(ja["final_loss"], jb["final_loss"]);
  const auto unknown = run_cli("models --show disc-99", dir.path());
  EXPECT_EQ(unknown.status, 2) << unknown.output;
}

}  // namespace

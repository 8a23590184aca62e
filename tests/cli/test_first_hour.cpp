// What a new user with a Keras or PyTorch background reaches for in the first hour. My data goes
// where my model goes: every command that trains takes --data, --test-data and --init as `train`
// does (before, `advise`, `tune` and `sweep` refused --data, "The following arguments were not
// expected", and trained the spec on its own [data] source, failing on the feature count).
// `--optimizer` on the command line; epoch lines that fit one screen; `models --show NAME`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "io/safetensors.h"
#include "support/cli.h"
#include "support/gpu.h"
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

// The same points as write_points, as a safetensors file: tensor x [rows, 3], tensor y [rows] of
// int64 labels.
void write_points_tensors(const fs::path& file, int rows) {
  xo::NamedTensor x{"x", {rows, 3}, {}}, y{"y", {rows}, {}, "I64"};
  for (int i = 0; i < rows; ++i) {
    for (const double v : {0.1 * i, 1.0 - 0.05 * i, (i % 5) * 0.2})
      x.data.push_back(static_cast<float>(v));
    y.data.push_back(static_cast<float>(i % 2));
  }
  xo::save_safetensors(file, {x, y});
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

// A safetensors file of tensors x and y is data as a CSV is (--data NAME.safetensors, or source =
// "safetensors:PATH"): the same numbers train to the same losses, bit for bit.
TEST_F(DataFlags, ASafetensorsFileOfXAndYTrainsAsTheSameCsvDoes) {
  write_points_tensors(dir_.path() / "points.safetensors", 60);
  write_points_tensors(dir_.path() / "test.safetensors", 20);
  const auto csv = run_cli(
      "train spec.toml --data points.csv --test-data test.csv --epochs 3 --threads 1 "
      "--json csv.json",
      dir_.path());
  ASSERT_EQ(csv.status, 0) << csv.output;
  const auto tensors = run_cli(
      "train spec.toml --data points.safetensors --test-data test.safetensors --epochs 3 "
      "--threads 1 --json tensors.json",
      dir_.path());
  ASSERT_EQ(tensors.status, 0) << tensors.output;
  EXPECT_NE(tensors.output.find("safetensors: points.safetensors (60 samples, 3 features)"),
            std::string::npos)
      << tensors.output;
  std::ifstream a(dir_.path() / "csv.json"), b(dir_.path() / "tensors.json");
  const auto from_csv = nlohmann::json::parse(a), from_tensors = nlohmann::json::parse(b);
  ASSERT_EQ(from_csv["epochs"].size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    for (const char* key : {"loss", "test_loss"}) {
      EXPECT_EQ(from_csv["epochs"][e][key].get<double>(),
                from_tensors["epochs"][e][key].get<double>())
          << key << " of epoch " << e + 1;
    }
  }
}

TEST_F(DataFlags, ATestFileThatIsNotACsvIsRefusedNamingTheFlag) {
  const auto r =
      run_cli("advise spec.toml --data points.csv --test-data fashion-mnist", dir_.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--test-data fashion-mnist: not a file of samples"), std::string::npos)
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

// `crossover predict`: a trained model's predictions for rows, as Keras's model.predict: a class
// and each class's probability per row, in the rows' order, for rows with or without their label;
// the classes it predicts are right as often as evaluate's accuracy says.
TEST_F(DataFlags, PredictGivesEachRowsClassAndProbabilities) {
  const auto trained = run_cli(
      "train spec.toml --data points.csv --epochs 5 --threads 1 --save w.safetensors", dir_.path());
  ASSERT_EQ(trained.status, 0) << trained.output;
  const auto evaluated = run_cli(
      "evaluate spec.toml --data points.csv --init w.safetensors --threads 1 --json eval.json",
      dir_.path());
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  // The same rows without their label column, with a header line.
  {
    std::ifstream in(dir_.path() / "points.csv");
    std::ofstream out(dir_.path() / "rows.csv");
    out << "a,b,c\n";
    for (std::string line; std::getline(in, line);) out << line.substr(0, line.rfind(',')) << "\n";
  }
  const auto labelled = run_cli(
      "predict spec.toml --data points.csv --init w.safetensors --threads 1 --out labelled.csv",
      dir_.path());
  ASSERT_EQ(labelled.status, 0) << labelled.output;
  EXPECT_NE(labelled.output.find("60 rows predicted"), std::string::npos) << labelled.output;
  EXPECT_NE(labelled.output.find("the label column left out"), std::string::npos)
      << labelled.output;
  // Without --out: the predictions on standard output, then (on standard error, which run_cli
  // joins to it) what they are.
  const auto unlabelled =
      run_cli("predict spec.toml --data rows.csv --init w.safetensors --threads 1", dir_.path());
  ASSERT_EQ(unlabelled.status, 0) << unlabelled.output;
  std::ifstream lf(dir_.path() / "labelled.csv");
  const std::string from_labelled{std::istreambuf_iterator<char>(lf), {}};
  EXPECT_EQ(unlabelled.output.substr(0, from_labelled.size()), from_labelled);
  EXPECT_NE(unlabelled.output.find("60 rows predicted", from_labelled.size()), std::string::npos)
      << unlabelled.output;
  EXPECT_NE(unlabelled.output.find("no label"), std::string::npos) << unlabelled.output;
  // Each line: the class, then p0 and p1 summing to 1, the class the likelier.
  std::istringstream lines(from_labelled);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "class,p0,p1");
  std::ifstream points(dir_.path() / "points.csv");
  int rows = 0, right = 0;
  for (std::string point; std::getline(lines, line) && std::getline(points, point); ++rows) {
    int cls = -1;
    double p0 = -1, p1 = -1;
    ASSERT_EQ(std::sscanf(line.c_str(), "%d,%lf,%lf", &cls, &p0, &p1), 3) << line;
    EXPECT_NEAR(p0 + p1, 1.0, 1e-6) << line;
    EXPECT_EQ(cls, p1 > p0 ? 1 : 0) << line;
    right += cls == std::stoi(point.substr(point.rfind(',') + 1));
  }
  EXPECT_EQ(rows, 60);
  std::ifstream e(dir_.path() / "eval.json");
  const auto eval = nlohmann::json::parse(e);
  EXPECT_NEAR(100.0 * right / 60, eval["splits"][0]["accuracy_percent"].get<double>(), 1e-9);
}

// On a GPU, the same predictions as on the CPU: the same classes, probabilities within 1e-5.
TEST_F(DataFlags, PredictOnTheGpuGivesTheCpusPredictions) {
  std::string why;
  if (!xo::testing::gpu_present(&why)) GTEST_SKIP() << "no GPU: " << why;
  const auto trained = run_cli(
      "train spec.toml --data points.csv --epochs 5 --threads 1 --save w.safetensors", dir_.path());
  ASSERT_EQ(trained.status, 0) << trained.output;
  for (const char* device : {"cpu", "cuda"}) {
    const auto r = run_cli(fmt::format("predict spec.toml --data points.csv --init w.safetensors "
                                       "--device {} --out {}.csv",
                                       device, device),
                           dir_.path());
    ASSERT_EQ(r.status, 0) << r.output;
  }
  std::ifstream cpu(dir_.path() / "cpu.csv"), gpu(dir_.path() / "cuda.csv");
  std::string a, b;
  int rows = 0;
  while (std::getline(cpu, a) && std::getline(gpu, b)) {
    if (rows++ == 0) {
      EXPECT_EQ(a, b);  // the header
      continue;
    }
    int ca = -1, cb = -1;
    double a0, a1, b0, b1;
    ASSERT_EQ(std::sscanf(a.c_str(), "%d,%lf,%lf", &ca, &a0, &a1), 3) << a;
    ASSERT_EQ(std::sscanf(b.c_str(), "%d,%lf,%lf", &cb, &b0, &b1), 3) << b;
    EXPECT_NEAR(a0, b0, 1e-5) << a << " vs " << b;
    EXPECT_NEAR(a1, b1, 1e-5) << a << " vs " << b;
    if (std::abs(a0 - a1) > 1e-4) {
      EXPECT_EQ(ca, cb) << a << " vs " << b;
    }
  }
  EXPECT_EQ(rows, 61);
}

TEST_F(DataFlags, PredictRefusesRowsOfAnotherWidthAndAModelWithoutWeights) {
  const auto trained = run_cli(
      "train spec.toml --data points.csv --epochs 1 --threads 1 --save w.safetensors", dir_.path());
  ASSERT_EQ(trained.status, 0) << trained.output;
  std::ofstream(dir_.path() / "wide.csv") << "1,2,3\n4,5,6,7,8\n";
  const auto ragged =
      run_cli("predict spec.toml --data wide.csv --init w.safetensors", dir_.path());
  EXPECT_EQ(ragged.status, 2) << ragged.output;
  EXPECT_NE(ragged.output.find("wide.csv:2: row has 5 columns, expected 3"), std::string::npos)
      << ragged.output;
  std::ofstream(dir_.path() / "two.csv") << "1,2\n";
  const auto narrow = run_cli("predict spec.toml --data two.csv --init w.safetensors", dir_.path());
  EXPECT_EQ(narrow.status, 2) << narrow.output;
  EXPECT_NE(narrow.output.find("two.csv:1: row has 2 columns, but the model expects 3 inputs"),
            std::string::npos)
      << narrow.output;
  const auto untrained = run_cli("predict spec.toml --data points.csv", dir_.path());
  EXPECT_EQ(untrained.status, 2) << untrained.output;
  EXPECT_NE(untrained.output.find("give --init FILE"), std::string::npos) << untrained.output;
  EXPECT_FALSE(fs::exists(dir_.path() / "out.csv"));
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

// The chart plots the GPU the verdict weighs, so that the two name one GPU. For models this small
// every GPU is slower than a CPU here and the verdict weighs the fastest (the L4, in the shipped
// catalog), while the chart plotted the GPU of the cheapest instance (the T4) before: the default
// job's verdict named an A10G under a chart of a T4.
TEST(FirstHour, TheChartPlotsTheGpuTheVerdictWeighs) {
  const xo::testing::TempDir dir("one-gpu");
  for (const std::string& job :
       {std::string("sweep --vary depth=2..4 --epochs 2 --steps 20 --devices cpu --threads 1 "
                    "--out sweep"),
        std::string("advise disc-4 --steps 20 --devices cpu --threads 1 --out advise")}) {
    const auto r = run_cli(job, dir.path());
    ASSERT_EQ(r.status, 0) << job << "\n" << r.output;
    const std::string out = job.substr(job.rfind(' ') + 1);
    std::ifstream f(dir.path() / out / "results.json");
    const auto doc = nlohmann::json::parse(f);
    ASSERT_TRUE(doc["verdict"].contains("gpu")) << doc["verdict"].dump();
    const std::string gpu = doc["verdict"]["gpu"]["device"];
    int predicted = 0;
    const std::string here = doc["runs"][0]["device"];  // advise's width chart predicts it too
    for (const auto& series : doc["sweep"]["series"]) {
      const std::string device = series["device"];
      if (!series["predicted"].get<bool>() || device.starts_with(here + " ")) continue;
      ++predicted;
      EXPECT_EQ(series["device"], gpu + " (predicted)") << job;
      // Why that GPU: the verdict's, or (where the verdict weighs it, as on a CPU slowed by the
      // sanitizers, which the T4 outruns) the cheapest instance's.
      const std::string why =
          gpu == "t4" ? "cheapest single-GPU instance" : "the GPU the verdict weighs";
      EXPECT_NE(series["note"].get<std::string>().find(why), std::string::npos) << series["note"];
    }
    EXPECT_EQ(predicted, 1) << doc["sweep"].dump();
  }
}

}  // namespace

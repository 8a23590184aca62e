// The crossover command as a user runs it: help, errors and exit codes, and the JSON/CSV it
// writes, checked by parsing them.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "support/cli.h"
#include "support/gpu.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace {

using Result = xo::testing::CliResult;
using xo::testing::gpu_present;

std::string cache_env() { return xo::testing::cli_cache_env(); }

// The command run in `cwd` (default: the tests' own).
Result run(const std::string& args, const std::filesystem::path& cwd = {}) {
  return xo::testing::run_cli(args, cwd);
}

// A double as the replay prints it: the shortest text that reads back the same.
std::string fmt_double(double v) { return fmt::format("{}", v); }

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(Cli, HelpEverywhere) {
  for (const std::string sub :
       {"", "run", "train", "models", "devices", "sweep", "advise", "cost", "replay"}) {
    const Result r = run(sub + " --help");
    EXPECT_EQ(r.status, 0) << sub << ": " << r.output;
    EXPECT_NE(r.output.find("Usage"), std::string::npos) << sub;
  }
  EXPECT_NE(run("train --help").output.find("--init"), std::string::npos);
  EXPECT_NE(run("").status, 0);  // a subcommand is required
}

TEST(Cli, TrainWritesTheDocumentedJson) {
  const xo::testing::TempDir dir_folder("cli_train");
  const auto& dir = dir_folder.path();
  const Result r = run("train disc-3 --epochs 3 --threads 1 --json " + (dir / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch 3/3"), std::string::npos) << r.output;
  const auto j = read_json(dir / "r.json");
  EXPECT_EQ(j["schema"], "crossover.train/2");
  EXPECT_EQ(j["model"], "disc-3");
  EXPECT_EQ(j["params"], 70);
  EXPECT_EQ(j["device"], "cpu");
  ASSERT_EQ(j["epochs"].size(), 3u);
  for (const char* key : {"epoch", "loss", "train_error_percent", "seconds"}) {
    EXPECT_TRUE(j["epochs"][0].contains(key)) << key;
  }
  EXPECT_EQ(j["epochs"][2]["epoch"], 3);
  EXPECT_EQ(j["final_loss"], j["epochs"][2]["loss"]);
  for (const char* key : {"final_train_error_percent", "median_step_ms", "gflops", "step_ms"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_GT(j["median_step_ms"].get<double>(), 0.0);
  EXPECT_EQ(j["device_info"]["threads"], 1);
  EXPECT_TRUE(j["machine"].contains("cpu"));
  EXPECT_TRUE(j["machine"].contains("compiler"));
}

// A schedule shows each epoch's rate on its line; early stopping says where it stopped and why, and
// both are in the JSON. min_delta 100 on the training loss: no epoch after the first improves.
TEST(Cli, TrainShowsTheScheduledRateAndWhereEarlyStoppingStopped) {
  const xo::testing::TempDir dir_folder("cli_schedule");
  const auto& dir = dir_folder.path();
  {
    std::ofstream spec(dir / "s.toml");
    spec << "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 4 }, { type = \"relu\" },"
            " { type = \"linear\", out = 2 } ]\nloss = \"cross_entropy\"\n"
            "[train]\noptimizer = { type = \"sgd\", lr = 0.1 }\nbatch = 50\nepochs = 10\n"
            "[train.schedule]\ntype = \"step\"\nstep_size = 1\ngamma = 0.5\n"
            "[train.early_stopping]\nmonitor = \"loss\"\npatience = 2\nmin_delta = 100\n"
            "restore_best = true\n"
            "[data]\nsource = \"disc\"\nsamples = 200\n";
  }
  const Result r = run("train " + (dir / "s.toml").string() + " --threads 1 --json " +
                       (dir / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("epoch  1/10  lr 0.1  loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("epoch  3/10  lr 0.025  loss"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("epoch  4/10"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopped early after epoch 3: loss did not improve by more than 100 for "
                          "2 epochs (best "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("at epoch 1; weights of epoch 1 restored)"), std::string::npos)
      << r.output;
  const auto j = read_json(dir / "r.json");
  ASSERT_EQ(j["epochs"].size(), 3u);
  EXPECT_EQ(j["epochs"][1]["lr"], 0.05);
  EXPECT_EQ(j["early_stopping"]["monitor"], "loss");
  EXPECT_EQ(j["early_stopping"]["stopped_early"], true);
  EXPECT_EQ(j["early_stopping"]["best_epoch"], 1);
  EXPECT_EQ(j["early_stopping"]["best_value"], j["epochs"][0]["loss"]);
  EXPECT_EQ(j["early_stopping"]["restored_best"], true);
}

TEST(Cli, WeightsRoundTripThroughSafetensors) {
  const xo::testing::TempDir dir_folder("cli_weights");
  const auto& dir = dir_folder.path();
  const std::string saved = (dir / "w.safetensors").string();
  ASSERT_EQ(run("train disc-4 --epochs 2 -q --save " + saved).status, 0);
  // Continuing from the saved weights for 0 extra epochs is impossible, so train one epoch from
  // them twice: identical results prove the weights were read back exactly.
  const Result a =
      run("train disc-4 --epochs 1 -q --init " + saved + " --json " + (dir / "a.json").string());
  const Result b =
      run("train disc-4 --epochs 1 -q --init " + saved + " --json " + (dir / "b.json").string());
  ASSERT_EQ(a.status, 0) << a.output;
  ASSERT_EQ(b.status, 0) << b.output;
  EXPECT_EQ(read_json(dir / "a.json")["final_loss"], read_json(dir / "b.json")["final_loss"]);
  // Weights for another model are refused, naming the tensor.
  const Result wrong = run("train disc-5 --epochs 1 -q --init " + saved);
  EXPECT_EQ(wrong.status, 2);
  EXPECT_NE(wrong.output.find("w.safetensors"), std::string::npos) << wrong.output;
  EXPECT_NE(wrong.output.find("6.weight"), std::string::npos) << wrong.output;
}

TEST(Cli, BadInputGivesAClearErrorAndExitCode2) {
  const xo::testing::TempDir dir_folder("cli_errors");
  const auto& dir = dir_folder.path();
  std::ofstream(dir / "bad.toml") << "[model]\ninput = [2]\nlayers = [ { type = \"conv\" } ]\n"
                                     "loss = \"cross_entropy\"\n";
  Result r = run("train " + (dir / "bad.toml").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("bad.toml:3: model.layers[0].type: unknown layer type 'conv'"),
            std::string::npos)
      << r.output;
  std::ofstream(dir / "ragged.csv") << "1,2,0\n1,0\n";
  r = run("train disc-3 --data " + (dir / "ragged.csv").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("ragged.csv:2:"), std::string::npos) << r.output;
  r = run("train disc-3 --device tpu");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("expected cpu, cpu:bf16, cuda, cuda:N or auto"), std::string::npos)
      << r.output;
  if (!gpu_present()) {  // the machine says why there is no GPU, whichever build this is
    r = run("train disc-3 --device cuda");
    EXPECT_EQ(r.status, 2);
    EXPECT_TRUE(r.output.find("built without CUDA") != std::string::npos ||
                r.output.find("no NVIDIA GPU") != std::string::npos)
        << r.output;
  }
  r = run("train disc-3 --precision fp8");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--precision 'fp8': expected f32, tf32 or bf16"), std::string::npos)
      << r.output;
  r = run("train disc-3 --epochs 1 --precision tf32 --device cpu");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("the CPU computes in f32"), std::string::npos) << r.output;
  r = run("train disc-3 --epochs -3");
  EXPECT_NE(r.status, 0);
}

// A batch larger than the data is said, not silently shrunk.
TEST(Cli, ABatchLargerThanTheDataIsSaid) {
  const xo::testing::TempDir dir("cli_batch");
  std::ofstream(dir / "three.csv") << "0.1,0.2,0\n0.3,0.1,1\n0.5,0.5,1\n";
  const Result r = run("train disc-2 --epochs 1 --batch 64 --checkpoint-every off --data " +
                       (dir / "three.csv").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("note: batch 64 is larger than the 3 training samples: every step takes "
                          "all 3 (one step per epoch)"),
            std::string::npos)
      << r.output;
}

// A usage error (a missing argument or subcommand, an unknown flag, a flag's bad value) is an
// error like any other: the prefix, exit code 2, and where the usage is.
TEST(Cli, UsageErrorsHaveThePrefixAndExitCode2) {
  struct Case {
    const char* args;
    const char* says;
    const char* usage;
  };
  for (const Case& c :
       {Case{"", "A subcommand is required", "`crossover --help`"},
        Case{"train", "spec is required", "`crossover train --help`"},
        Case{"train disc-2 --epochs x", "--epochs: expected a positive number",
             "`crossover train --help`"},
        Case{"sweep disc-2 --no-such-flag", "no-such-flag", "`crossover sweep --help`"},
        Case{"nosuch", "unknown command 'nosuch' (expected one of run, train",
             "`crossover --help`"}}) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.output;
    EXPECT_EQ(r.output.rfind("crossover: error: ", 0), 0u) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.usage), std::string::npos) << c.args << ": " << r.output;
  }
  EXPECT_EQ(run("--version").status, 0);
}

TEST(Cli, AModelTooBigForTheMachineStopsAtOnceWithTheFigures) {
  const xo::testing::TempDir dir_folder("cli_memory");
  const auto spec = dir_folder / "wide.toml";
  // 1,000,000 x 1,000,000 weights: terabytes, beyond any machine this runs on.
  std::ofstream(spec) << "[model]\nname = \"wide\"\ninput = [2]\nlayers = [\n"
                         "  { type = \"linear\", out = 1000000 }, { type = \"relu\" },\n"
                         "  { type = \"linear\", out = 1000000 }, { type = \"relu\" },\n"
                         "  { type = \"linear\", out = 2 },\n]\nloss = \"cross_entropy\"\n";
  const auto start = std::chrono::steady_clock::now();
  const Result r = run("train " + spec.string());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_LT(seconds, 5.0) << r.output;  // refused before anything is allocated
  EXPECT_NE(r.output.find("crossover: error: model 'wide' on cpu needs at least "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("parameters and gradients "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" are free"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

TEST(Cli, RunWritesTheSweepTableJsonAndCsv) {
  const xo::testing::TempDir dir_folder("cli_run");
  const auto& dir = dir_folder.path();
  const Result r = run("run --models disc-2,disc-3 --epochs 2 --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("s/100 epochs"), std::string::npos) << r.output;
  const auto j = read_json(dir / "results.json");
  EXPECT_EQ(j["schema"], "crossover.report/2");
  EXPECT_EQ(j["kind"], "run");
  EXPECT_TRUE(j["complete"].get<bool>());
  EXPECT_TRUE(j["machine"].contains("cpu"));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["model"], "disc-3");
  EXPECT_EQ(j["runs"][1]["layers"], 3);
  EXPECT_EQ(j["runs"][1]["epochs"], 2);
  // The CPU's measured peak and each model's achieved fraction of it.
  ASSERT_EQ(j["peaks"].size(), 1u);
  const double peak = j["peaks"][0]["matmul_gflops"].get<double>();
  EXPECT_GT(peak, 1.0);
  EXPECT_NEAR(j["runs"][1]["peak_fraction"].get<double>(),
              j["runs"][1]["gflops"].get<double>() / peak, 1e-9);
  // The phase split and the per-layer profile: disc-3 has three Linear nodes.
  EXPECT_GT(j["runs"][1]["phases_ms"]["forward"].get<double>(), 0);
  ASSERT_EQ(j["runs"][1]["layers_profile"].size(), 3u);
  EXPECT_EQ(j["runs"][1]["layers_profile"][0]["name"], "0 linear+relu");
  // Utilisation was sampled; no NVML here, so the GPU columns are null.
  EXPECT_TRUE(j["runs"][1]["utilisation"]["gpu_percent"].is_null());
  EXPECT_GT(j["runs"][1]["peak_rss_mib"].get<double>(), 1.0);
  // The sweep along depth with a predicted GPU series, and the advice.
  EXPECT_EQ(j["sweep"]["axis"], "depth");
  EXPECT_GE(j["sweep"]["series"].size(), 1u);
  EXPECT_FALSE(j["advice"].empty());
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  std::ifstream csv(dir / "results.csv");
  std::string header, row;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("model,layers,params,device,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(csv, row)) ++rows;
  EXPECT_EQ(rows, 2);
}

TEST(Cli, InterruptKeepsPartialResults) {
  const xo::testing::TempDir dir_folder("cli_interrupt");
  const auto& dir = dir_folder.path();
  // disc-12 trains for 100 epochs in ~25 s: SIGINT a second after the report of disc-2 was
  // written (the job's last work before disc-12 starts) lands in disc-12 however loaded the
  // machine is (a fixed 3 s from the start once landed in disc-2 while a build shared the cores;
  // a second after disc-2's line, in the report's writing under the sanitizers on a busy machine).
  ASSERT_EQ(run("devices").status, 0);  // the peaks probed and cached before the job starts
  const std::filesystem::path log = dir / "run.log";
  const pid_t pid = xo::testing::start_crossover(
      dir, {"run", "--models", "disc-2,disc-12", "--out", dir.string()}, log, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto log_text = [&] {
    std::ostringstream text;
    text << std::ifstream(log).rdbuf();
    return text.str();
  };
  auto disc2_written = [&] {
    std::error_code ec;
    if (!std::filesystem::exists(dir / "results.json", ec)) return false;
    const auto runs = read_json(dir / "results.json")["runs"];  // written whole (a rename)
    return std::any_of(runs.begin(), runs.end(),
                       [](const auto& r) { return r["model"] == "disc-2"; });
  };
  while (!disc2_written() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 130) << log_text();
  const auto j = read_json(dir / "results.json");
  EXPECT_FALSE(j["complete"].get<bool>());
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["model"], "disc-2");
  EXPECT_TRUE(j["runs"][1]["interrupted"].get<bool>());
}

TEST(Cli, DivergenceIsReported) {
  const xo::testing::TempDir dir_folder("cli_diverge");
  const auto& dir = dir_folder.path();
  const Result r = run("train disc-6 --epochs 3 --lr 1e6 -q --on-nan continue --json " +
                       (dir / "r.json").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("diverged at epoch"), std::string::npos) << r.output;
  EXPECT_GE(read_json(dir / "r.json")["diverged_epoch"].get<int>(), 1);
}

TEST(Cli, TestSplitIsEvaluatedAndSyntheticDataSaysSo) {
  const xo::testing::TempDir dir_folder("cli_test_split");
  const auto& dir = dir_folder.path();
  std::ofstream(dir / "tiny-lstm.toml")
      << "[model]\ninput = [12]\nlayers = [ { type = \"embedding\", vocab = 50, out = 8 },\n"
         "  { type = \"lstm\", out = 8 }, { type = \"dropout\", p = 0.2 },\n"
         "  { type = \"linear\", out = 1 } ]\nloss = \"bce\"\n[train]\n"
         "optimizer = { type = \"adam\", lr = 0.01 }\nbatch = 16\nepochs = 2\nshuffle = true\n"
         "[data]\nsource = \"imdb-synthetic\"\nsamples = 64\ntest_samples = 40\n";
  const Result r =
      run("train " + (dir / "tiny-lstm.toml").string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("test accuracy"), std::string::npos) << r.output;
  const auto j = read_json(dir / "r.json");
  EXPECT_EQ(j["test_samples"], 40);
  EXPECT_NE(j["data"].get<std::string>().find("imdb-synthetic (generated, not real reviews)"),
            std::string::npos);
  ASSERT_EQ(j["epochs"].size(), 2u);
  const double accuracy = j["final_test_accuracy_percent"].get<double>();
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 100.0);
  EXPECT_EQ(j["epochs"][1]["test_accuracy_percent"].get<double>(), accuracy);
  // No test split: null, not a made-up number.
  const Result d = run("train disc-2 --epochs 1 -q --json " + (dir / "d.json").string());
  ASSERT_EQ(d.status, 0) << d.output;
  EXPECT_TRUE(read_json(dir / "d.json")["final_test_accuracy_percent"].is_null());
}

// A user's CSV with a test CSV beside it and a fifth of the training rows held out to validate:
// every epoch says both, the result keeps both, and the rows held out are not trained on.
TEST(Cli, TrainValidatesOnAHeldOutSplitAndTestsOnATestCsv) {
  const xo::testing::TempDir dir_folder("cli_validation");
  const auto& dir = dir_folder.path();
  {
    std::ofstream train(dir / "train.csv"), test(dir / "test.csv");
    train << "x,y,label\n";
    for (int i = 0; i < 50; ++i) train << i % 7 << "," << i % 5 << "," << (i % 7 > 3) << "\n";
    test << "x,y,label\n1,2,0\n6,1,1\n5,0,1\n";
  }
  std::ofstream(dir / "mine.toml")
      << "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 8 }, { type = \"relu\" },\n"
         "  { type = \"linear\", out = 2 } ]\nloss = \"cross_entropy\"\n[train]\nbatch = 8\n"
         "epochs = 2\n[data]\nsource = \"csv:train.csv\"\ntest = \"csv:test.csv\"\n"
         "validation_split = 0.2\n";
  const Result r =
      run("train " + (dir / "mine.toml").string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* text :
       {"validation: the last 10 samples of", "training on the first 40",
        "test: csv:", "(3 samples)", "val loss", "val accuracy", "validation accuracy"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  const auto j = read_json(dir / "r.json");
  EXPECT_EQ(j["samples"], 40);
  EXPECT_EQ(j["steps_per_epoch"], 5);
  EXPECT_EQ(j["validation_samples"], 10);
  EXPECT_EQ(j["test_samples"], 3);
  for (const char* key : {"val_loss", "val_accuracy_percent", "test_loss", "test_accuracy_percent"})
    EXPECT_TRUE(j["epochs"][1][key].is_number()) << key;
  EXPECT_EQ(j["final_val_accuracy_percent"], j["epochs"][1]["val_accuracy_percent"]);
}

// Regression on a CSV with mean squared error: a loss and nothing that was not measured (no train
// error, no accuracy), and a classification source refused for it.
TEST(Cli, TrainRegressesARealTargetWithMse) {
  const xo::testing::TempDir dir_folder("cli_mse");
  const auto& dir = dir_folder.path();
  {
    std::ofstream csv(dir / "houses.csv");
    csv << "rooms,age,price\n";
    for (int i = 0; i < 60; ++i) csv << i % 6 << "," << i % 9 << "," << 0.5 * (i % 6) + 0.1 << "\n";
  }
  const std::string spec =
      "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 8 }, { type = \"relu\" },\n"
      "  { type = \"linear\", out = 1 } ]\nloss = \"mse\"\n[train]\nbatch = 16\nepochs = 3\n"
      "optimizer = { type = \"adam\", lr = 0.01 }\n[data]\n";
  std::ofstream(dir / "mse.toml") << spec
                                  << "source = \"csv:houses.csv\"\nvalidation_split = 0.25\n";
  const Result r =
      run("train " + (dir / "mse.toml").string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("accuracy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("val loss"), std::string::npos) << r.output;
  const auto j = read_json(dir / "r.json");
  EXPECT_TRUE(j["final_loss"].is_number());
  EXPECT_TRUE(j["final_train_error_percent"].is_null());
  EXPECT_TRUE(j["majority_class_error_percent"].is_null());
  EXPECT_TRUE(j["epochs"][2]["val_loss"].is_number());
  EXPECT_TRUE(j["epochs"][2]["val_accuracy_percent"].is_null());
  std::ofstream(dir / "disc.toml") << spec << "source = \"disc\"\n";
  const Result d = run("train " + (dir / "disc.toml").string());
  EXPECT_EQ(d.status, 2) << d.output;
  EXPECT_NE(d.output.find("loss \"mse\" regresses a real-valued target, which only a file of "
                          "samples brings"),
            std::string::npos)
      << d.output;
}

TEST(Cli, SuiteIsCheckedAndClassicModelsAreListed) {
  const Result r = run("run --suite everything");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--suite"), std::string::npos) << r.output;
  const Result m = run("models");
  for (const char* name : {"mnist-mlp", "669706", "mnist-cnn", "1199882", "imdb-lstm"}) {
    EXPECT_NE(m.output.find(name), std::string::npos) << name;
  }
}

TEST(Cli, ModelsAndDevicesList) {
  const Result m = run("models");
  EXPECT_EQ(m.status, 0);
  EXPECT_NE(m.output.find("disc-12"), std::string::npos);
  EXPECT_NE(m.output.find("11201190"), std::string::npos);
  const Result d = run("devices");
  EXPECT_EQ(d.status, 0);
  EXPECT_NE(d.output.find("cpu:"), std::string::npos) << d.output;
  if (!gpu_present()) {
    EXPECT_NE(d.output.find("not available: cuda: "), std::string::npos) << d.output;
  } else {
    EXPECT_NE(d.output.find("cuda:0:"), std::string::npos) << d.output;
    EXPECT_NE(d.output.find("cuDNN"), std::string::npos) << d.output;
  }
}

TEST(Cli, SweepAlongBatchFindsEveryPointAndWritesTheReport) {
  const xo::testing::TempDir dir_folder("cli_sweep");
  const auto& dir = dir_folder.path();
  const Result r = run("sweep disc-5 --vary batch=10,50,250 --epochs 2 --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = read_json(dir / "results.json");
  EXPECT_EQ(j["kind"], "sweep");
  EXPECT_EQ(j["sweep"]["axis"], "batch");
  EXPECT_EQ(j["sweep"]["x"], "axis_value");  // the parameters do not change with the batch
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][2]["model"], "disc-5[batch=250]");
  EXPECT_EQ(j["runs"][2]["batch"], 250);
  EXPECT_EQ(j["runs"][2]["steps_per_epoch"], 4);
  const auto& cpu = j["sweep"]["series"][0];
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_EQ(cpu["points"].size(), 3u);
  EXPECT_TRUE(std::filesystem::exists(dir / "report.html"));
  EXPECT_TRUE(std::filesystem::exists(dir / "results.csv"));
}

TEST(Cli, SweepErrorsNameWhatWasExpected) {
  Result r = run("sweep mnist-mlp");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--vary"), std::string::npos) << r.output;
  r = run("sweep disc-4 --vary colour=1,2");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("unknown key 'colour' (expected an axis: depth, width, batch"),
            std::string::npos)
      << r.output;
  r = run("sweep disc-4 --vary batch=10,-3");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("--vary batch=-3: batch takes a positive integer"), std::string::npos)
      << r.output;
  r = run("sweep disc-4 --vary sequence=10");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("cannot vary sequence"), std::string::npos) << r.output;
}

TEST(Cli, AdviseMeasuresPredictsCostsAndRecommends) {
  const xo::testing::TempDir dir_folder("cli_advise");
  const auto& dir = dir_folder.path();
  const Result r = run("advise disc-9 --steps 30 --verbose --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* text :
       {"Fastest here: cpu", "Cheapest cloud run", "(this machine)", "break-even", "predicted"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  const auto j = read_json(dir / "results.json");
  EXPECT_EQ(j["kind"], "advise");
  // The local CPU is both measured and predicted, with the error written down.
  bool local = false;
  for (const auto& p : j["predictions"]) {
    if (p["local"].get<bool>()) {
      local = true;
      EXPECT_TRUE(p["measured_step_ms"].is_number());
      EXPECT_TRUE(p["error_percent"].is_number());
    }
    EXPECT_FALSE(p["assumptions"].empty());
  }
  EXPECT_TRUE(local);
  EXPECT_GE(j["cost"]["instances"].size(), 10u);
  EXPECT_EQ(j["cost"]["steps_per_epoch"], 10);
  EXPECT_EQ(j["sweep"]["axis"], "width");
  // The CPU at bf16, measured beside, is a curve of the width sweep too: the crossover is found at
  // bf16 as well.
  std::vector<std::string> curves;
  for (const auto& c : j["sweep"]["series"]) curves.push_back(c["device"].get<std::string>());
  EXPECT_EQ(std::count(curves.begin(), curves.end(), "cpu:bf16 (predicted)"),
            xo::cpu_bf16_unit().empty() ? 0 : 1)
      << j["sweep"].dump();
  // The verdict comes first, in the terminal, the JSON and the page, with one run time: the
  // local run time in the cost table.
  const size_t verdict = r.output.find("Verdict for 100 epochs of disc-9: A GPU is ");
  ASSERT_NE(verdict, std::string::npos) << r.output;
  EXPECT_LT(verdict, r.output.find("Predicted step times")) << r.output;
  const auto& v = j["verdict"];
  // The fastest here: the CPU, or where it has AMX or AVX-512 BF16 the CPU at bf16 too (disc-9's
  // 256-wide layers run in bf16 there), measured beside it.
  const bool bf16_here = !xo::cpu_bf16_unit().empty();
  if (bf16_here) {
    EXPECT_TRUE(v["here"] == "cpu" || v["here"] == "cpu:bf16") << v;
    EXPECT_NE(r.output.find("disc-9 on cpu:bf16: "), std::string::npos) << r.output;
  } else {
    EXPECT_EQ(v["here"], "cpu");
  }
  EXPECT_EQ(j["cost"]["local"].size(), bf16_here ? 2u : 1u);
  EXPECT_EQ(v["gpu"]["how"], "rent");  // no GPU here: the GPU is weighed on a rented instance
  // Predicted from a shipped GPU profile, scaled to the GPU's datasheet: an estimate, no longer a
  // roofline lower bound. The cheapest rented GPU is no Hopper, and no GPU of another
  // architecture than the shipped profiles' (Hopper) has been measured: not validated, its error
  // at least that of one Hopper predicted from the other's profile, and said so.
  EXPECT_FALSE(v["gpu"]["lower_bound"].get<bool>());
  EXPECT_NE(v["sentence"].get<std::string>().find(
                "(predicted, not validated, expected error at least: median "),
            std::string::npos)
      << v;
  bool hopper = false;
  for (const auto& p : j["predictions"]) {
    // The CPU at bf16 takes only a profile timed at bf16 (one ships, of a Zen 4 EPYC): elsewhere
    // it is its own probe's roofline.
    if (p["device"] != "cpu:bf16") {
      EXPECT_FALSE(p["profile"].get<std::string>().empty()) << p;
    }
    if (p["local"].get<bool>()) continue;
    EXPECT_TRUE(p["expected_error"].is_number()) << p;
    const std::string device = p["device"].get<std::string>();
    if (device == "h100-sxm" || device == "h200-sxm") {
      // The parts the profiles were measured on: their own held-out rows, validated.
      hopper = true;
      EXPECT_FALSE(p["expected_error_at_least"].get<bool>()) << p;
      EXPECT_EQ(p["expected_error_kind"], "this device, a model it did not measure") << p;
    } else if (device == "t4" || device == "a10g" || device == "l4") {
      EXPECT_TRUE(p["expected_error_at_least"].get<bool>()) << p;
    }
  }
  EXPECT_TRUE(hopper);
  ASSERT_FALSE(j["validation"].empty());
  for (const char* text : {"expected error", "Expected error: predictions against measurements"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text;
  }
  for (const auto& entry : j["cost"]["local"]) {
    if (entry["device"] != v["here"]) continue;
    EXPECT_DOUBLE_EQ(v["here_seconds"].get<double>(), entry["run_hours"].get<double>() * 3600);
  }
  // Along width, predicted: one device faster throughout, or where one overtakes the other
  // (which one depends on this machine's speed).
  const std::string crossover = v["crossover"].get<std::string>();
  EXPECT_TRUE(crossover.find("is faster over the whole range of width") != std::string::npos ||
              crossover.rfind("Crossover (predicted): ", 0) == 0)
      << crossover;
  std::ostringstream page_text;
  page_text << std::ifstream(dir / "report.html").rdbuf();
  const std::string page = page_text.str();
  EXPECT_LT(page.find("id=\"verdict\""), page.find("id=\"advice\"")) << "the verdict first";
  EXPECT_NE(page.find("<table class=\"validation\""), std::string::npos) << "the validation table";
}

// The answer in one screen: without --verbose, advise prints its measurement, the verdict, the
// advice and where the report is, within 40 lines of 120 columns (it printed 137 lines up to 500
// characters wide); for a model this small no multi-GPU instance, scaling out or buying is
// advised, and the fastest device named is faster than here or said to be none.
TEST(Cli, AdvisesInOneScreenAndNamesNoMultiGpuInstanceForATinyModel) {
  const xo::testing::TempDir dir_folder("cli_advise_short");
  const Result r = run("advise disc-2 --steps 20 --out " + dir_folder.path().string());
  ASSERT_EQ(r.status, 0) << r.output;
  size_t lines = 0, widest = 0;
  std::istringstream rows(r.output);
  for (std::string row; std::getline(rows, row);) {
    ++lines;
    widest = std::max(widest, row.size());
  }
  EXPECT_LE(lines, 40u) << r.output;
  EXPECT_LE(widest, 120u) << r.output;
  for (const char* text : {"Verdict for 100 epochs of disc-2: A GPU is ",
                           "Advice for disc-2:", "Fastest here: cpu", "report: ", "--verbose"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  for (const char* text : {"Scaling out", "Across instances", "Buying the", "p5.48xlarge",
                           "Predicted step times", "break-even"}) {
    EXPECT_EQ(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  // No instance of 8 GPUs ("8x h100"); a measured ratio ("1.8x faster") is not one.
  EXPECT_FALSE(std::regex_search(r.output, std::regex("(^|[^0-9.])8x "))) << r.output;
  const auto j = read_json(dir_folder.path() / "results.json");
  const std::string gpu = j["verdict"]["gpu"]["name"];
  EXPECT_EQ(gpu.find("8x"), std::string::npos) << gpu;
}

// advise --trials K: the model alone and fused groups of 1, 4 and K on the CPU, the catalog's
// devices predicted for K fused trials, the verdict for K trials saying what it is for one, the
// page's chart in trial-epochs per second.
TEST(Cli, AdviseTrialsJudgesASweepOfKTrialsAndOneAlone) {
  const xo::testing::TempDir dir_folder("cli_advise_trials");
  const auto& dir = dir_folder.path();
  const Result r =
      run("advise disc-3 --trials 6 --steps 20 --devices cpu --verbose --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* text :
       {"disc-3 x1 fused on cpu", "disc-3 x4 fused on cpu", "disc-3 x6 fused on cpu",
        "Verdict for 6 trials of 100 epochs each, fused", "For one trial alone: A GPU is ",
        "Predicted step times (disc-3 x6)"}) {
    EXPECT_NE(r.output.find(text), std::string::npos) << text << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("Scaling out"), std::string::npos) << "no data-parallel split of trials";
  const auto j = read_json(dir / "results.json");
  const auto& v = j["verdict"];
  EXPECT_EQ(v["trials"], 6);
  EXPECT_EQ(v["model"], "disc-3 x6");
  EXPECT_NE(v["single_trial"].get<std::string>().find("A GPU is "), std::string::npos) << v;
  // The K trials' predictions: each from a profile, marked as fused trials, none validated.
  bool local = false;
  for (const auto& p : j["predictions"]) {
    EXPECT_EQ(p["model"], "disc-3 x6") << p;
    bool fused = false;
    for (const auto& a : p["assumptions"])
      fused |= a.get<std::string>().find("6 trials fused in ") != std::string::npos;
    EXPECT_TRUE(fused) << p;
    if (p["local"].get<bool>()) {
      local = true;
      EXPECT_TRUE(p["measured_step_ms"].is_number()) << p;
    }
  }
  EXPECT_TRUE(local);
  // The runs: the model alone, then the groups along "trials", each with the group's work.
  std::vector<double> counts;
  double alone_flops = 0, group_flops = 0;
  for (const auto& run : j["runs"]) {
    const std::string model = run["model"];
    if (model == "disc-3") alone_flops = run["flops_per_step"];
    if (!run["axis"].is_object() || run["axis"]["name"] != "trials") continue;
    counts.push_back(run["axis"]["value"]);
    EXPECT_EQ(run["fused_trials"], run["axis"]["value"]) << model;
    if (model == "disc-3 x6") group_flops = run["flops_per_step"];
  }
  EXPECT_EQ(counts, (std::vector<double>{1, 4, 6}));
  EXPECT_NEAR(group_flops, 6 * alone_flops, 1e-9 * group_flops);
  EXPECT_EQ(j["sweep"]["axis"], "trials");
  std::ostringstream page;
  page << std::ifstream(dir / "report.html").rdbuf();
  EXPECT_NE(page.str().find("trial-epochs per second against trials"), std::string::npos);
  EXPECT_NE(page.str().find("For one trial alone:"), std::string::npos);
  // `cost` of that results file costs the group of six again as six fused trials.
  const Result cost = run("cost " + (dir / "results.json").string());
  ASSERT_EQ(cost.status, 0) << cost.output;
  EXPECT_NE(cost.output.find("Verdict for 6 trials of 100 epochs each, fused (disc-3 x6)"),
            std::string::npos)
      << cost.output;
  // sweep --trials: every point K trials fused, the verdict for K trials.
  const Result sweep =
      run("sweep disc-3 --vary width=8,16 --trials 3 --steps 10 --devices cpu "
          "--out " +
          (dir / "sweep").string());
  ASSERT_EQ(sweep.status, 0) << sweep.output;
  EXPECT_NE(sweep.output.find("disc-3[width=16] x3 fused on cpu"), std::string::npos)
      << sweep.output;
  EXPECT_EQ(read_json(dir / "sweep" / "results.json")["verdict"]["trials"], 3);
  // What cannot be: one trial is not a sweep; fused trials do not run across ranks.
  EXPECT_EQ(run("advise disc-3 --trials 1").status, 2);
  const Result ranks = run("sweep disc-3 --vary ranks=1,2 --trials 4");
  EXPECT_EQ(ranks.status, 2);
  EXPECT_NE(ranks.output.find("fused trials train in one process"), std::string::npos)
      << ranks.output;
}

TEST(Cli, CostRecostsAResultsFileWithOverriddenPrices) {
  const xo::testing::TempDir dir_folder("cli_cost");
  const auto& dir = dir_folder.path();
  ASSERT_EQ(run("run --models disc-6 --epochs 2 --out " + dir.string()).status, 0);
  const Result base = run("cost " + (dir / "results.json").string());
  ASSERT_EQ(base.status, 0) << base.output;
  EXPECT_NE(base.output.find("g4dn.xlarge"), std::string::npos) << base.output;
  // Doubling an instance's price doubles its cost per run (the run time is the same).
  const auto cost_of = [](const std::string& out, const std::string& name) {
    const auto at = out.find(name);
    EXPECT_NE(at, std::string::npos) << out;
    return out.substr(at, out.find('\n', at) - at);
  };
  const Result doubled =
      run("cost " + (dir / "results.json").string() + " --price aws-g4dn.xlarge=1000");
  ASSERT_EQ(doubled.status, 0) << doubled.output;
  EXPECT_NE(cost_of(doubled.output, "g4dn.xlarge").find("1000.000"), std::string::npos)
      << cost_of(doubled.output, "g4dn.xlarge");
  Result bad = run("cost " + (dir / "results.json").string() + " --price nosuch=3");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("nosuch"), std::string::npos) << bad.output;
  bad = run("cost " + (dir / "results.json").string() + " --utilisation 1.5");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("--utilisation"), std::string::npos) << bad.output;
  // A results file with a field cut out: the error names the file, the run and the field.
  auto cut = read_json(dir / "results.json");
  cut["runs"][0].erase("median_step_ms");
  std::ofstream(dir / "cut.json") << cut.dump();
  bad = run("cost " + (dir / "cut.json").string());
  EXPECT_EQ(bad.status, 2) << bad.output;
  for (const char* piece : {"cut.json", "run 'disc-6'", "median_step_ms"}) {
    EXPECT_NE(bad.output.find(piece), std::string::npos) << piece << " not in: " << bad.output;
  }
  std::ofstream(dir / "other.json") << "{\"schema\": \"something/1\"}";
  bad = run("cost " + (dir / "other.json").string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("not a crossover results.json"), std::string::npos) << bad.output;
}

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The line of `out` that starts with `start` (after the table's padding), or "".
std::string line_starting(const std::string& out, const std::string& start) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(start, 0) == 0) return line;
  }
  return "";
}

// One short recorded job for the replay tests: disc-2 on the CPU, one thread, two epochs.
void record_disc2(const std::filesystem::path& dir) {
  const Result r =
      run("run --models disc-2 --devices cpu --epochs 2 --threads 1 --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.output;
}

TEST(Cli, ReplayOfAFinishedRunIsBitIdentical) {
  const xo::testing::TempDir dir_folder("cli_replay");
  const auto& dir = dir_folder.path();
  record_disc2(dir);
  const auto recorded = read_json(dir / "results.json");
  // The manifest: the build, the command line and the settings.
  const auto& manifest = recorded["manifest"];
  EXPECT_EQ(manifest["crossover"], CROSSOVER_VERSION);
  EXPECT_FALSE(manifest["commit"].get<std::string>().empty());
  EXPECT_NE(manifest["command_line"].get<std::string>().find("run --models disc-2 --devices cpu"),
            std::string::npos);
  EXPECT_EQ(manifest["settings"]["threads"], 1);
  EXPECT_EQ(manifest["settings"]["epochs"], 2);
  EXPECT_TRUE(manifest["libraries"]["oneDNN"].is_string());
  EXPECT_EQ(recorded["runs"][0]["params_hash"].get<std::string>().size(), 16u);
  const std::string before = file_text(dir / "results.json");

  const Result r = run("replay " + (dir / "results.json").string());
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* piece :
       {"disc-2 on cpu: bit-identical", "the same build, libraries and machine",
        "tolerance: relative 1e-05", "1 run replayed: 1 bit-identical, 0 within tolerance"}) {
    EXPECT_NE(r.output.find(piece), std::string::npos) << piece << " not in: " << r.output;
  }
  EXPECT_NE(line_starting(r.output, "final parameters").find("bit-identical"), std::string::npos)
      << r.output;
  EXPECT_NE(line_starting(r.output, "loss").find("bit-identical"), std::string::npos) << r.output;
  EXPECT_NE(line_starting(r.output, "data").find("same"), std::string::npos) << r.output;
  // The replay wrote its own results beside the original, which it left alone.
  EXPECT_EQ(file_text(dir / "results.json"), before);
  const auto replayed = read_json(dir / "replay" / "results.json");
  EXPECT_EQ(replayed["kind"], "replay");
  EXPECT_EQ(replayed["runs"][0]["params_hash"], recorded["runs"][0]["params_hash"]);
  EXPECT_EQ(replayed["manifest"]["settings"], recorded["manifest"]["settings"]);
  // A second replay goes to a fresh folder, here named from the folder the results are in.
  const Result again = run("replay results.json", dir);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "replay-2" / "results.json"));
}

TEST(Cli, ReplayReportsAFigureThatDiffersAndTheManifestEntriesThatDiffer) {
  const xo::testing::TempDir dir_folder("cli_replay_edit");
  const auto& dir = dir_folder.path();
  record_disc2(dir);
  auto edited = read_json(dir / "results.json");
  const double loss = edited["runs"][0]["epoch_log"][1]["loss"].get<double>();
  edited["runs"][0]["epoch_log"][1]["loss"] = loss * 1.5;
  edited["manifest"]["crossover"] = "0.0.9";
  std::ofstream(dir / "edited.json") << edited.dump();
  const Result r =
      run("replay " + (dir / "edited.json").string() + " --out " + (dir / "out").string());
  EXPECT_EQ(r.status, 5) << r.output;
  const std::string row = line_starting(r.output, "loss");
  for (const std::string& piece : {std::string("different"), fmt_double(loss * 1.5),
                                   fmt_double(loss), std::string("epoch 2")}) {
    EXPECT_NE(row.find(piece), std::string::npos) << piece << " not in: " << row << "\n"
                                                  << r.output;
  }
  EXPECT_NE(line_starting(r.output, "final parameters").find("bit-identical"), std::string::npos)
      << r.output;
  const std::string version = line_starting(r.output, "crossover ");
  EXPECT_NE(version.find("0.0.9"), std::string::npos) << r.output;
  EXPECT_NE(version.find(CROSSOVER_VERSION), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("disc-2 on cpu: different"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 bit-identical, 0 within tolerance (relative 1e-05), 1 different"),
            std::string::npos)
      << r.output;
  // --tolerance large enough takes the edited loss in.
  const Result loose = run("replay " + (dir / "edited.json").string() + " --tolerance 0.5 --out " +
                           (dir / "loose").string());
  EXPECT_EQ(loose.status, 0) << loose.output;
  EXPECT_NE(line_starting(loose.output, "loss").find("within tolerance"), std::string::npos)
      << loose.output;
}

TEST(Cli, ReplaySkipsADeviceThatIsNotHereAndRefusesWhatItCannotReplay) {
  const xo::testing::TempDir dir_folder("cli_replay_errors");
  const auto& dir = dir_folder.path();
  record_disc2(dir);
  const std::string results = (dir / "results.json").string();
  // A run recorded on a GPU this machine does not have is skipped, saying why; the others run.
  auto two = read_json(dir / "results.json");
  auto gpu_run = two["runs"][0];
  gpu_run["device"] = "cuda:7";
  gpu_run["device_info"]["kind"] = "gpu";
  two["runs"].push_back(gpu_run);
  std::ofstream(dir / "two.json") << two.dump();
  Result r = run("replay " + (dir / "two.json").string() + " --out " + (dir / "two").string());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("disc-2 on cuda:7: skipped: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 bit-identical, 0 within tolerance (relative 1e-05), 0 different; 1 "
                          "skipped"),
            std::string::npos)
      << r.output;
  // Only that run: nothing to replay here.
  r = run("replay " + (dir / "two.json").string() + " --devices cuda:7 --out " +
          (dir / "gpu").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("none of its runs can be replayed here"), std::string::npos) << r.output;
  r = run("replay " + results + " --devices cuda:0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--devices cuda:0"), std::string::npos) << r.output;
  // Never over the results it replays.
  r = run("replay " + results + " --out " + dir.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("would overwrite"), std::string::npos) << r.output;
  r = run("replay " + results + " --tolerance -1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("--tolerance"), std::string::npos) << r.output;
  // Not a results document: the error names the file.
  std::ofstream(dir / "other.json") << "{\"schema\": \"something/1\"}";
  std::ofstream(dir / "text.json") << "hello";
  for (const char* name : {"other.json", "text.json"}) {
    r = run("replay " + (dir / name).string());
    EXPECT_EQ(r.status, 2) << r.output;
    for (const char* piece : {name, "not a crossover results.json"}) {
      EXPECT_NE(r.output.find(piece), std::string::npos) << piece << " not in: " << r.output;
    }
  }
  r = run("replay " + (dir / "missing.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("missing.json"), std::string::npos) << r.output;
  // Written before the manifest: cost still reads it, replay says what it lacks.
  auto old = read_json(dir / "results.json");
  old.erase("manifest");
  old["runs"][0].erase("data_hash");
  old["runs"][0].erase("params_hash");
  std::ofstream(dir / "cut.json") << old.dump();
  old["machine"]["crossover"] = "0.1.0";
  std::ofstream(dir / "old.json") << old.dump();
  EXPECT_EQ(run("cost " + (dir / "old.json").string()).status, 0);
  r = run("replay " + (dir / "old.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  for (const char* piece :
       {"old.json", "no manifest", "written by crossover 0.1.0, before 0.1.1", "cannot replay"}) {
    EXPECT_NE(r.output.find(piece), std::string::npos) << piece << " not in: " << r.output;
  }
  // The manifest taken out of a file this version wrote: named plainly (it once said "written by
  // crossover 0.2.0, before 0.1.1").
  r = run("replay " + (dir / "cut.json").string());
  EXPECT_EQ(r.status, 2) << r.output;
  for (const char* piece : {"cut.json: its manifest is missing, though crossover", "edited"}) {
    EXPECT_NE(r.output.find(piece), std::string::npos) << piece << " not in: " << r.output;
  }
  EXPECT_EQ(r.output.find("before 0.1.1"), std::string::npos) << r.output;
  // The exit codes are documented.
  EXPECT_NE(run("replay --help").output.find("Exit codes: 0"), std::string::npos);
}

// A manifest or run edited to make replay misbehave: settings out of range, more epochs than the
// run recorded, a source that is not the recorded data. Each is refused with exit 2 and the field
// named, before any training; none leaves a replay folder behind. (Before: epochs -3 or a source
// of csv:/etc/passwd replayed "0 runs" with exit 0; epochs 1e12 trained 9.8 million steps.)
TEST(Cli, ReplayRefusesAManifestItCannotTrust) {
  const xo::testing::TempDir dir_folder("cli_replay_hostile");
  const auto& dir = dir_folder.path();
  record_disc2(dir);
  const auto recorded = read_json(dir / "results.json");
  struct Hostile {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    std::vector<std::string> named;
  };
  const std::string spec = recorded["runs"][0]["spec_toml"].get<std::string>();
  const auto with_epochs = [&](const char* epochs) {
    std::string s = spec;
    const size_t at = s.find("epochs = 2");
    s.replace(at, 10, std::string("epochs = ") + epochs);
    return s;
  };
  const Hostile hostile[] = {
      {"epochs -3",
       [](nlohmann::json& j) { j["manifest"]["settings"]["epochs"] = -3; },
       {"manifest.settings: epochs: expected an integer from 1 to 1000000000, found a number "
        "(-3)"}},
      {"epochs 1e12",
       [](nlohmann::json& j) { j["manifest"]["settings"]["epochs"] = int64_t{1'000'000'000'000}; },
       {"settings: epochs: expected an integer from 1 to 1000000000"}},
      {"epochs 9, beyond the run",
       [](nlohmann::json& j) { j["manifest"]["settings"]["epochs"] = 9; },
       {"runs[0] ('disc-2' on cpu): manifest.settings.epochs says 9 epochs, but the run "
        "recorded 2"}},
      {"the spec's epochs beyond the run",
       [&](nlohmann::json& j) {
         j["manifest"]["settings"]["epochs"] = nullptr;
         j["runs"][0]["spec_toml"] = with_epochs("900000");
       },
       {"its spec_toml's train.epochs says 900000 epochs, but the run recorded 2"}},
      {"threads 10^6",
       [](nlohmann::json& j) { j["manifest"]["settings"]["threads"] = 1000000; },
       {"settings: threads: expected an integer from 0 to 4096"}},
      {"max_steps -1",
       [](nlohmann::json& j) { j["manifest"]["settings"]["max_steps"] = -1; },
       {"settings: max_steps:"}},
      {"precision f64",
       [](nlohmann::json& j) { j["manifest"]["settings"]["precision"] = "f64"; },
       {"settings: precision: expected f32, tf32 or bf16"}},
      {"the data a file of the system",
       [&](nlohmann::json& j) {
         std::string s = spec;
         const size_t at = s.find("source = ");
         s.replace(at, s.find('\n', at) - at, "source = \"csv:/etc/passwd\"");
         j["runs"][0]["spec_toml"] = s;
       },
       {"no run could be replayed here (1 skipped"}},
  };
  for (const Hostile& h : hostile) {
    nlohmann::json j = recorded;
    h.edit(j);
    std::ofstream(dir / "hostile.json", std::ios::trunc) << j.dump();
    const Result r = run("replay " + (dir / "hostile.json").string());
    EXPECT_EQ(r.status, 2) << h.what << ": " << r.output;
    for (const std::string& piece : h.named) {
      EXPECT_NE(r.output.find(piece), std::string::npos)
          << h.what << ": " << piece << " not in: " << r.output;
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "replay")) << h.what << ": a folder left behind";
  }
  // The steps a run recorded bound its replay: the same run, bit-identical (recorded steps_taken
  // reached exactly where the run ended).
  const Result honest = run("replay " + (dir / "results.json").string());
  EXPECT_EQ(honest.status, 0) << honest.output;
  // Its outputs in a folder of links planted to files elsewhere: replaced, the files untouched.
  std::filesystem::create_directories(dir / "planted");
  for (const char* name : {"results.json", "results.csv", "report.html"}) {
    std::filesystem::copy_file(dir / name, dir / (std::string("precious-") + name));
    std::filesystem::create_symlink(dir / (std::string("precious-") + name),
                                    dir / "planted" / name);
  }
  const Result planted = run("replay " + (dir / "results.json").string() + " --out " +
                             (dir / "planted").string() + " --overwrite");
  EXPECT_EQ(planted.status, 0) << planted.output;
  for (const char* name : {"results.json", "results.csv", "report.html"}) {
    EXPECT_EQ(file_text(dir / (std::string("precious-") + name)), file_text(dir / name)) << name;
    EXPECT_TRUE(
        std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "planted" / name)))
        << name;
  }
}

TEST(Cli, ProgressBarOnATerminalOnly) {
  const xo::testing::TempDir dir_folder("cli_progress");
  const auto& dir = dir_folder.path();
  // Through a pipe: no bar, no carriage returns.
  const Result piped = run("run --models disc-2 --epochs 30 --out " + dir.string());
  ASSERT_EQ(piped.status, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos);
  // On a terminal (util-linux's `script` gives the command one): the bar with model, device,
  // epoch and the time left.
  const std::string cmd = "script -qec \"" + cache_env() + std::string(CROSSOVER_BINARY) +
                          " run --models disc-3 --epochs 30 --overwrite --out " + dir.string() +
                          "\" /dev/null 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  ASSERT_EQ(WEXITSTATUS(status), 0) << out;
  for (const char* piece : {"\r[", "disc-3 on cpu: epoch", "/30", "left"}) {
    EXPECT_NE(out.find(piece), std::string::npos) << piece << " not in: " << out;
  }
}

}  // namespace

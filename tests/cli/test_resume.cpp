// Runs that are never lost, as a user meets them: `crossover train` killed with SIGKILL at several
// points (inside epochs, at their ends, while a checkpoint is written) and resumed with --resume
// ends with a weights file byte-identical to the run never stopped; a `run` or `sweep` job killed
// inside its second model keeps the first and resumes the second; an unfinished run's checkpoint
// is not overwritten unless asked; a diverging run stops with exit code 4.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "core/random.h"
#include "support/cli.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using Result = xo::testing::CliResult;
using xo::testing::catches;

Result run(const fs::path& dir, const std::string& args) { return xo::testing::run_cli(args, dir); }

// `ready()`, or `ready(pid)` where it takes the process's pid.
template <typename Ready>
bool ready_for(Ready& ready, pid_t pid) {
  if constexpr (std::is_invocable_v<Ready&, pid_t>) {
    return ready(pid);
  } else {
    return ready();
  }
}

// Starts crossover with `args` in `dir` and sends it `sig` (SIGKILL by default) once `ready()`
// (or `ready(pid)`) holds (polled every 200 µs); true when the signal ended it (SIGKILL) or it
// stopped as asked (exit code 130 after SIGINT or SIGTERM), false when it ended first.
template <typename Ready>
bool run_and_kill(const fs::path& dir, const std::vector<std::string>& args, Ready&& ready,
                  int sig = SIGKILL) {
  const pid_t pid = xo::testing::start_crossover(dir, args, "/dev/null", "/dev/null");
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    // A signal that crossover handles is sent only once its handler is in place (on a loaded
    // machine, starting the process can take longer than the wait the caller asked for).
    if ((sig == SIGKILL || catches(pid, sig)) && ready_for(ready, pid)) {
      kill(pid, sig);
      waitpid(pid, &status, 0);
      if (sig == SIGKILL) return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      return WIFEXITED(status) && WEXITSTATUS(status) == 130;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  ADD_FAILURE() << "crossover did not reach the kill point in 120 s";
  return false;
}

std::vector<std::string> split(const std::string& args) {
  std::istringstream in(args);
  std::vector<std::string> out;
  for (std::string a; in >> a;) out.push_back(a);
  return out;
}

bool temporary_present(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().string().find(".tmp") != std::string::npos) return true;
  }
  return false;
}

// Small images as a CSV: 64 pixels and a label in [0, 3).
void write_images(const fs::path& file) {
  xo::Rng rng(11);
  std::ofstream out(file);
  for (int i = 0; i < 160; ++i) {
    for (int p = 0; p < 64; ++p) out << rng.uniform(-1, 1) << ",";
    out << rng.below(3) << "\n";
  }
}

struct TrainCase {
  const char* name;
  const char* spec;
  const char* precision = "f32";  // bf16: run only on a CPU with AMX or AVX-512 BF16
};

const char* const kCnnSpec = R"([model]
input = [1, 8, 8]
layers = [ { type = "conv2d", out = 4, kernel = 3 }, { type = "batchnorm2d" }, { type = "relu" },
           { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.3 },
           { type = "flatten" }, { type = "linear", out = 3 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adadelta", lr = 1.0, rho = 0.95, eps = 1e-7 }
batch = 24
epochs = 12
shuffle = true
[data]
source = "csv:images.csv"
)";
const char* const kLstmSpec = R"([model]
input = [10]
layers = [ { type = "embedding", vocab = 40, out = 8 }, { type = "lstm", out = 8 },
           { type = "linear", out = 1 } ]
loss = "bce"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 16
epochs = 10
shuffle = true
[data]
source = "imdb-synthetic"
samples = 120
test_samples = 40
)";

const TrainCase kTrainCases[] = {
    {"mlp", R"([model]
input = [2]
layers = [ { type = "linear", out = 16 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1, momentum = 0.9, nesterov = true }
batch = 64
epochs = 20
shuffle = true
[data]
source = "disc"
samples = 600
test_samples = 200
)"},
    {"cnn", kCnnSpec},
    {"lstm", kLstmSpec},
    // At --precision bf16: the convolution, the Linear (36 inputs: not a small layer) and the
    // LSTM's products read bf16 copies of their operands.
    {"cnn_bf16", kCnnSpec, "bf16"},
    {"lstm_bf16", kLstmSpec, "bf16"},
};

void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.name; }

class KilledTraining : public ::testing::TestWithParam<TrainCase> {};

// Killed three times (after a few checkpoints, at a later one, and as soon as a checkpoint's
// temporary file shows: during its write), resumed each time, and run to the end.
TEST_P(KilledTraining, ResumedRunSavesByteIdenticalWeights) {
  const TrainCase& c = GetParam();
  if (std::string(c.precision) == "bf16" && xo::cpu_bf16_unit().empty()) {
    GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16: --precision bf16 cannot run";
  }
  const xo::testing::TempDir folder(std::string("kill-") + c.name);
  const fs::path dir = folder.path();
  write_images(dir / "images.csv");
  std::ofstream(dir / "spec.toml") << c.spec;
  const std::string common =
      std::string("train spec.toml --threads 1 --shards 2 -q --precision ") + c.precision + " ";
  const Result whole = run(dir, common + "--checkpoint-every off --save whole.safetensors");
  ASSERT_EQ(whole.status, 0) << whole.output;

  const std::string resumable =
      common + "--checkpoint-every 1steps --checkpoint-dir ck --save resumed.safetensors";
  const fs::path ck = dir / "ck";
  int kills = 0;
  auto at_least = [&](int64_t steps) {
    return [&, steps] {
      const auto newest = xo::newest_checkpoint(ck);
      return newest && *newest >= steps;
    };
  };
  kills += run_and_kill(dir, split(resumable), at_least(7));
  kills += run_and_kill(dir, split(resumable + " --resume"), at_least(40));
  const bool last_killed =
      run_and_kill(dir, split(resumable + " --resume"), [&] { return temporary_present(ck); });
  kills += last_killed;
  EXPECT_GE(kills, 2) << "the runs ended before they could be killed: make them longer";
  if (last_killed) {  // else that run went to the end (the write was never caught under way)
    const Result resumed = run(dir, resumable + " --resume");
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming"), std::string::npos) << resumed.output;
    EXPECT_NE(resumed.output.find("(resumed from its checkpoint at step"), std::string::npos)
        << resumed.output;
  }
  EXPECT_EQ(xo::read_file(dir / "whole.safetensors"), xo::read_file(dir / "resumed.safetensors"))
      << c.name << ": the resumed run's weights differ from the run never stopped";
  EXPECT_FALSE(fs::exists(ck)) << "a finished run leaves no checkpoint";
}

INSTANTIATE_TEST_SUITE_P(Cli, KilledTraining, ::testing::ValuesIn(kTrainCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// SIGTERM (what clouds and Slurm send before preemption) saves the state at the next step
// boundary, with the default interval far away.
TEST(CliResume, SigtermSavesACheckpointAndTheResumedRunIsIdentical) {
  const xo::testing::TempDir folder("sigterm");
  const fs::path dir = folder.path();
  // 28,000 steps, about 0.5 s of training in the Release build here (longer under the
  // sanitizers). SIGTERM comes once the run has used a quarter of the CPU time the run never
  // stopped took: the same share of its work on any machine, however fast or loaded.
  std::ofstream(dir / "spec.toml") << R"([model]
input = [2]
layers = [ { type = "linear", out = 256 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1, momentum = 0.9 }
batch = 64
epochs = 300
shuffle = true
[data]
source = "disc"
samples = 6000
)";
  const std::string common = "train spec.toml --threads 1 -q ";
  const double before = xo::testing::children_cpu_seconds();
  ASSERT_EQ(run(dir, common + "--checkpoint-every off --save whole.safetensors").status, 0);
  const double whole_cpu = xo::testing::children_cpu_seconds() - before;
  const std::string args = common + "--checkpoint-dir ck --save resumed.safetensors";
  // Stopped once it has trained a while: the log of its epochs is not written, so wait for its
  // CPU time (a process that has not started yet has none).
  ASSERT_TRUE(run_and_kill(
      dir, split(args), [&](pid_t pid) { return xo::testing::cpu_seconds(pid) >= whole_cpu / 4; },
      SIGTERM))
      << "the run ended before SIGTERM, sent after " << whole_cpu / 4 << " CPU seconds";
  const auto saved = xo::newest_checkpoint(dir / "ck");
  ASSERT_TRUE(saved) << "SIGTERM saved no checkpoint";
  const Result resumed = run(dir, args + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_EQ(xo::read_file(dir / "whole.safetensors"), xo::read_file(dir / "resumed.safetensors"));
}

TEST(CliResume, UnfinishedCheckpointIsNeitherOverwrittenNorIgnored) {
  const xo::testing::TempDir folder("refuse");
  const fs::path dir = folder.path();
  std::ofstream(dir / "spec.toml") << kTrainCases[0].spec;
  const std::string args =
      "train spec.toml --threads 1 -q --checkpoint-every 1steps --checkpoint-dir ck";
  ASSERT_TRUE(run_and_kill(dir, split(args), [&] {
    const auto n = xo::newest_checkpoint(dir / "ck");
    return n && *n >= 3;
  }));
  const Result refused = run(dir, args);
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("holds the checkpoint of an unfinished run"), std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("--resume continues it"), std::string::npos);
  const Result other = run(dir, args + " --resume --lr 0.05");
  EXPECT_EQ(other.status, 2) << other.output;
  EXPECT_NE(other.output.find("the spec differs"), std::string::npos) << other.output;
  const Result restarted = run(dir, args + " --restart");
  EXPECT_EQ(restarted.status, 0) << restarted.output;
  EXPECT_NE(restarted.output.find("discarded the checkpoint"), std::string::npos);
}

// A measuring job of two models: its command, and how its models are named.
struct Job {
  const char* name;
  const char* command;
  const char* first;   // the first model, as the progress lines name it
  const char* second;  // the second model's name, which starts its checkpoint folder's
};

const Job kJobs[] = {
    {"run", "run --models disc-2,disc-4", "disc-2", "disc-4"},
    {"sweep", "sweep disc-3 --vary width=8,48", "disc-3[width=8]", "disc-3[width=48]"},
};

void PrintTo(const Job& j, std::ostream* os) { *os << j.name; }

class KilledJob : public ::testing::TestWithParam<Job> {};

TEST_P(KilledJob, KilledInsideItsSecondModelKeepsTheFirstAndResumesTheSecond) {
  const Job& j = GetParam();
  const xo::testing::TempDir folder("job");
  const fs::path dir = folder.path();
  const std::string job =
      std::string(j.command) + " --devices cpu --threads 1 --epochs 25 --checkpoint-every 1steps";
  const Result whole = run(dir, job + " --out whole");
  ASSERT_EQ(whole.status, 0) << whole.output;
  // Killed once the first model is in results.json and the second has a checkpoint past its
  // 60th step.
  const bool killed = run_and_kill(dir, split(job + " --out cut"), [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "cut" / "checkpoints", ec)) {
      if (e.path().filename().string().rfind(std::string(j.second) + "-", 0) != 0) continue;
      const auto n = xo::newest_checkpoint(e.path());
      if (n && *n >= 60) return true;
    }
    return false;
  });
  ASSERT_TRUE(killed);
  const auto partial = nlohmann::json::parse(xo::read_file(dir / "cut" / "results.json"));
  EXPECT_FALSE(partial["complete"].get<bool>());
  std::string two_threads = job + " --out cut";
  two_threads.replace(two_threads.find("--threads 1"), 11, "--threads 2");
  const Result other = run(dir, two_threads);
  EXPECT_EQ(other.status, 2) << other.output;
  EXPECT_NE(other.output.find("--threads 1 then, 2 now"), std::string::npos) << other.output;
  const Result resumed = run(dir, job + " --out cut");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find(std::string(j.first) + " on cpu: kept from the earlier"),
            std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find(std::string("resuming ") + j.second), std::string::npos)
      << resumed.output;
  EXPECT_NE(resumed.output.find(std::string("note: ") + j.second +
                                " on cpu resumed from its checkpoint at step"),
            std::string::npos)
      << resumed.output;
  const auto a = nlohmann::json::parse(xo::read_file(dir / "whole" / "results.json"));
  const auto b = nlohmann::json::parse(xo::read_file(dir / "cut" / "results.json"));
  EXPECT_TRUE(b["complete"].get<bool>());
  ASSERT_EQ(a["runs"].size(), b["runs"].size());
  for (size_t i = 0; i < a["runs"].size(); ++i) {
    const auto &x = a["runs"][i], &y = b["runs"][i];
    EXPECT_EQ(x["model"], y["model"]);
    ASSERT_EQ(x["epoch_log"].size(), y["epoch_log"].size());
    for (size_t e = 0; e < x["epoch_log"].size(); ++e) {
      EXPECT_EQ(x["epoch_log"][e]["loss"], y["epoch_log"][e]["loss"])
          << x["model"] << " epoch " << e;
      EXPECT_EQ(x["epoch_log"][e]["train_error_percent"], y["epoch_log"][e]["train_error_percent"]);
    }
  }
  EXPECT_FALSE(fs::exists(dir / "cut" / "checkpoints")) << "a finished job leaves none";
}

INSTANTIATE_TEST_SUITE_P(Cli, KilledJob, ::testing::ValuesIn(kJobs),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST(CliResume, DivergingRunStopsWithExitCode4) {
  const xo::testing::TempDir folder("nan");
  const Result r = run(folder.path(), "train disc-6 --epochs 3 --lr 1e6 -q --save w.safetensors");
  EXPECT_EQ(r.status, 4) << r.output;
  EXPECT_NE(r.output.find("--save w.safetensors: not written, the parameters are not finite"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(folder.path() / "w.safetensors"));
  EXPECT_NE(r.output.find("stopped: the loss became NaN or infinite at epoch 1, step"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("the last finite loss was"), std::string::npos) << r.output;
  const Result on = run(folder.path(), "train disc-6 --epochs 3 --lr 1e6 -q --on-nan continue");
  EXPECT_EQ(on.status, 0) << on.output;
  EXPECT_NE(on.output.find("diverged at epoch"), std::string::npos) << on.output;
}

}  // namespace

// `mpirun -np N crossover train` as a user runs it: N ranks train the same model as one process
// with the same global batch — the same loss every epoch and the same parameters at the end, to
// float rounding (the gradients are summed in another order) — for an MLP under SGD with momentum,
// a CNN with dropout and the LSTM under Adam, on uneven splits (a rank without rows of the partial
// batch included); a rank that fails ends the job with its message; ranks that train different
// things are refused; only rank 0 prints and writes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "support/cli.h"
#include "support/gpu.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using xo::testing::run_cli;

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

// A CSV of `rows` samples of `features` values in [0, 1) and labels below `classes`, seeded.
void write_csv(const fs::path& path, int rows, int features, int classes, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> value(0.0f, 1.0f);
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    for (int f = 0; f < features; ++f) out << value(gen) << ',';
    out << static_cast<int>(gen() % static_cast<unsigned>(classes)) << '\n';
  }
}

struct Case {
  std::string name;
  std::string spec;  // TOML; {dir} is the test's folder
  int ranks;
  // The largest relative difference measured between the ranks' run and one process (see
  // docs/benchmarks.md), with headroom: float sums in another order, over a few epochs.
  double tolerance;
  std::string flags = "";      // for the ranks' run
  std::string device = "cpu";  // both runs' --device
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// 1001 samples in batches of 100: a partial batch of 1, so every rank but rank 0 has none of it.
const char* const kMlp = R"(
[model]
input = [2]
layers = [ { type = "linear", out = 32 }, { type = "tanh" }, { type = "linear", out = 32 },
           { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.1, momentum = 0.9 }
batch = 100
epochs = 4
shuffle = true
[data]
source = "disc"
samples = 1001
)";

// 203 images of 1x6x6 in batches of 40 (a partial batch of 3), dropout twice, a test CSV evaluated
// in slices.
const char* const kCnn = R"(
[model]
input = [1, 6, 6]
layers = [ { type = "conv2d", out = 4, kernel = 3 }, { type = "relu" },
           { type = "maxpool2d", kernel = 2 }, { type = "dropout", p = 0.25 },
           { type = "flatten" }, { type = "linear", out = 16 }, { type = "relu" },
           { type = "dropout", p = 0.5 }, { type = "linear", out = 5 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 40
epochs = 3
shuffle = true
[data]
source = "csv:{dir}/images.csv"
test = "csv:{dir}/test.csv"
)";

const char* const kLstm = R"(
[model]
input = [12]
layers = [ { type = "embedding", vocab = 300, out = 8 }, { type = "lstm", out = 8 },
           { type = "linear", out = 1 } ]
loss = "bce"
[train]
optimizer = { type = "adam", lr = 0.01 }
batch = 32
epochs = 3
shuffle = true
[data]
source = "imdb-synthetic"
samples = 150
test_samples = 37
)";

// A spec with its optimizer line replaced: each model under the other optimizer too.
std::string with_optimizer(std::string spec, const std::string& optimizer) {
  const size_t at = spec.find("optimizer = ");
  spec.replace(at, spec.find('\n', at) - at, "optimizer = " + optimizer);
  return spec;
}
const std::string kSgdMomentum = R"({ type = "sgd", lr = 0.1, momentum = 0.9 })";
const std::string kAdam = R"({ type = "adam", lr = 0.01 })";
const std::string kRmsprop = R"({ type = "rmsprop", lr = 0.01 })";
const std::string kAdadelta = R"({ type = "adadelta", lr = 1.0 })";

class DataParallelTrain : public ::testing::TestWithParam<Case> {};

std::string replace_dir(std::string text, const fs::path& dir) {
  const std::string key = "{dir}";
  for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), dir);
  return text;
}

double relative(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-6});
}

TEST_P(DataParallelTrain, RanksTakeTheStepsOneProcessTakes) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  const Case& c = GetParam();
  std::string why;
  if (c.device == "cpu:bf16" && xo::cpu_bf16_unit().empty()) {
    GTEST_SKIP() << "this CPU has neither AMX nor AVX-512 BF16 (as oneDNN sees it): no cpu:bf16";
  }
  if (c.device.starts_with("cuda") && !xo::testing::gpu_present(&why)) {
    GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  }
  xo::testing::TempDir dir("dp-" + c.name);
  write_csv(dir.path() / "images.csv", 203, 36, 5, 1);
  write_csv(dir.path() / "test.csv", 31, 36, 5, 2);
  std::ofstream(dir.path() / "spec.toml") << replace_dir(c.spec, dir.path());
  const std::string args = " train spec.toml --checkpoint-every off --device " + c.device;
  const auto one = run_cli(args + " --save one.safetensors --json one.json", dir.path());
  ASSERT_EQ(one.status, 0) << one.output;
  const auto many = run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np " +
                                std::to_string(c.ranks) + " " + CROSSOVER_BINARY + args +
                                " --save many.safetensors --json many.json " + c.flags,
                            dir.path());
  if (many.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << many.output;
  ASSERT_EQ(many.status, 0) << many.output;

  const json a = json::parse(xo::read_file(dir.path() / "one.json"));
  const json b = json::parse(xo::read_file(dir.path() / "many.json"));
  EXPECT_EQ(b.at("ranks"), c.ranks);
  EXPECT_EQ(a.at("ranks"), 1);
  EXPECT_GT(b.at("data_parallel").at("reduced_bytes_per_step").get<int64_t>(), 0);
  // The ranks of one machine share their buffers unless told otherwise; GPU ranks stage theirs
  // through the host.
  const std::string automatic = c.device.starts_with("cpu") ? "shared" : "host-staged";
  EXPECT_EQ(b.at("data_parallel").at("reduce").get<std::string>(),
            c.flags.empty() ? automatic : c.flags.substr(c.flags.rfind(' ') + 1));
  // The scale-out model's check where the communicate phase is MPI's all-reduce, staged through
  // the host or not: the ring over the measured link, host-staged plus the copies to the host and
  // back, measured on the rank's device.
  const json& dp = b.at("data_parallel");
  const std::string mode = dp.at("reduce").get<std::string>();
  if (mode == "after-backward" || mode == "host-staged") {
    ASSERT_TRUE(dp.at("predicted_communicate_ms").is_number()) << dp.dump();
    EXPECT_GT(dp.at("predicted_communicate_ms").get<double>(), 0);
  }
  if (mode == "host-staged") {
    ASSERT_TRUE(dp.at("staging_ms").is_number()) << dp.dump();
    EXPECT_GT(dp.at("staging_ms").get<double>(), 0);
    EXPECT_GT(dp.at("predicted_communicate_ms").get<double>(), dp.at("staging_ms").get<double>());
  } else {
    EXPECT_TRUE(dp.at("staging_ms").is_null()) << dp.dump();
  }
  // Only NCCL's sum is queued on the GPU: only then is the ranks' step one recorded CUDA Graph.
  if (c.device.starts_with("cuda")) {
    EXPECT_EQ(b.value("recorded_step", false), c.flags.find("nccl") != std::string::npos);
  }
  ASSERT_EQ(a.at("epochs").size(), b.at("epochs").size());
  double worst = 0;
  for (size_t e = 0; e < a.at("epochs").size(); ++e) {
    for (const char* key : {"loss", "test_loss"}) {
      const json& ea = a.at("epochs")[e];
      const json& eb = b.at("epochs")[e];
      ASSERT_EQ(ea.contains(key), eb.contains(key)) << key;
      if (!ea.contains(key) || ea.at(key).is_null()) continue;
      const json& x = ea.at(key);
      const json& y = eb.at(key);
      const double d = relative(x.get<double>(), y.get<double>());
      worst = std::max(worst, d);
      EXPECT_LE(d, c.tolerance) << key << " of epoch " << e + 1 << ": " << x << " vs " << y;
    }
  }
  const auto pa = xo::load_safetensors(dir.path() / "one.safetensors");
  const auto pb = xo::load_safetensors(dir.path() / "many.safetensors");
  ASSERT_EQ(pa.size(), pb.size());
  double param_worst = 0;
  for (size_t t = 0; t < pa.size(); ++t) {
    ASSERT_EQ(pa[t].name, pb[t].name);
    ASSERT_EQ(pa[t].data.size(), pb[t].data.size());
    double scale = 1e-3;  // absolute below this
    for (const float v : pa[t].data) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < pa[t].data.size(); ++i) {
      param_worst = std::max(param_worst, std::abs(pa[t].data[i] - pb[t].data[i]) / scale);
    }
  }
  EXPECT_LE(param_worst, c.tolerance) << "parameters";
  std::printf(
      "%s: worst relative difference: losses %.3g, parameters %.3g (of each tensor's "
      "largest)\n",
      c.name.c_str(), worst, param_worst);
  // Rank 0 alone reports.
  size_t summaries = 0;
  for (size_t at = 0; (at = many.output.find(" ms/step (median", at)) != std::string::npos; ++at)
    ++summaries;
  EXPECT_EQ(summaries, 1u) << many.output;
}

INSTANTIATE_TEST_SUITE_P(
    Mpi, DataParallelTrain,
    ::testing::Values(
        Case{"mlp_2_ranks", kMlp, 2, 1e-5}, Case{"mlp_3_ranks", kMlp, 3, 1e-5},
        Case{"cnn_dropout_2_ranks", kCnn, 2, 1e-5}, Case{"cnn_dropout_3_ranks", kCnn, 3, 1e-5},
        Case{"lstm_2_ranks", kLstm, 2, 1e-5}, Case{"lstm_3_ranks", kLstm, 3, 1e-5},
        // Each model under the other optimizer.
        Case{"mlp_adam_3_ranks", with_optimizer(kMlp, kAdam), 3, 1e-5},
        Case{"cnn_dropout_sgd_momentum_2_ranks", with_optimizer(kCnn, kSgdMomentum), 2, 1e-5},
        Case{"lstm_sgd_momentum_2_ranks", with_optimizer(kLstm, kSgdMomentum), 2, 1e-5},
        Case{"mlp_rmsprop_3_ranks", with_optimizer(kMlp, kRmsprop), 3, 1e-5},
        Case{"mlp_adadelta_2_ranks", with_optimizer(kMlp, kAdadelta), 2, 1e-5},
        // MPI's all-reduce of buckets once backward is done, and while it runs.
        Case{"mlp_3_ranks_after_backward", kMlp, 3, 1e-5, "--reduce after-backward"},
        Case{"lstm_2_ranks_after_backward", kLstm, 2, 1e-5, "--reduce after-backward"},
        Case{"mlp_2_ranks_overlap", kMlp, 2, 1e-5, "--reduce overlap"},
        Case{"cnn_dropout_3_ranks_overlap", kCnn, 3, 1e-5, "--reduce overlap"},
        // The GPU ranks' path on the CPU: the gradients copied to host memory, summed by MPI and
        // copied back (here the copies are memcpy).
        Case{"mlp_2_ranks_host_staged", kMlp, 2, 1e-5, "--reduce host-staged"},
        Case{"cnn_dropout_3_ranks_host_staged", kCnn, 3, 1e-5, "--reduce host-staged"},
        Case{"lstm_2_ranks_host_staged", kLstm, 2, 1e-5, "--reduce host-staged"}),
    [](const auto& param_info) { return param_info.param.name; });

// At bf16 on the CPU: the ranks share the parameters' bf16 copy their optimizers keep, each
// writing its part of it, and read it whole in the next step's products (the MLP's layers are wide
// enough for bf16 products; the small ones stay f32). Rounding a weight to bf16 can go the other
// way after float sums in another order, hence the wider tolerance (measured 2026-12-04: at most
// 2.7e-5 of a tensor's largest parameter, on the LSTM over 3 ranks).
const std::string kWideMlp = [] {
  std::string spec = kMlp;
  for (size_t at; (at = spec.find("out = 32")) != std::string::npos;)
    spec.replace(at, 8, "out = 48");
  return spec;
}();
INSTANTIATE_TEST_SUITE_P(CpuBf16, DataParallelTrain,
                         ::testing::Values(Case{"mlp_2_ranks", kWideMlp, 2, 1e-4, "", "cpu:bf16"},
                                           Case{"mlp_adam_3_ranks", with_optimizer(kWideMlp, kAdam),
                                                3, 1e-4, "", "cpu:bf16"},
                                           Case{"cnn_dropout_2_ranks", kCnn, 2, 1e-4, "",
                                                "cpu:bf16"},
                                           Case{"lstm_3_ranks", kLstm, 3, 1e-4, "", "cpu:bf16"},
                                           Case{"mlp_2_ranks_overlap", kWideMlp, 2, 1e-4,
                                                "--reduce overlap", "cpu:bf16"}),
                         [](const auto& param_info) { return param_info.param.name; });

// Ranks on GPUs (several sharing one where the machine has fewer GPUs than ranks): host-staged by
// default, the same steps as one process on the GPU.
INSTANTIATE_TEST_SUITE_P(GpuHostStaged, DataParallelTrain,
                         ::testing::Values(Case{"mlp_2_ranks", kMlp, 2, 1e-5, "", "cuda"},
                                           Case{"cnn_dropout_3_ranks", kCnn, 3, 1e-5, "", "cuda"},
                                           Case{"lstm_adam_2_ranks", kLstm, 2, 1e-5,
                                                "--reduce host-staged", "cuda"}),
                         [](const auto& param_info) { return param_info.param.name; });

// NCCL's all-reduce inside the recorded step: one rank (all a one-GPU machine allows) takes the
// steps of the single process on the GPU. More ranks need a GPU each (not at hand to test).
INSTANTIATE_TEST_SUITE_P(
    GpuNccl, DataParallelTrain,
    ::testing::Values(Case{"mlp_1_rank", kMlp, 1, 1e-6, "--reduce nccl", "cuda"},
                      Case{"cnn_dropout_1_rank", kCnn, 1, 1e-6, "--reduce nccl", "cuda"},
                      Case{"lstm_1_rank", kLstm, 1, 1e-6, "--reduce nccl", "cuda"}),
    [](const auto& param_info) { return param_info.param.name; });

// One rank that cannot read its spec ends every rank, promptly, with its message.
TEST(DataParallel, ARankThatFailsEndsTheJobWithItsMessage) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-fail");
  std::ofstream(dir.path() / "good.toml") << kMlp;
  std::ofstream(dir.path() / "bad.toml") << "[model]\ninput = [2]\nlayers = [ { type = \"lineer\" "
                                            "} ]\n";
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 1 " +
                             CROSSOVER_BINARY + " train good.toml --epochs 1000 : -np 1 " +
                             CROSSOVER_BINARY + " train bad.toml --epochs 1000",
                         dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("bad.toml"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 30) << r.output;  // not a hang: rank 0 waited in a collective
}

// A rank whose GPU cannot be used (here: one the machine does not have) ends every rank with its
// message, as any rank's error does; and GPU ranks refuse a reduction that MPI cannot run on
// device memory, before any work.
TEST(GpuDataParallel, ARankWhoseGpuFailsEndsTheJobWithItsMessage) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  std::string why;
  if (!xo::testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  xo::testing::TempDir dir("dp-gpu-fail");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 1 " +
                  CROSSOVER_BINARY + " train spec.toml --device cuda --epochs 1000 " + ": -np 1 " +
                  CROSSOVER_BINARY + " train spec.toml --device cuda:99 --epochs 1000",
              dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("cuda:99"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 of 2"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 60) << r.output;
  const auto shared =
      run_cli(xo::testing::mpi_job(2, "train spec.toml --device cuda --reduce shared"), dir.path());
  EXPECT_NE(shared.status, 0) << shared.output;
  EXPECT_NE(shared.output.find("use --reduce host-staged"), std::string::npos) << shared.output;
}

// NCCL needs a GPU per rank: more ranks than the machine's GPUs are refused before any work,
// saying what to use instead; NCCL on CPU ranks too.
TEST(GpuNcclDataParallel, RanksSharingAGpuAreRefusedWithTheWayOut) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-nccl-refused");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const auto cpu =
      run_cli(xo::testing::mpi_job(2, "train spec.toml --device cpu --reduce nccl"), dir.path());
  if (cpu.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << cpu.output;
  EXPECT_NE(cpu.status, 0) << cpu.output;
  EXPECT_NE(cpu.output.find("NCCL sums GPU memory"), std::string::npos) << cpu.output;
  std::string why;
  if (!xo::testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  const auto many = run_cli(xo::testing::mpi_job(xo::testing::gpu_count() + 1,
                                                 "train spec.toml --device cuda --reduce nccl"),
                            dir.path());
  EXPECT_NE(many.status, 0) << many.output;
  EXPECT_NE(many.output.find("NCCL needs a GPU per rank: use --reduce host-staged"),
            std::string::npos)
      << many.output;
}

// The pid of the rank `rank` of a job started in `dir` (its environment says its rank; its working
// folder is `dir`), or 0.
pid_t rank_pid(const fs::path& dir, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ec;
    if (fs::read_symlink(entry.path() / "cwd", ec) != fs::canonical(dir)) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    for (std::string var; std::getline(environ, var, '\0');) {
      if (var == want) return static_cast<pid_t>(std::stoi(name));
    }
  }
  return 0;
}

// A rank killed while the job trains (kill -9: no word from it): the rank left says which rank and
// process on which host was lost and where the last checkpoint is, and ends with exit 6 within
// seconds, not waiting in a collective until the launcher kills it. (Before: only mpirun's text.)
TEST(DataParallel, AKilledRankIsNamedByTheRankLeft) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-killed");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const pid_t job =
      xo::testing::start_mpi_job(dir.path(), 2,
                                 {"train", "spec.toml", "--epochs", "1000000", "--checkpoint-every",
                                  "20steps", "--checkpoint-dir", "ck"},
                                 dir.path() / "job.log");
  pid_t victim = 0;
  for (int i = 0; i < 6000 && (victim == 0 || !xo::newest_checkpoint(dir.path() / "ck")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (victim == 0) victim = rank_pid(dir.path(), 1);
    if (waitpid(job, nullptr, WNOHANG) == job) break;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a checkpoint written whole
  if (xo::read_file(dir.path() / "job.log").find("built without MPI") != std::string::npos) {
    kill(job, SIGKILL);
    waitpid(job, nullptr, 0);
    GTEST_SKIP() << "built without MPI";
  }
  ASSERT_GT(victim, 0) << xo::read_file(dir.path() / "job.log");
  const auto killed = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  int status = 0;
  while (waitpid(job, &status, WNOHANG) != job &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  const std::string log = xo::read_file(dir.path() / "job.log");
  EXPECT_LT(seconds, 10) << log;
  for (const std::string& piece :
       {fmt::format("crossover: rank 1 of 2 (process {} on ", victim),
        std::string("ended while the job ran"), std::string("rank 0 stops too (exit 6)"),
        std::string("the checkpoint at step "),
        std::string("the same command with --resume continues it")}) {
    EXPECT_NE(log.find(piece), std::string::npos) << piece << " not in: " << log;
  }
  if (seconds >= 30) {
    kill(job, SIGKILL);
    waitpid(job, nullptr, 0);
  }
}

// A loss gone NaN stops every rank at the same step (the check sums the ranks' losses), with
// rank 0's one message.
TEST(DataParallel, ADivergingJobStopsEveryRank) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-nan");
  std::ofstream(dir.path() / "spec.toml") << with_optimizer(kMlp, "{ type = \"sgd\", lr = 1e30 }");
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_cli(xo::testing::mpi_job(2, "train spec.toml --epochs 1000 --json out.json"), dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_NE(r.status, 0) << r.output;
  const size_t message = r.output.find("the loss became NaN or infinite at epoch 1");
  ASSERT_NE(message, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("the loss became NaN", message + 1), std::string::npos) << r.output;
  EXPECT_LT(seconds, 30) << r.output;
}

// Under mpirun with several ranks, a one-process command is refused before any work, and what
// every rank would say alike (that, a usage error) is said once.
TEST(DataParallel, OneProcessCommandsAreRefusedOnManyRanksOnce) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-one-process");
  const auto once = [](const std::string& output, const std::string& piece) {
    const size_t at = output.find(piece);
    return at != std::string::npos && output.find(piece, at + 1) == std::string::npos;
  };
  const auto run =
      run_cli(xo::testing::mpi_job(2, "run --models disc-2 --epochs 1 --out r"), dir.path());
  EXPECT_NE(run.status, 0) << run.output;
  EXPECT_TRUE(once(run.output, "`crossover run` was started on 2 ranks of an MPI job"))
      << run.output;
  EXPECT_FALSE(fs::exists(dir.path() / "r"));
  const auto sweep =
      run_cli(xo::testing::mpi_job(2, "sweep disc-4 --vary depth=2,3 --out s"), dir.path());
  EXPECT_NE(sweep.status, 0) << sweep.output;
  EXPECT_TRUE(once(sweep.output, "`crossover sweep` was started on 2 ranks")) << sweep.output;
  EXPECT_FALSE(fs::exists(dir.path() / "s"));
  const auto usage = run_cli(xo::testing::mpi_job(2, "train disc-2 --epoch 1"), dir.path());
  EXPECT_NE(usage.status, 0) << usage.output;
  EXPECT_TRUE(once(usage.output, "crossover: error:")) << usage.output;
}

// Ranks given different settings are refused before the first step, naming what differs.
TEST(DataParallel, RanksThatTrainDifferentThingsAreRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-mismatch");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const auto r = run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 1 " +
                             CROSSOVER_BINARY + " train spec.toml : -np 1 " + CROSSOVER_BINARY +
                             " train spec.toml --lr 0.5",
                         dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("do not train the same thing"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1: line"), std::string::npos) << r.output;
  // The message's own line break is one (it once printed as a literal \x0a).
  EXPECT_NE(r.output.find(":\n  rank 1: line"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("lr = 0.5"), std::string::npos) << r.output;
}

// A batch smaller than the job cannot give every rank a sample.
TEST(DataParallel, ABatchSmallerThanTheJobIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-batch");
  const auto r = run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 3 " +
                             CROSSOVER_BINARY + " train disc-3 --batch 2 --epochs 1",
                         dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot be split across 3 ranks"), std::string::npos) << r.output;
}

}  // namespace

namespace {

// A job paused (rank 0 writes the checkpoint) and resumed on its ranks ends bit-identical to the
// same job never stopped.
TEST(DataParallel, APausedJobResumesBitIdentical) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-resume");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const std::string job = "--version >/dev/null && " + xo::testing::mpirun_command() + "-np 2 " +
                          CROSSOVER_BINARY + " train spec.toml ";
  const auto whole = run_cli(job + "--checkpoint-every off --save whole.safetensors", dir.path());
  if (whole.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << whole.output;
  ASSERT_EQ(whole.status, 0) << whole.output;
  const auto paused = run_cli(
      job + "--checkpoint-every 7steps --pause-after 2 --save paused.safetensors", dir.path());
  ASSERT_EQ(paused.status, 0) << paused.output;
  EXPECT_NE(paused.output.find("paused after epoch 2 of 4"), std::string::npos) << paused.output;
  const auto resumed =
      run_cli(job + "--checkpoint-every 7steps --resume --save resumed.safetensors", dir.path());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from its checkpoint"), std::string::npos)
      << resumed.output;
  EXPECT_EQ(resumed.output.find("not bit-identical"), std::string::npos) << resumed.output;
  EXPECT_EQ(xo::read_file(dir.path() / "resumed.safetensors"),
            xo::read_file(dir.path() / "whole.safetensors"));
}

// A job's checkpoint resumed by one process goes on to f32 rounding, not bit for bit: the result
// says so and why (results.json's resumed_differently, a note at the end), and so does the result
// of a run resumed from a later checkpoint of that one. The same job resumed on its own ranks says
// nothing.
TEST(DataParallel, AJobResumedOnOtherRanksSaysItIsNotBitIdentical) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-resume-other-ranks");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const std::string job = "--version >/dev/null && " + xo::testing::mpirun_command() + "-np 2 " +
                          CROSSOVER_BINARY + " train spec.toml --checkpoint-every 7steps ";
  const auto paused = run_cli(job + "--pause-after 1", dir.path());
  if (paused.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << paused.output;
  ASSERT_EQ(paused.status, 0) << paused.output;
  const auto alone = run_cli(
      "train spec.toml --threads 1 --checkpoint-every 7steps --resume --pause-after 2 --json "
      "alone.json",
      dir.path());
  ASSERT_EQ(alone.status, 0) << alone.output;
  EXPECT_NE(alone.output.find("note: not bit-identical to an uninterrupted run"), std::string::npos)
      << alone.output;
  // Resumed again from the one process's own checkpoint: the same ranks, still not bit-identical.
  const auto last =
      run_cli("train spec.toml --threads 1 --checkpoint-every 7steps --resume --json last.json",
              dir.path());
  ASSERT_EQ(last.status, 0) << last.output;
  for (const char* file : {"alone.json", "last.json"}) {
    std::ifstream in(dir.path() / file);
    const auto doc = nlohmann::json::parse(in);
    const std::string why = doc["checkpoints"]["resumed_differently"];
    EXPECT_NE(why.find("written by 2 ranks"), std::string::npos) << file << ": " << why;
  }
}

// The checkpoints taken between steps, while the ranks of a machine share one copy of the
// parameters and the optimizer's state (each rank stepping its part): rank 0 saves every part. A
// job resumed from one (the pause's checkpoint removed) ends as the uninterrupted job does.
TEST(DataParallel, AJobResumesBitIdenticalFromACheckpointTakenBetweenSteps) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-resume-between-steps");
  std::ofstream(dir.path() / "spec.toml") << with_optimizer(kMlp, kAdam);
  const std::string job = "--version >/dev/null && " + xo::testing::mpirun_command() + "-np 3 " +
                          CROSSOVER_BINARY + " train spec.toml --checkpoint-dir ck ";
  const auto whole = run_cli(job + "--checkpoint-every off --save whole.safetensors", dir.path());
  if (whole.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << whole.output;
  ASSERT_EQ(whole.status, 0) << whole.output;
  EXPECT_NE(whole.output.find("of gradients per step in shared memory, each rank its part "
                              "within its optimizer pass: "),
            std::string::npos)
      << whole.output;
  // 11 steps an epoch: checkpoints after steps 7, 14 and 21, and the pause's after 22.
  const auto paused = run_cli(job + "--checkpoint-every 7steps --pause-after 2", dir.path());
  ASSERT_EQ(paused.status, 0) << paused.output;
  for (const char* ext : {".json", ".safetensors"}) {
    ASSERT_TRUE(fs::remove(dir.path() / "ck" / (std::string("step-000000000022") + ext)));
    ASSERT_TRUE(fs::exists(dir.path() / "ck" / (std::string("step-000000000021") + ext)));
  }
  const auto resumed =
      run_cli(job + "--checkpoint-every off --resume --save resumed.safetensors", dir.path());
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step 10 of 11"), std::string::npos) << resumed.output;
  EXPECT_EQ(xo::read_file(dir.path() / "resumed.safetensors"),
            xo::read_file(dir.path() / "whole.safetensors"));
}

// Where MPI maps the memory the ranks share is too small (a container's /dev/shm): chosen by
// default, shared memory gives way to MPI's all-reduce with a warning, and the job trains as
// usual; asked for, it is refused before the first step with the sizes and the remedies.
TEST(DataParallel, TooLittleSharedMemoryFallsBackOrIsRefused) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-small-shm");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const std::string job = "--version >/dev/null && CROSSOVER_TEST_SHARED_MEMORY_FREE=1000 " +
                          xo::testing::mpirun_command() + "-np 2 " + CROSSOVER_BINARY +
                          " train spec.toml --checkpoint-every off ";
  const auto fallback = run_cli(job + "--json r.json", dir.path());
  if (fallback.output.find("built without MPI") != std::string::npos) {
    GTEST_SKIP() << fallback.output;
  }
  ASSERT_EQ(fallback.status, 0) << fallback.output;
  EXPECT_NE(fallback.output.find("warning: the 2 ranks of this machine would share"),
            std::string::npos)
      << fallback.output;
  EXPECT_NE(fallback.output.find("summed by MPI's all-reduce instead"), std::string::npos)
      << fallback.output;
  const json r = json::parse(xo::read_file(dir.path() / "r.json"));
  EXPECT_EQ(r.at("data_parallel").at("reduce"), "after-backward");

  const auto refused = run_cli(job + "--reduce shared", dir.path());
  EXPECT_EQ(refused.status, 2) << refused.output;
  EXPECT_NE(refused.output.find("crossover: error: --reduce shared: the 2 ranks of this machine "
                                "would share"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("free: give it more (in a container, e.g. docker run "
                                "--shm-size=1g) or use --reduce after-backward"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(refused.output.find(" ms/step"), std::string::npos) << refused.output;
}

// BatchNorm across ranks: each rank's slice statistics, rank 0's running statistics evaluated on
// every rank's slice of the test split; the job finishes and reports a test loss.
TEST(DataParallel, BatchNormTrainsWithRankZerosRunningStatistics) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-bn");
  write_csv(dir.path() / "images.csv", 203, 36, 5, 1);
  write_csv(dir.path() / "test.csv", 31, 36, 5, 2);
  std::ofstream(dir.path() / "spec.toml") << replace_dir(R"(
[model]
input = [1, 6, 6]
layers = [ { type = "conv2d", out = 4, kernel = 3 }, { type = "batchnorm2d" }, { type = "relu" },
           { type = "flatten" }, { type = "linear", out = 5 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.05, momentum = 0.9 }
batch = 40
epochs = 2
[data]
source = "csv:{dir}/images.csv"
test = "csv:{dir}/test.csv"
)",
                                                         dir.path());
  const auto r =
      run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 3 " +
                  CROSSOVER_BINARY + " train spec.toml --checkpoint-every off --json r.json",
              dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = json::parse(xo::read_file(dir.path() / "r.json"));
  EXPECT_EQ(j.at("ranks"), 3);
  EXPECT_TRUE(j.at("final_test_loss").is_number()) << j.dump();
}

}  // namespace

namespace {

// `crossover allreduce` under mpirun: every size measured, predicted and written; without a
// launcher, or with a size that is not one, a clear refusal.
TEST(Allreduce, MeasuresEverySizeAgainstTheRingModel) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("allreduce");
  const auto r =
      run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 2 " +
                  CROSSOVER_BINARY + " allreduce --sizes 64K,1M --repeat 3 --json a.json",
              dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("ring model against the measurement"), std::string::npos) << r.output;
  const json j = json::parse(xo::read_file(dir.path() / "a.json"));
  EXPECT_EQ(j.at("schema"), "crossover.allreduce/1");
  EXPECT_EQ(j.at("ranks"), 2);
  ASSERT_EQ(j.at("sizes").size(), 2u);
  EXPECT_EQ(j.at("sizes")[1].at("bytes"), 1 << 20);
  for (const json& s : j.at("sizes")) {
    EXPECT_GT(s.at("measured_ms").get<double>(), 0) << s.dump();
    EXPECT_GT(s.at("predicted_ms").get<double>(), 0) << s.dump();
    // nccl-tests: busbw = algbw * 2(n-1)/n, which is algbw on 2 ranks.
    EXPECT_DOUBLE_EQ(s.at("busbw_gbs").get<double>(), s.at("algbw_gbs").get<double>());
  }
  // The link is measured between the sizes asked and beyond them (64 KiB / sqrt 2, 256 KiB,
  // 1 MiB x sqrt 2), as a ring's steps use it: chunks of half a message on 2 ranks.
  const json& link = j.at("link_by_size");
  ASSERT_EQ(link.size(), 3u) << link.dump();
  EXPECT_EQ(link[1].at("message_bytes"), 256 << 10);
  EXPECT_EQ(link[1].at("bytes"), 128 << 10);
  for (const json& l : link) {
    EXPECT_GT(l.at("gbs").get<double>(), 0) << l.dump();
    EXPECT_GT(l.at("reduce_gbs").get<double>(), 0) << l.dump();
  }
}

TEST(Allreduce, RefusesWithoutALauncherAndBadSizes) {
  const auto alone = run_cli("allreduce");
  EXPECT_EQ(alone.status, 2) << alone.output;
  EXPECT_NE(alone.output.find("run it under a launcher"), std::string::npos) << alone.output;
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  const auto bad = run_cli("--version >/dev/null && " + xo::testing::mpirun_command() + "-np 2 " +
                           CROSSOVER_BINARY + " allreduce --sizes 3M,7");
  if (bad.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << bad.output;
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("--sizes: '7' is not a size"), std::string::npos) << bad.output;
}

}  // namespace

namespace {

// `mpirun -np 3 crossover sweep SPEC --vary ranks=1,3`: the same training on one rank and on
// three (the same losses), measured, reported once by rank 0 with the scaling table.
TEST(DataParallel, ASweepAlongRanksMeasuresScaling) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-sweep");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const auto r = run_cli(xo::testing::mpi_job(3,
                                              "sweep spec.toml --vary ranks=1,3 --epochs 2 "
                                              "--out out"),
                         dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.status, 0) << r.output;
  // Rank 0 alone reports.
  const size_t table = r.output.find("Scaling across ranks");
  ASSERT_NE(table, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Scaling across ranks", table + 1), std::string::npos) << r.output;
  const json j = json::parse(xo::read_file(dir.path() / "out" / "results.json"));
  EXPECT_TRUE(j.at("complete").get<bool>());
  ASSERT_EQ(j.at("runs").size(), 2u);
  const json& one = j.at("runs")[0];
  const json& three = j.at("runs")[1];
  EXPECT_EQ(one.at("ranks"), 1);
  EXPECT_EQ(three.at("ranks"), 3);
  ASSERT_EQ(three.at("epoch_log").size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    const double a = one.at("epoch_log")[e].at("loss"), b = three.at("epoch_log")[e].at("loss");
    EXPECT_NEAR(a, b, 1e-5 * std::abs(a)) << "epoch " << e + 1;
  }
  const json& scaling = j.at("sweep").at("scaling");
  ASSERT_EQ(scaling.size(), 2u);
  EXPECT_EQ(scaling[0].at("efficiency"), 1.0);
  EXPECT_EQ(scaling[1].at("ranks"), 3);
  // Every gradient, in the flat buffer (with its few floats of alignment between tensors).
  const int64_t reduced = scaling[1].at("reduced_bytes_per_step");
  EXPECT_GE(reduced, 4 * three.at("params").get<int64_t>());
  EXPECT_LT(reduced, 4 * three.at("params").get<int64_t>() + 512);
  // The ranks of one machine sum in the optimizer's pass (shared): no bus bandwidth to report.
  EXPECT_TRUE(scaling[1].at("bus_gbs").is_null()) << scaling[1];
  EXPECT_GT(scaling[1].at("efficiency").get<double>(), 0);
  const std::string page = xo::read_file(dir.path() / "out" / "report.html");
  EXPECT_NE(page.find("Scaling across ranks"), std::string::npos);
  EXPECT_NE(page.find("cpu (3 ranks)"), std::string::npos);  // the runs' rows tell them apart
}

TEST(DataParallel, ASweepAlongRanksNeedsALauncherAndCountsItHas) {
  const auto alone = run_cli("sweep disc-3 --vary ranks=1,2");
  EXPECT_EQ(alone.status, 2) << alone.output;
  EXPECT_NE(alone.output.find("runs under an MPI launcher"), std::string::npos) << alone.output;
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-sweep-bad");
  const auto bad = run_cli(xo::testing::mpi_job(2, "sweep disc-3 --vary ranks=1,3"), dir.path());
  if (bad.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << bad.output;
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("'3' is not a rank count from 1 to 2"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "crossover-results" / "results.json"));
}

// A sweep along ranks stopped during its second point continues with the same command: the point
// that finished is kept (every rank learns so from rank 0), the stopped one resumes from the
// checkpoint rank 0 wrote, each rank count with its own.
TEST(DataParallel, AnInterruptedSweepAlongRanksContinues) {
  if (!have_mpirun()) GTEST_SKIP() << "no mpirun: run scripts/setup";
  xo::testing::TempDir dir("dp-sweep-resume");
  std::ofstream(dir.path() / "spec.toml") << kMlp;
  const fs::path results = dir.path() / "out" / "results.json";
  // 66,000 steps a point: a few seconds each on this 2-core machine, so the second point is still
  // training when the first one's result appears and SIGINT comes.
  const std::string args = "sweep spec.toml --vary ranks=1,2 --epochs 6000 --out out";
  std::vector<std::string> argv;
  for (size_t at = 0, next; at < args.size(); at = next + 1) {
    next = std::min(args.find(' ', at), args.size());
    argv.push_back(args.substr(at, next - at));
  }
  const pid_t job = xo::testing::start_mpi_job(dir.path(), 2, argv, dir.path() / "first.log");
  bool first_written = false;
  for (int i = 0; i < 12000 && !first_written; ++i) {
    std::error_code ec;
    if (fs::exists(results, ec)) {
      const json j = json::parse(xo::read_file(results), nullptr, false);
      first_written = j.is_object() && j["runs"].size() == 1;
    }
    int status = 0;
    if (!first_written && waitpid(job, &status, WNOHANG) == job) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(job, first_written ? SIGINT : SIGKILL);
  waitpid(job, nullptr, 0);
  const std::string first_log = xo::read_file(dir.path() / "first.log");
  if (first_log.find("built without MPI") != std::string::npos) GTEST_SKIP() << first_log;
  ASSERT_TRUE(first_written) << first_log;
  // Rank 0 alone says it stops.
  const size_t stopping = first_log.find("stopping at the next safe point");
  ASSERT_NE(stopping, std::string::npos) << first_log;
  EXPECT_EQ(first_log.find("stopping at the next safe point", stopping + 1), std::string::npos)
      << first_log;
  const json stopped = json::parse(xo::read_file(results));
  EXPECT_FALSE(stopped.at("complete").get<bool>());
  const bool resumable =
      stopped.at("runs").size() == 2 && stopped.at("runs")[1].at("interrupted").get<bool>();

  const auto again = run_cli(xo::testing::mpi_job(2, args), dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("kept from the earlier, unfinished run"), std::string::npos)
      << again.output;
  if (resumable) {
    EXPECT_NE(again.output.find("resuming spec from its checkpoint"), std::string::npos)
        << again.output;
    EXPECT_NE(again.output.find("-cpu-2ranks-"), std::string::npos) << again.output;
  }
  const json j = json::parse(xo::read_file(results));
  EXPECT_TRUE(j.at("complete").get<bool>());
  ASSERT_EQ(j.at("runs").size(), 2u);
  EXPECT_EQ(j.at("runs")[0].at("ranks"), 1);
  EXPECT_EQ(j.at("runs")[1].at("ranks"), 2);
  EXPECT_EQ(j.at("runs")[0].at("step_ms"), stopped.at("runs")[0].at("step_ms"));
  EXPECT_FALSE(j.at("runs")[1].at("interrupted").get<bool>());
  EXPECT_EQ(j.at("sweep").at("scaling").size(), 2u);
}

}  // namespace

// A long run's memory and checkpoints do not grow with its steps: every step's time was once kept
// and written into every checkpoint (`train disc-4 --epochs 1e12` held 2.4 GiB after a minute and
// wrote a 449 MiB checkpoint). A run of 10^6 one-sample steps (epochs of 10^5 steps, so that its
// few epoch records stay small) is paused at 10^5 steps and resumed to 10^6: its checkpoint's step
// times stay within their bound (train/timing_series.h) and the rest of it as it was, and the
// resumed process, which ran nine times the steps, held no more memory than the first beyond a
// few MiB.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/file.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/timing_series.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

constexpr char kSpec[] = R"([model]
name = "long-run"
input = [2]
layers = [ { type = "linear", out = 4 }, { type = "relu" }, { type = "linear", out = 2 } ]
loss = "cross_entropy"
[train]
optimizer = { type = "sgd", lr = 0.01 }
batch = 1
epochs = 1000
[data]
source = "disc"
samples = 100000
)";

struct Ran {
  int exit_code = -1;
  long max_rss_kib = 0;
  std::string output;
};

// Runs crossover in `dir` and waits for it: its exit code, its peak resident memory (wait4's
// ru_maxrss) and what it printed.
Ran run_measured(const fs::path& dir, const std::vector<std::string>& args) {
  const fs::path log = dir / "log.txt";
  const pid_t pid = xo::testing::start_crossover(dir, args, log, log);
  int status = 0;
  rusage usage{};
  Ran r;
  if (wait4(pid, &status, 0, &usage) == pid && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.max_rss_kib = usage.ru_maxrss;
  r.output = xo::read_file(log);
  return r;
}

// The newest checkpoint's JSON in `folder`, and its step times' share of it (bytes).
std::pair<size_t, size_t> checkpoint_sizes(const fs::path& folder) {
  fs::path newest;
  for (const auto& f : fs::directory_iterator(folder))
    if (f.path().extension() == ".json" && f.path() > newest) newest = f.path();
  const std::string text = xo::read_file(newest);
  return {text.size(), nlohmann::json::parse(text).at("times").dump().size()};
}

TEST(LongRun, MemoryAndCheckpointStayFlatOverAMillionSteps) {
  const xo::testing::TempDir dir("long-run");
  std::ofstream(dir.path() / "spec.toml") << kSpec;
  const std::vector<std::string> base = {
      "train", "spec.toml",          "--quiet",      "--checkpoint-dir",
      "ck",    "--checkpoint-every", "10000000steps"};
  std::vector<std::string> first = base, second = base;
  first.insert(first.end(), {"--pause-after", "1"});
  second.insert(second.end(), {"--resume", "--pause-after", "10"});
  const Ran a = run_measured(dir.path(), first);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto [json_a, times_a] = checkpoint_sizes(dir.path() / "ck");
  const Ran b = run_measured(dir.path(), second);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_NE(b.output.find("paused after epoch 10"), std::string::npos) << b.output;
  const auto [json_b, times_b] = checkpoint_sizes(dir.path() / "ck");
  // Bounded: at most kMaxBins bins in each of four series, a bin and its samples under 24 bytes
  // in the file (the bins fill in as rarer times come, up to that bound); kept, the times of 10^6
  // steps were over 80 MB of JSON.
  constexpr size_t kTimesBound = 4 * TimingSeries::kMaxBins * 24;
  EXPECT_LT(times_b, kTimesBound) << "step times: " << times_a << " bytes at 10^5 steps";
  EXPECT_LE(json_b, json_a + kTimesBound)
      << json_a << " bytes at 10^5 steps, " << json_b << " at 10^6";
  // Kept in memory, every step's five times were 40 MB over these 9 x 10^5 steps. (Under
  // AddressSanitizer freed memory is held in quarantine, up to 256 MiB: resident memory grows
  // with whatever is freed, and says nothing of what is kept.)
#ifndef __SANITIZE_ADDRESS__
  EXPECT_LE(b.max_rss_kib, a.max_rss_kib + 8 * 1024)
      << a.max_rss_kib << " KiB over 10^5 steps, " << b.max_rss_kib << " over the next 9 x 10^5";
#endif
}

}  // namespace
}  // namespace xo

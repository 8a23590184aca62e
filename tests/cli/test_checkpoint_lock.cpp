// Two runs of one model in one folder: the second is refused at its start, while the first's
// checkpoint folder is locked (train/checkpoint_lock.h), not a minute later at the first
// checkpoint. Before, the second was told the first's checkpoint was its own, and its --resume was
// refused or (started at the same instant) silently restarted from epoch 1.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "support/cli.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using xo::testing::run_cli;

// disc-4 for ever (ten steps an epoch), a checkpoint every 200 steps.
const std::vector<std::string> kLongRun = {
    "train", "disc-4", "--epochs", "100000000", "--quiet", "--checkpoint-every", "200steps"};

// Waits up to a minute for `pid` to end; its exit code (-1: it did not end, or by a signal).
int exit_code_of(pid_t pid) {
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (Clock::now() < give_up) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Waits until `pid` takes SIGINT itself and trains (it has written a checkpoint).
bool training(pid_t pid, const fs::path& checkpoints) {
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < give_up) {
    if (xo::testing::catches(pid, SIGINT) && newest_checkpoint(checkpoints)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The stopped run's checkpoint resumes: the same command with --resume, paused an epoch later.
void expect_resumes(const fs::path& dir, const fs::path& checkpoints) {
  const std::optional<int64_t> steps = newest_checkpoint(checkpoints);
  ASSERT_TRUE(steps) << "no checkpoint kept";
  const auto resumed = run_cli(
      "train disc-4 --epochs 100000000 --quiet --checkpoint-every 200steps --resume "
      "--pause-after " +
          std::to_string(*steps / 10 + 1),
      dir);
  EXPECT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming disc-4 from its checkpoint"), std::string::npos)
      << resumed.output;
}

TEST(CheckpointLock, ASecondRunIntoTheSameFolderIsRefusedAtItsStart) {
  const xo::testing::TempDir dir("checkpoint-lock");
  const fs::path checkpoints = dir.path() / "crossover-checkpoints" / "disc-4";
  const pid_t first = xo::testing::start_crossover(dir.path(), kLongRun, dir.path() / "first.txt",
                                                   dir.path() / "first.txt");
  ASSERT_TRUE(training(first, checkpoints)) << xo::read_file(dir.path() / "first.txt");
  const auto second =
      run_cli("train disc-4 --epochs 100000001 --quiet --checkpoint-every 200steps", dir.path());
  EXPECT_EQ(second.status, 2) << second.output;
  EXPECT_NE(second.output.find("another crossover is training into this folder now"),
            std::string::npos)
      << second.output;
  kill(first, SIGINT);
  EXPECT_EQ(exit_code_of(first), 130) << xo::read_file(dir.path() / "first.txt");
  expect_resumes(dir.path(), checkpoints);
}

TEST(CheckpointLock, OfTwoRunsStartedTogetherOneTrainsAndTheOtherIsRefused) {
  const xo::testing::TempDir dir("checkpoint-lock-together");
  const fs::path checkpoints = dir.path() / "crossover-checkpoints" / "disc-4";
  const pid_t a = xo::testing::start_crossover(dir.path(), kLongRun, dir.path() / "a.txt",
                                               dir.path() / "a.txt");
  const pid_t b = xo::testing::start_crossover(dir.path(), kLongRun, dir.path() / "b.txt",
                                               dir.path() / "b.txt");
  // The one refused ends by itself with exit code 2; the other trains on until stopped.
  std::optional<pid_t> refused;
  const auto give_up = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (!refused && Clock::now() < give_up) {
    for (const pid_t p : {a, b}) {
      if (waitpid(p, &status, WNOHANG) == p) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2)
            << xo::read_file(dir.path() / (p == a ? "a.txt" : "b.txt"));
        refused = p;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(refused) << "neither run was refused";
  const pid_t survivor = *refused == a ? b : a;
  ASSERT_TRUE(training(survivor, checkpoints));
  kill(survivor, SIGINT);
  EXPECT_EQ(exit_code_of(survivor), 130);
  expect_resumes(dir.path(), checkpoints);
}

}  // namespace
}  // namespace xo

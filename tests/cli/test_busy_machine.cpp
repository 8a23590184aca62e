// A user's run on a busy machine, as they meet it: while another process keeps the cores busy,
// `crossover train` warns that its timings are contaminated and its --json says so.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

// Processes that spin until killed: the "other load".
class Spinners {
 public:
  explicit Spinners(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        volatile unsigned long x = 0;
        for (;;) x = x + 1;
      }
      pids_.push_back(pid);
    }
  }
  ~Spinners() {
    for (const pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

 private:
  std::vector<pid_t> pids_;
};

TEST(BusyMachineCli, TrainWarnsThatItsTimingsAreContaminated) {
  const xo::testing::TempDir dir("busy-machine");
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const Spinners spinners(std::max(1, cores));
  const xo::testing::CliResult r = xo::testing::run_cli(
      "train disc-10 --epochs 20 --checkpoint-every off --json run.json", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("crossover: warning: other processes kept"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("its timings are contaminated"), std::string::npos) << r.output;
  std::ifstream in(dir / "run.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["timings_contaminated"], true) << j.dump();
  EXPECT_GE(j["mean_other_cores"].get<double>(), 0.25) << j.dump();
}

// The verdict built on a contaminated time says so beside it, in the terminal and the JSON.
TEST(BusyMachineCli, AVerdictOnABusyMachineSaysItsTimeIsNotToBeTrusted) {
  const xo::testing::TempDir dir("busy-verdict");
  const int cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  const Spinners spinners(std::max(1, cores));
  const xo::testing::CliResult r = xo::testing::run_cli(
      "advise disc-10 --epochs 20 --devices cpu --checkpoint-every off --out out", dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("! the time here is not to be trusted: other processes kept"),
            std::string::npos)
      << r.output;
  std::ifstream in(dir / "out" / "results.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_NE(j["verdict"]["caution"].get<std::string>().find("contaminated"), std::string::npos)
      << j["verdict"].dump();
}

}  // namespace

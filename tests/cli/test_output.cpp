// Where the command's output goes, as a user meets it: `--json /dev/stdout` and `--json -` print
// the JSON; a second job into a busy --out folder is refused at once and a killed one never blocks
// the next; a run interrupted after its first model says it is not complete; a model name with
// escape sequences reaches neither the terminal nor the CSV raw.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "support/cli.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using xo::testing::CliResult;
using xo::testing::run_cli;

// The JSON document printed among a command's other lines: from a line that is "{" to the next
// line that is "}".
nlohmann::json json_in(const std::string& output) {
  const size_t begin = output.rfind("{\n", 0) == 0 ? 0 : output.find("\n{\n");
  if (begin == std::string::npos) return nullptr;
  const size_t start = begin == 0 ? 0 : begin + 1;
  const size_t end = output.find("\n}\n", start);
  if (end == std::string::npos) return nullptr;
  return nlohmann::json::parse(output.substr(start, end + 2 - start), nullptr, false);
}

TEST(CliOutput, JsonToDevStdoutOrDashIsPrinted) {
  const xo::testing::TempDir folder("cli_json_stdout");
  for (const std::string target : {"/dev/stdout", "-"}) {
    const CliResult r =
        run_cli("train disc-2 --epochs 2 --threads 1 --json " + target, folder.path());
    ASSERT_EQ(r.status, 0) << r.output;
    const nlohmann::json j = json_in(r.output);
    ASSERT_TRUE(j.is_object()) << target << ": no JSON in: " << r.output;
    EXPECT_EQ(j["schema"], "crossover.train/2") << target;
    EXPECT_EQ(j["model"], "disc-2") << target;
  }
  EXPECT_FALSE(fs::exists(folder.path() / "-")) << "written to stdout, not to a file named '-'";
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status("/dev/stdout")));
}

// Starts crossover with `args` in `dir`, its output into `log`; returns its pid.
pid_t start(const fs::path& dir, const std::vector<std::string>& args, const fs::path& log) {
  return xo::testing::start_crossover(dir, args, log, log);
}

// Polls `ready` every 10 ms for up to two minutes (a loaded machine starts processes slowly);
// false if it never held or `pid` ended first.
template <typename Ready>
bool wait_for(pid_t pid, Ready&& ready) {
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    if (ready()) return true;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string text_of(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CliOutput, ASecondJobIntoABusyOutFolderIsRefusedAndAKilledOneBlocksNothing) {
  const xo::testing::TempDir folder("cli_lock");
  const fs::path dir = folder.path();
  const fs::path out = dir / "out";
  const pid_t first = start(dir,
                            {"run", "--models", "disc-12", "--epochs", "1000", "--devices", "cpu",
                             "--threads", "1", "--out", out.string()},
                            dir / "first.log");
  // The lock is held once its file names the holder.
  const bool locked = wait_for(first, [&] {
    return text_of(out / std::string(xo::kFolderLockName)).find("pid ") != std::string::npos;
  });
  if (!locked) {
    kill(first, SIGKILL);
    waitpid(first, nullptr, 0);
    FAIL() << "the first job never locked " << out << ": " << text_of(dir / "first.log");
  }
  const CliResult second =
      run_cli("run --models disc-2 --epochs 1 --devices cpu --out " + out.string(), dir);
  kill(first, SIGKILL);  // the lock goes with the process, however it ends
  waitpid(first, nullptr, 0);
  EXPECT_EQ(second.status, 2) << second.output;
  for (const std::string& piece : std::vector<std::string>{
           "--out " + out.string(), "another crossover", fmt::format("(pid {}: ", first),
           "run --models disc-12 --epochs 1000", "choose another --out"}) {
    EXPECT_NE(second.output.find(piece), std::string::npos)
        << piece << " not in: " << second.output;
  }
  // Refused before any work: no device was probed or trained on.
  EXPECT_EQ(second.output.find("GFLOP/s"), std::string::npos) << second.output;
  const CliResult third = run_cli(
      "run --models disc-2 --epochs 1 --devices cpu --threads 1 --out " + out.string(), dir);
  EXPECT_EQ(third.status, 0) << third.output;
}

TEST(CliOutput, ARunInterruptedAfterItsFirstModelIsNotComplete) {
  const xo::testing::TempDir folder("cli_partial");
  const fs::path dir = folder.path();
  const fs::path out = dir / "out";
  const fs::path results = out / "results.json";
  ASSERT_EQ(run_cli("devices", dir).status, 0);  // the peaks probed and cached beforehand
  // disc-2 takes about 0.4 s for 10000 epochs on one thread (a step is a few microseconds),
  // disc-8 and disc-9 tens of seconds each: SIGINT as soon as the first model is in results.json
  // lands inside disc-8, or just before it starts, never after the job's end, however late a
  // loaded machine runs this test's poll. (With disc-3 and disc-4, half a second each, a poll
  // delayed past a second under `ctest -j2` once found the job complete.)
  const pid_t pid = start(dir,
                          {"run", "--models", "disc-2,disc-8,disc-9", "--epochs", "10000",
                           "--devices", "cpu", "--threads", "1", "--out", out.string()},
                          dir / "log");
  const bool first_written = wait_for(pid, [&] {
    std::error_code ec;
    if (!fs::exists(results, ec)) return false;
    const auto j = nlohmann::json::parse(text_of(results), nullptr, false);
    return j.is_object() && j["runs"].size() == 1;
  });
  kill(pid, first_written ? SIGINT : SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(first_written) << text_of(dir / "log");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << text_of(dir / "log");
  const auto j = nlohmann::json::parse(text_of(results));
  EXPECT_FALSE(j["complete"].get<bool>());
  ASSERT_GE(j["runs"].size(), 1u);
  ASSERT_LE(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["model"], "disc-2");
  EXPECT_FALSE(j["runs"][0]["interrupted"].get<bool>());
  if (j["runs"].size() == 2) {  // else stopped between the two
    EXPECT_EQ(j["runs"][1]["model"], "disc-8");
    EXPECT_TRUE(j["runs"][1]["interrupted"].get<bool>());
  }
  EXPECT_NE(text_of(out / "report.html").find("class=\"banner partial\""), std::string::npos);
  EXPECT_NE(text_of(dir / "log").find("(interrupted: partial)"), std::string::npos)
      << text_of(dir / "log");
}

TEST(CliOutput, AnAdviseInterruptedWhileMeasuringIsNotComplete) {
  const xo::testing::TempDir folder("cli_advise_partial");
  const fs::path dir = folder.path();
  const fs::path out = dir / "out";
  // Interrupted once training has begun (its first checkpoint is on the disk).
  const pid_t pid =
      start(dir,
            {"advise", "disc-8", "--epochs", "100000", "--steps", "1000000", "--checkpoint-every",
             "1steps", "--devices", "cpu", "--threads", "1", "--out", out.string()},
            dir / "log");
  const bool training = wait_for(pid, [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "checkpoints", ec)) {
      if (xo::newest_checkpoint(e.path())) return true;
    }
    return false;
  });
  kill(pid, training ? SIGINT : SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(training) << text_of(dir / "log");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << text_of(dir / "log");
  const auto j = nlohmann::json::parse(text_of(out / "results.json"));
  EXPECT_EQ(j["kind"], "advise");
  EXPECT_FALSE(j["complete"].get<bool>());
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_TRUE(j["runs"][0]["interrupted"].get<bool>());
  EXPECT_NE(text_of(dir / "log").find("(interrupted: partial)"), std::string::npos)
      << text_of(dir / "log");
}

TEST(CliOutput, EscapeSequencesInAModelNameAreShownNotSent) {
  const xo::testing::TempDir folder("cli_escape");
  const fs::path dir = folder.path();
  // A name that would turn the terminal red and retitle its window, and a spreadsheet formula.
  std::ofstream(dir / "evil.toml") << R"([model]
name = "=cmd|' /C calc'!A0\u001b[31m\u001b]0;owned\u0007"
input = [2]
layers = [{ type = "linear", out = 4 }, { type = "relu" }, { type = "linear", out = 2 }]
loss = "cross_entropy"

[train]
batch = 100
epochs = 1

[data]
source = "disc"
samples = 200
)";
  const CliResult r =
      run_cli("run --models evil.toml --epochs 1 --devices cpu --threads 1 --out out", dir);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x07'), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\\x1b[31m\\x1b]0;owned\\x07"), std::string::npos) << r.output;
  std::ifstream csv(dir / "out" / "results.csv");
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  // The formula is text (a leading apostrophe), the controls escaped, the cell quoted for its
  // quote character... which it has none of here, so it only starts with the apostrophe.
  EXPECT_EQ(row.rfind("'=cmd|' /C calc'!A0\\x1b[31m\\x1b]0;owned\\x07,", 0), 0u) << row;
  // An error that echoes the name shows it escaped too.
  const CliResult bad = run_cli("train 'no\x1b[2Jsuch-model'", dir);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_EQ(bad.output.find('\x1b'), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("no\\x1b[2Jsuch-model"), std::string::npos) << bad.output;
}

}  // namespace

namespace {

// Nothing lost: a finished job's folder is never overwritten without --overwrite. By default the
// next job goes to a dated folder beside it; an --out that names it is refused.
TEST(CliOutput, AFinishedJobIsNeverOverwrittenWithoutOverwrite) {
  const xo::testing::TempDir dir("finished-job");
  const std::string quick = " --devices cpu --epochs 1";
  CliResult r = run_cli("run --models disc-2" + quick, dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path first = dir / "crossover-results" / "results.json";
  const std::string finished = text_of(first);
  ASSERT_NE(finished.find("\"complete\": true"), std::string::npos);

  r = run_cli("advise disc-2" + quick, dir.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("crossover-results holds the finished job 'crossover run: disc-2'"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(text_of(first), finished);  // untouched
  int dated = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename();
    if (name.rfind("crossover-results-", 0) == 0) {
      ++dated;
      EXPECT_TRUE(fs::exists(e.path() / "results.json")) << name;
    }
  }
  EXPECT_EQ(dated, 1);

  r = run_cli("advise disc-2 --out crossover-results" + quick, dir.path());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crossover: error: --out crossover-results: holds the finished job "
                          "'crossover run: disc-2' of "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--overwrite replaces it"), std::string::npos) << r.output;
  EXPECT_EQ(text_of(first), finished);

  r = run_cli("advise disc-2 --out crossover-results --overwrite" + quick, dir.path());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(text_of(first).find("\"kind\": \"advise\""), std::string::npos);
}

// --json and --save are checked before the training, not after it.
TEST(CliOutput, AnUnwritableResultPathFailsBeforeTraining) {
  const xo::testing::TempDir dir("unwritable");
  std::ofstream(dir / "a-file") << "not a folder";
  for (const std::string flag : {"--json", "--save"}) {
    const CliResult r = run_cli("train disc-2 --epochs 1 " + flag + " a-file/out", dir.path());
    EXPECT_EQ(r.status, 2) << r.output;
    EXPECT_NE(r.output.find("crossover: error: " + flag + " a-file/out:"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("epoch 1/1"), std::string::npos) << "trained first: " << r.output;
  }
}

}  // namespace

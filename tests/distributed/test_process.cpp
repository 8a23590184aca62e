// crossover starting crossover (distributed/process.h): the child is this very binary (here the
// test binary, run with gtest's own flags), its output appended to the log, its exit code given as
// a shell gives it, and no MPI launcher variable reaches it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "distributed/process.h"
#include "core/file.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

TEST(Process, AnExitOrASignalReadsAsAShellGivesIt) {
  EXPECT_EQ(exit_status(0), 0);
  EXPECT_EQ(exit_status(3 << 8), 3);     // exited with 3
  EXPECT_EQ(exit_status(SIGKILL), 137);  // killed: 128 + 9
  EXPECT_EQ(exit_status(SIGTERM), 143);
}

TEST(Process, AChildRunsThisBinaryAndAppendsItsOutputToTheLog) {
  const testing::TempDir dir("process");
  const std::filesystem::path log = dir.path() / "log.txt";
  std::ofstream(log) << "before\n";
  EXPECT_EQ(run_child({"--gtest_list_tests", "--gtest_filter=Process.*"}, log), 0);
  const std::string text = read_file(log);
  EXPECT_EQ(text.rfind("before\n", 0), 0u) << text;  // appended, not replaced
  EXPECT_NE(text.find("AChildRunsThisBinaryAndAppendsItsOutputToTheLog"), std::string::npos)
      << text;
}

// Run as a child by the test below: passes only where no launcher variable reached it.
TEST(Process, ChildSeesNoLauncher) {
  if (!std::getenv("XO_TEST_PROCESS_CHILD")) GTEST_SKIP() << "run as a child by the test below";
  EXPECT_EQ(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr);
  EXPECT_EQ(std::getenv("PMIX_RANK"), nullptr);
}

TEST(Process, AChildIsAProcessOfItsOwnNotARankOfTheJob) {
  const testing::TempDir dir("process-env");
  setenv("XO_TEST_PROCESS_CHILD", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("PMIX_RANK", "1", 1);
  const int code =
      run_child({"--gtest_filter=Process.ChildSeesNoLauncher"}, dir.path() / "log.txt");
  unsetenv("XO_TEST_PROCESS_CHILD");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("PMIX_RANK");
  EXPECT_EQ(code, 0) << read_file(dir.path() / "log.txt");
}

}  // namespace
}  // namespace xo

// A self-contained binary: `cmake --install` puts crossover in PREFIX/bin with the spec files and
// the catalog in PREFIX/share/crossover, and the installed binary, run from a folder far from the
// source tree, prices a run on the catalog's hardware (the catalog is built into it).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct Shell {
  int status;
  std::string output;
};

Shell shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(Install, TheInstalledBinaryRunsAwayFromItsSourceTree) {
  const xo::testing::TempDir prefix("install-prefix");
  const Shell install = shell(std::string("'") + CROSSOVER_CMAKE + "' --install '" +
                              CROSSOVER_BUILD_DIR + "' --prefix '" + prefix.path().string() + "'");
  ASSERT_EQ(install.status, 0) << install.output;
  const fs::path binary = prefix / "bin" / "crossover";
  ASSERT_TRUE(fs::exists(binary)) << install.output;
  EXPECT_TRUE(fs::exists(prefix / "share" / "crossover" / "catalog.toml"));
  EXPECT_TRUE(fs::exists(prefix / "share" / "crossover" / "specs" / "disc-2.toml"));

  // From an empty folder, without CROSSOVER_CATALOG: `advise` measures disc-2 for one epoch and
  // prices it on the built-in catalog's instances.
  const xo::testing::TempDir elsewhere("install-cwd");
  const Shell advise = shell("cd '" + elsewhere.path().string() + "' && env -u CROSSOVER_CATALOG " +
                             xo::testing::cli_cache_env() + "'" + binary.string() +
                             "' advise disc-2 --devices cpu --epochs 1 --verbose --out out");
  EXPECT_EQ(advise.status, 0) << advise.output;
  EXPECT_NE(advise.output.find("p5.48xlarge"), std::string::npos) << advise.output;
  EXPECT_TRUE(fs::exists(elsewhere / "out" / "report.html"));
}

// The loader never looks for crossover's libraries in the working folder (an empty entry in the
// binary's RUNPATH, which CMake's padding for the install left there, made it): run from a folder
// holding files named as two of them, it starts (the planted ones, empty here, stopped it with
// "file too short"; a crafted one would have run inside it).
TEST(Install, TheBinaryLoadsNoLibraryFromTheWorkingFolder) {
  const xo::testing::TempDir planted("planted-libraries");
  for (const char* name : {"libtomlplusplus.so.3", "libfmt.so.9", "libdnnl.so.2"})
    std::ofstream(planted.path() / name).flush();
  const Shell version =
      shell("cd '" + planted.path().string() + "' && '" + CROSSOVER_BINARY + "' --version");
  EXPECT_EQ(version.status, 0) << version.output;
  EXPECT_NE(version.output.find("crossover"), std::string::npos) << version.output;
}

}  // namespace

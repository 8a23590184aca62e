// Running the crossover binary as a user does, for the CLI tests: the command's exit code and
// everything it printed, with the tests' own cache folder so that a peak probed while other tests
// load the machine never becomes the user's cached peak.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace xo::testing {

struct CliResult {
  int status;          // the exit code (-1 when the process did not exit)
  std::string output;  // stdout and stderr together
};

// The tests' cache folder (peaks probed once for every CLI test).
inline const std::string& cli_cache_dir() {
  static const std::string dir = [] {
    const auto d = std::filesystem::path(::testing::TempDir()) / "cli_cache";
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

// "XDG_CACHE_HOME='…' ": the environment prefix of a shell command.
inline std::string cli_cache_env() { return "XDG_CACHE_HOME='" + cli_cache_dir() + "' "; }

// `crossover ARGS` through the shell, in `cwd` (default: the tests' own).
inline CliResult run_cli(const std::string& args, const std::filesystem::path& cwd = {}) {
  const std::string cd = cwd.empty() ? "" : "cd '" + cwd.string() + "' && ";
  const std::string cmd =
      cd + cli_cache_env() + std::string(CROSSOVER_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `mpirun ` with what it needs as root in a container and for more ranks than cores.
inline std::string mpirun_command() {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
         "OMPI_MCA_rmaps_base_oversubscribe=1 mpirun ";
}

// run_cli's arguments for `mpirun -np RANKS crossover ARGS`: run_cli starts the binary first, so
// this runs `--version` there and then the job.
inline std::string mpi_job(int ranks, const std::string& args) {
  return "--version >/dev/null && " + mpirun_command() + "-np " + std::to_string(ranks) + " " +
         CROSSOVER_BINARY + " " + args;
}

}  // namespace xo::testing

// Running crossover as a separate process that a test signals, as a supervisor would: started in
// a folder with the tests' cache, its output into files, and whether its signal handler is in
// place yet (a signal sent before that would kill it instead of asking it to stop).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "support/cli.h"

namespace xo::testing {

// Starts `program` (found on the PATH) with `args` in `dir`, with the tests' cache and the
// variables `env`, its stdout into `out` and its stderr into `err` (the same path for both: one
// log; "/dev/null" drops it); returns its pid.
inline pid_t start_program(const std::filesystem::path& dir, const std::string& program,
                           const std::vector<std::string>& args, const std::filesystem::path& out,
                           const std::filesystem::path& err,
                           const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const std::string cache = cli_cache_dir();
  const pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(127);
    setenv("XDG_CACHE_HOME", cache.c_str(), 1);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    if (!freopen(out.c_str(), "w", stdout)) _exit(127);
    if (out == err ? dup2(fileno(stdout), STDERR_FILENO) < 0 : !freopen(err.c_str(), "w", stderr))
      _exit(127);
    std::vector<char*> argv{const_cast<char*>(program.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Starts crossover as start_program does.
inline pid_t start_crossover(const std::filesystem::path& dir, const std::vector<std::string>& args,
                             const std::filesystem::path& out, const std::filesystem::path& err) {
  return start_program(dir, CROSSOVER_BINARY, args, out, err);
}

// Starts `mpirun -np RANKS crossover ARGS` (one log: `log`, with the flags that let OpenMPI run
// as root and oversubscribe the cores); returns mpirun's pid, which hands a SIGINT on to every
// rank.
inline pid_t start_mpi_job(const std::filesystem::path& dir, int ranks,
                           const std::vector<std::string>& args, const std::filesystem::path& log) {
  std::vector<std::string> mpirun_args{"-np", std::to_string(ranks), CROSSOVER_BINARY};
  mpirun_args.insert(mpirun_args.end(), args.begin(), args.end());
  return start_program(dir, "mpirun", mpirun_args, log, log,
                       {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                        {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                        {"OMPI_MCA_rmaps_base_oversubscribe", "1"}});
}

// Whether process `pid` takes `sig` itself: a handler for it (the SigCgt mask of
// /proc/PID/status), or, as crossover does (core/interrupt.h), the signal blocked in its main
// thread (SigBlk) and taken by a thread that waits for it.
inline bool catches(pid_t pid, int sig) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    for (const char* field : {"SigCgt:", "SigBlk:"}) {
      if (line.rfind(field, 0) == 0) {
        const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
        if ((mask >> (sig - 1)) & 1u) return true;
      }
    }
  }
  return false;
}

// Whether any process works in `dir` (its working folder, /proc/PID/cwd): a killed crossover's
// children, which it started there, end at their next safe point after it (PR_SET_PDEATHSIG) and
// may still be writing their checkpoints and results.
inline bool any_process_in(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path folder = fs::canonical(dir, ec);
  if (ec) return false;
  for (const auto& p : fs::directory_iterator("/proc", ec)) {
    const std::string name = p.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code gone;  // ended (or a zombie) since the listing
    if (fs::read_symlink(p.path() / "cwd", gone) == folder) return true;
  }
  return false;
}

// Waits up to `at_most` for no process to work in `dir`; whether none does.
inline bool wait_until_none_works_in(const std::filesystem::path& dir,
                                     std::chrono::seconds at_most) {
  const auto give_up = std::chrono::steady_clock::now() + at_most;
  while (any_process_in(dir)) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The CPU seconds process `pid` has used so far (user and system, /proc/PID/stat's fields 14 and
// 15, in clock ticks); 0 once it is gone. Unlike the wall clock, it grows with the work done
// whatever else the machine runs.
inline double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return 0;
  std::istringstream fields(line.substr(line.rfind(')') + 2));  // after the command's name
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The CPU seconds this process's waited-for children have used (getrusage(RUSAGE_CHILDREN)):
// taken before and after a run_cli, the run's own.
inline double children_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace xo::testing

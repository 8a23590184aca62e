// crossover starting crossover: a trial of `tune`, a model measured by `validate`. Each is a
// process of its own, so that what one run leaves in memory (the heap's layout, OpenMP's threads)
// cannot change another's timings.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace xo {

// The exit status a child reports when it could not be started at all.
inline constexpr int kExitNotStarted = 127;

// The crossover binary the functions below start: this process's own (/proc/self/exe) unless a
// program that embeds the engine (the Python module) names the command it was installed with.
// Set once, before any process is started.
void set_crossover_program(const std::filesystem::path& program);

// Starts this crossover binary with `args`, its output appended to `log`. It ends when this
// process ends (PR_SET_PDEATHSIG), and sees no MPI launcher variables: a child is a process of its
// own, not a rank of the job.
pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log);

// A crossover process started before its job is known, waiting for it: its libraries loaded and
// its `main` reached while the job before it still runs, so that the job starts without a
// process's start (docs/benchmarks.md, "Profiles packed at build time, and what a search
// writes"). Started as spawn starts a child (the same environment, ending with this process),
// with `--parked` as its only argument and nothing for output; `start` sends it the job's
// arguments and log. Unused, it ends when this object goes or this process ends.
class ParkedProcess {
 public:
  ParkedProcess();
  ~ParkedProcess();
  ParkedProcess(const ParkedProcess&) = delete;
  ParkedProcess& operator=(const ParkedProcess&) = delete;

  // Gives the process its job, as spawn(args, log) would start it; its pid. Once only.
  pid_t start(const std::vector<std::string>& args, const std::filesystem::path& log);

 private:
  void end();  // its job's socket closed (it ends) and its end waited for

  pid_t pid_ = -1;
  int job_ = -1;  // the write end of the process's standard input (-1: started or gone)
};

// A parked process's side (`crossover --parked`, from `main`): waits for its job, opens its log as
// spawn opens a child's (output appended, never through a link) and returns the job's arguments;
// ends the process (exit 0) where none comes, kExitNotStarted where the log cannot be opened.
std::vector<std::string> wait_for_job();

// A process's exit code as a shell gives it (128 + signal for a signal).
int exit_status(int status);

// Runs this crossover binary with `args` to its end; its exit code.
int run_child(const std::vector<std::string>& args, const std::filesystem::path& log);

}  // namespace xo

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

// Starts this crossover binary with `args`, its output appended to `log`. It ends when this
// process ends (PR_SET_PDEATHSIG), and sees no MPI launcher variables: a child is a process of its
// own, not a rank of the job.
pid_t spawn(const std::vector<std::string>& args, const std::filesystem::path& log);

// A process's exit code as a shell gives it (128 + signal for a signal).
int exit_status(int status);

// Runs this crossover binary with `args` to its end; its exit code.
int run_child(const std::vector<std::string>& args, const std::filesystem::path& log);

}  // namespace xo

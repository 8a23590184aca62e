// crossover's exit codes, the one list of them: what a script, a parent crossover (`tune`'s
// trials, `validate`'s measurements) or `mpirun` reads of how a process ended.
#pragma once

#include <exception>
#include <string>

namespace xo {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;  // a usage error too: a UserError, a file or a size the
                                         // machine cannot hold
inline constexpr int kExitInternal = 3;  // a failed check: a bug
inline constexpr int kExitDiverged = 4;  // training stopped: the loss became NaN or infinite
inline constexpr int kExitReplayDiffers = 5;  // `replay`: a figure differs beyond the tolerance
inline constexpr int kExitRankLost = 6;       // another rank of the MPI job ended while it ran
// The machine failed it (a full disk, an I/O error, a limit on open files): the same command can
// succeed later.
inline constexpr int kExitMachine = 7;
inline constexpr int kExitInterrupted = 130;  // Ctrl-C, SIGTERM: what had finished is kept

// How a command that threw ended: its exit code and the line it prints on standard error
// ("crossover: error: ..."), for `failure` thrown while `doing` ("crossover tune"). Only an
// InternalError and exceptions from code that should have checked its input reach "internal
// error"; everything a user or a file can cause is a UserError by then, or one of the others
// (an interruption outside the step loop, a machine's failure, host memory, a path). The command
// line and a Dask worker running a job in its own process (the Python module) end alike.
struct Failure {
  int code = kExitInternal;
  std::string line;
};
Failure failure_of(const std::exception_ptr& failure, const std::string& doing);

}  // namespace xo

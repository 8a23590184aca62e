// crossover's exit codes, the one list of them: what a script, a parent crossover (`tune`'s
// trials, `validate`'s measurements) or `mpirun` reads of how a process ended.
#pragma once

namespace xo {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;  // a usage error too: a UserError, a file or a size the
                                         // machine cannot hold
inline constexpr int kExitInternal = 3;  // a failed check: a bug
inline constexpr int kExitDiverged = 4;  // training stopped: the loss became NaN or infinite
inline constexpr int kExitReplayDiffers = 5;  // `replay`: a figure differs beyond the tolerance
inline constexpr int kExitRankLost = 6;  // another rank of the MPI job ended while it ran
inline constexpr int kExitMachine = 7;   // the machine failed it (a full disk, an I/O error, a
                                         // limit on open files): the same command can succeed later
inline constexpr int kExitInterrupted = 130;  // Ctrl-C, SIGTERM: what had finished is kept

}  // namespace xo

// A search across the ranks of an MPI job: rank 0 runs the search and sends each trial's
// `crossover train` arguments to a free rank; every other rank runs the trials it is sent, one at
// a time, each a process of its own, and reports each one's exit code. The trials' files are read
// and written by every rank in --out, so --out must be one folder they all see.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/slots.h"

namespace xo::mpi {
class World;
}

namespace xo {

// Every rank's slot, said by each rank at the start: a GPU by local rank where it has one (and
// `devices` asks for GPUs or is empty), else the CPU with `threads` (--threads) or its share of
// the machine's cores. Rank 0
// first writes a token file in `out` that every rank must read back. Throws UserError naming each
// rank that does not see it. Called on rank 0, while the others are in run_trial_worker.
std::vector<Slot> rank_slots(const mpi::World& world, const std::filesystem::path& out,
                             const std::vector<std::string>& devices, int threads);

// A rank other than 0: says its slot, then runs the trials rank 0 sends, one at a time, until rank
// 0 says the search ended; a stop request or rank 0's interrupt asks the running one to save its
// checkpoint and end. Returns the exit code for the rank (0).
int run_trial_worker(const mpi::World& world, const std::vector<std::string>& devices, int threads);

// Rank 0's side of the messages.
void send_trial(const mpi::World& world, int rank, const std::vector<std::string>& args);
// A job a rank reported ended: (its rank, its exit code); none: no report has come.
std::optional<std::pair<int, int>> receive_ended(const mpi::World& world);
void interrupt_workers(const mpi::World& world);
void end_workers(const mpi::World& world);

}  // namespace xo

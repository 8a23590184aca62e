// An MPI job's end on an error, the same for every command that runs across ranks. What the
// commands say about a run is the jobs' (job/run_notes.h).
#pragma once

#include <exception>

namespace xo::mpi {
class World;
}

namespace xo::cli {

// An error on one rank of an MPI job: printed with the rank, then every rank of the job ends at
// once (2 for bad input, 3 for an internal error, 130 for a stop request), none left waiting in a
// collective.
[[noreturn]] void end_job(const mpi::World& world, const std::exception& e);

}  // namespace xo::cli

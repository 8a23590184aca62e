// What does not need MPI's library: whether a launcher started this process.
#include <cstdlib>
#include <string>

#include "dist/mpi.h"

namespace xo::mpi {

namespace {
// Set for every process a launcher starts: OpenMPI's mpirun, PMI (MPICH, Slurm's srun --mpi=pmi2)
// and PMIx (srun --mpi=pmix, OpenMPI 4+).
constexpr const char* kRankVariables[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
constexpr const char* kPrefixes[] = {"OMPI_", "PMI_", "PMIX_", "PMI_FD", "OPAL_", "PRTE_"};
}  // namespace

bool launched() {
  for (const char* v : kRankVariables) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

bool is_launcher_variable(const std::string& name) {
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace xo::mpi

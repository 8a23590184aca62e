// What does not need MPI's library: whether a launcher started this process.
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <string>

#include "distributed/mpi.h"

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

namespace {
// The first of `names` set to a number, else `otherwise`.
template <size_t N>
int first_number(const char* const (&names)[N], int otherwise) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n <= INT_MAX) return static_cast<int>(n);
  }
  return otherwise;
}
// The job's size, where the launcher gives it (Slurm's for the step, not the allocation).
constexpr const char* kSizeVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_STEP_NUM_TASKS"};
}  // namespace

int launched_rank() { return first_number(kRankVariables, 0); }
int launched_size() { return first_number(kSizeVariables, 1); }

bool is_launcher_variable(const std::string& name) {
  for (const char* p : kPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace xo::mpi

// MPI, the one distributed engine crossover runs on (OpenMPI from Debian; `mpirun` or `srun`
// start the processes). Only this folder includes <mpi.h>; a build without MPI links
// mpi_unavailable.cpp, whose World says so. A process that no launcher started never calls MPI.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xo::mpi {

// Started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx): its environment says so.
bool launched();
// Whether this build has MPI.
bool built_with_mpi();
// The environment variables a launcher sets, to be removed from the environment of a process
// this one starts that is not part of the job (a trial's `crossover train`).
bool is_launcher_variable(const std::string& name);

// The job's processes, initialised on construction and finalised on destruction. Messages are
// strings; tags tell their kinds apart.
class World {
 public:
  World();  // throws UserError where the build has no MPI
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this machine
  int local_size() const { return local_size_; }
  std::string host() const;

  void send(int to, int tag, const std::string& message) const;
  // A message with `tag` from any rank where one has arrived: (its rank, its text).
  std::optional<std::pair<int, std::string>> try_receive(int tag) const;
  // Waits for a message with `tag` from `from`.
  std::string receive(int from, int tag) const;
  // Rank 0's `message` on every rank.
  std::string broadcast(const std::string& message) const;
  // Every rank's `message`, in rank order, on rank 0 (empty elsewhere).
  std::vector<std::string> gather(const std::string& message) const;
  // Ends every rank of the job now with `code` (an error on one rank must not leave the others
  // waiting).
  [[noreturn]] void abort(int code) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  void* local_comm_ = nullptr;
};

}  // namespace xo::mpi

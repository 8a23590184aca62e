// MPI, the one distributed engine crossover runs on (OpenMPI from Debian; `mpirun` or `srun`
// start the processes). Only this folder includes <mpi.h>; a build without MPI links
// mpi_unavailable.cpp, whose World says so. A process that no launcher started never calls MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xo::mpi {

class PeerWatch;

// Started by an MPI launcher (mpirun, mpiexec, srun with PMI/PMIx): its environment says so.
bool launched();
// This process's rank and the job's size as the launcher's environment gives them, before MPI
// starts (0 and 1 where it does not say): for what every rank decides alike before the job
// begins, said once, by rank 0.
int launched_rank();
int launched_size();
// Whether this build has MPI.
bool built_with_mpi();
// The environment variables a launcher sets, to be removed from the environment of a process
// this one starts that is not part of the job (a trial's `crossover train`).
bool is_launcher_variable(const std::string& name);

// The job's processes, initialised on construction and finalised on destruction. Messages are
// strings; tags tell their kinds apart. A World may also be a group of the job's ranks (split):
// its calls then reach that group alone.
class World {
 public:
  World();  // throws UserError where the build has no MPI
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // The group of this World's ranks that pass `member` (in rank order), for those ranks; null
  // for the others. Every rank of this World calls it.
  std::unique_ptr<World> split(bool member) const;
  // The groups of this World's ranks by `color` (each rank in the group of its color, in rank
  // order); and the group of the ranks on this rank's machine. Every rank calls them.
  std::unique_ptr<World> split_by(int color) const;
  std::unique_ptr<World> machine() const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // among the ranks on this machine
  int local_size() const { return local_size_; }
  // The machines the ranks are on, and the most ranks on one of them (equal to every machine's
  // count where hosts() * ranks_per_host() == size()).
  int hosts() const { return hosts_; }
  int ranks_per_host() const { return ranks_per_host_; }
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
  // The job's World watches its other ranks on this machine (distributed/peer_watch.h): one that
  // ends while the job runs is reported by every rank left, which then ends with kExitRankLost,
  // adding `note()` (the last checkpoint, say) to its message. The watch stops in the destructor,
  // and every rank waits there for the others before any leaves.
  void on_lost_rank(std::function<std::string()> note) const;

  // Collectives over every rank of the job, in place: each rank's values replaced by the sum (or
  // maximum) over the ranks. For a given rank count the result is the same on every rank.
  void sum(float* values, int64_t n) const;
  void sum(double* values, int64_t n) const;
  void max(int64_t* values, int64_t n) const;
  void max(double* values, int64_t n) const;
  void barrier() const;
  // A barrier that sleeps while it waits (MPI's own spins on a core): for a rank with nothing to
  // do while others measure on the cores it would take.
  void wait_quietly() const;
  // Sends `bytes` at `send` to rank `to` while receiving as many into `receive` from `from` (one
  // step of a ring).
  void exchange(const void* send, void* receive, int64_t bytes, int to, int from) const;
  // Rank 0's `bytes` bytes at `data` on every rank.
  void broadcast(void* data, int64_t bytes) const;

 private:
  explicit World(void* comm);  // a group: owns `comm` (MPI_Comm*)
  void describe();             // rank, size and the local ones, of comm_
  void watch_local_ranks();    // the job's World: its PeerWatch
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, hosts_ = 1, ranks_per_host_ = 1;
  void* comm_ = nullptr;              // MPI_Comm*
  void* local_comm_ = nullptr;        // MPI_Comm*
  bool owns_mpi_ = false;             // the job's World: finalises MPI
  std::unique_ptr<PeerWatch> watch_;  // the job's World: its ranks on this machine
  friend class PendingSums;
  friend class SharedMemory;
};

// Memory that every rank of a World on one machine maps (an MPI-3 shared-memory window): each rank
// gives `bytes` of it and reads and writes any rank's. Each rank's memory starts on a page
// (kPageBytes): MPI lays the ranks' parts end to end, so after a part whose size is not a multiple
// of 64 bytes the next rank's buffers would lie off their cache lines (measured:
// docs/benchmarks.md, "Ranks' buffers on their lines"). fence() is a barrier that also makes the
// writes of each rank before it visible to every rank after it. Collective: the World's ranks
// create it together and destroy it together. The World must lie on one machine
// (local_size() == size()).
class SharedMemory {
 public:
  static constexpr int64_t kPageBytes = 4096;
  SharedMemory(const World& world, int64_t bytes);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  void* of(int rank) const { return bases_[static_cast<size_t>(rank)]; }
  void fence() const;

 private:
  void* window_ = nullptr;  // MPI_Win*
  void* comm_ = nullptr;    // the World's MPI_Comm*
  std::vector<void*> bases_;
};

// Non-blocking in-place sums of float ranges over every rank (MPI_Iallreduce), for reducing
// gradients while backward computes the layers below. MPI moves a message on only inside MPI
// calls: progress() between layers keeps the sums going. Started in the same order on every rank.
class PendingSums {
 public:
  explicit PendingSums(const World& world);
  ~PendingSums();
  PendingSums(const PendingSums&) = delete;
  PendingSums& operator=(const PendingSums&) = delete;

  void start(float* values, int64_t n);
  void progress();
  void wait();  // every sum started is complete

 private:
  void* requests_ = nullptr;  // std::vector<MPI_Request>
  void* comm_ = nullptr;      // the World's MPI_Comm*
};

}  // namespace xo::mpi

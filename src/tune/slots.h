// Where a search's trials run, and the runner of their processes. A slot is a device of a rank
// with the CPU threads each trial gets there; it runs one trial at a time. This process's slots
// start `crossover train` processes (distributed/process.h); another rank's are sent the same
// arguments and start them there (tune/ranks.h). The runner knows processes and ranks, not
// trials: the search decides what runs where.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process.h"
#include "tune/record.h"

namespace xo::mpi {
class World;
}

namespace xo {

struct Slot {
  int rank = 0;  // the MPI rank whose device it is (0 without MPI)
  std::string device;
  int threads = 0;   // per trial on a CPU; 0 on a GPU
  std::string host;  // the rank's machine (under MPI)
};

// Without MPI: each device's chosen count of slots, each with its share of the cores (or
// --threads, `threads` > 0).
std::vector<Slot> local_slots(const std::vector<ParallelChoice>& choices, int threads, int cores);

// What runs a search's jobs: each job a `crossover train` or `train-group` command line (its
// trials' folders named in it) on a slot, one job a slot at a time. TrialRunner runs them on this
// machine and the MPI ranks; the Python module's runner sends them to a Dask cluster's workers
// (python/crossover/dask.py).
class JobRunner {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~JobRunner() = default;

  virtual const std::vector<Slot>& slots() const = 0;
  virtual bool busy(size_t slot) const = 0;
  bool any_busy() const;
  // Takes in what changed where the jobs run: slots added at the end of slots() (a worker joined
  // a Dask cluster) and slots gone (their worker left: no job starts there again).
  virtual void refresh() {}
  virtual bool gone(size_t /*slot*/) const { return false; }

  // Starts `args` on a free slot, the job's output appended to `log`.
  virtual void start(size_t slot, const std::vector<std::string>& args,
                     const std::filesystem::path& log) = 0;

  struct Ended {
    size_t slot = 0;
    int code = 0;        // the job's exit code, as a shell gives it
    double seconds = 0;  // since start()
  };
  // The jobs that ended since the last call, freed; their trials' files are in their folders.
  virtual std::vector<Ended> collect_ended() = 0;
  // Waits until a job ends, at most `at_most`.
  virtual void wait_for_end(std::chrono::milliseconds at_most) const = 0;

  // The next job is ready and no slot is free: a runner may prepare its start (TrialRunner
  // parks a process).
  virtual void park() {}
  // No next job will take what park prepared (the search ends, or stops).
  virtual void unpark() {}
  // A stop request: each running job is asked to save its trials' checkpoints and end.
  virtual void interrupt() = 0;
  // The search is over.
  virtual void release_workers() {}
};

class TrialRunner final : public JobRunner {
 public:
  // `world`: the job's ranks where a launcher started it (null: this process's slots only).
  TrialRunner(std::vector<Slot> slots, const mpi::World* world);
  ~TrialRunner() override;  // closes the pidfds of trials still running
  TrialRunner(const TrialRunner&) = delete;
  TrialRunner& operator=(const TrialRunner&) = delete;

  const std::vector<Slot>& slots() const override { return slots_; }
  bool busy(size_t slot) const override { return state_[slot].busy; }

  // A process here, or a job for the slot's rank.
  void start(size_t slot, const std::vector<std::string>& args,
             const std::filesystem::path& log) override;
  // This process's in slot order, then the other ranks' in the order their messages came.
  std::vector<Ended> collect_ended() override;
  // Waits for one of this process's trials (the whole of `at_most` where trials run on other
  // ranks, whose ends come as messages, or where the kernel has no pidfd_open).
  void wait_for_end(std::chrono::milliseconds at_most) const override;

  // Starts the process of the next job before its slot frees (distributed/process.h's
  // ParkedProcess), so that the next start here takes it instead of a process's start; one at
  // most, and none for trials on other ranks.
  void park() override;
  void unpark() override { parked_.reset(); }

  // SIGINT here, a message to the other ranks. Ctrl-C reaches this process's trials by itself
  // (one process group); SIGTERM to this process alone is passed on by this.
  void interrupt() override;
  // The other ranks leave their worker loops.
  void release_workers() override;

 private:
  struct State {
    bool busy = false;
    pid_t pid = -1;  // this rank's slots
    int pidfd = -1;  // readable when the process ends (-1: none, the kernel has no pidfd_open)
    Clock::time_point started;
  };
  bool ranks() const;  // trials run on other ranks too

  std::vector<Slot> slots_;
  std::vector<State> state_;
  const mpi::World* world_;
  std::unique_ptr<ParkedProcess> parked_;
};

}  // namespace xo

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

class TrialRunner {
 public:
  using Clock = std::chrono::steady_clock;

  // `world`: the job's ranks where a launcher started it (null: this process's slots only).
  TrialRunner(std::vector<Slot> slots, const mpi::World* world);
  ~TrialRunner();  // closes the pidfds of trials still running
  TrialRunner(const TrialRunner&) = delete;
  TrialRunner& operator=(const TrialRunner&) = delete;

  const std::vector<Slot>& slots() const { return slots_; }
  bool busy(size_t slot) const { return state_[slot].busy; }
  bool any_busy() const;

  // Starts `args` on a free slot: a process here, its output appended to `log`, or a job for the
  // slot's rank.
  void start(size_t slot, const std::vector<std::string>& args, const std::filesystem::path& log);

  struct Ended {
    size_t slot = 0;
    int code = 0;        // the process's exit code, as a shell gives it
    double seconds = 0;  // since start()
  };
  // The jobs that ended since the last call, freed: this process's in slot order, then the other
  // ranks' in the order their messages came.
  std::vector<Ended> collect_ended();
  // Waits until one of this process's trials ends, at most `at_most` (the whole of it where trials
  // run on other ranks, whose ends come as messages, or where the kernel has no pidfd_open).
  void wait_for_end(std::chrono::milliseconds at_most) const;

  // Starts the process of the next job before its slot frees (distributed/process.h's
  // ParkedProcess), so that the next start here takes it instead of a process's start; one at
  // most, and none for trials on other ranks.
  void park();
  // The parked process, unused, ends (the search ends, or stops).
  void unpark() { parked_.reset(); }

  // A stop request: each running trial is asked to save its checkpoint and end (SIGINT here, a
  // message to the other ranks). Ctrl-C reaches this process's trials by itself (one process
  // group); SIGTERM to this process alone is passed on by this.
  void interrupt();
  // The search is over: the other ranks leave their worker loops.
  void release_workers();

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

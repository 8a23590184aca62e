// The other ranks of an MPI job on this machine, watched from a thread of each rank: one that ends
// while the job runs (killed, crashed, out of memory) is reported by every rank left, naming its
// rank, process and host, and they end too with kExitRankLost. Without it a survivor waits in a
// collective for a rank that will never come until the launcher kills it without a word from
// crossover. Ranks on other machines are the launcher's to watch (it ends the job).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace xo::mpi {

// A rank's process: its pid and host, and its start time (the kernel's, in clock ticks after
// boot), which tells it from a later process given the same pid.
struct RankProcess {
  int rank = 0;
  pid_t pid = 0;
  uint64_t start = 0;
  std::string host;
};

// This process, as rank `rank` on `host`.
RankProcess this_process(int rank, const std::string& host);
// Whether `p` (on this machine) still runs: the pid is there, not a zombie, and started when `p`
// did.
bool still_runs(const RankProcess& p);

class PeerWatch {
 public:
  // Watches `peers` (the job's other ranks on this machine) for rank `self` of `size`, every
  // `interval_ms`.
  PeerWatch(std::vector<RankProcess> peers, RankProcess self, int size, int interval_ms = 100);
  ~PeerWatch();  // stops watching (call before a rank may leave the job)
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // What to add to the report of a lost rank (the last checkpoint, say); may be called any time.
  void set_note(std::function<std::string()> note);

 private:
  void watch();
  [[noreturn]] void lost(const RankProcess& peer);

  std::vector<RankProcess> peers_;
  RankProcess self_;
  int size_ = 1;
  int interval_ms_ = 100;
  std::mutex mutex_;
  int wake_fd_ = -1;  // an eventfd: written to stop the watch at once
  bool stop_ = false;
  std::function<std::string()> note_;
  std::thread thread_;
};

}  // namespace xo::mpi

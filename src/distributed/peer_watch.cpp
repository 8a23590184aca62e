// A rank watching the job's other ranks on its machine (distributed/peer_watch.h), through /proc.
#include "distributed/peer_watch.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/exit_codes.h"
#include "core/format.h"

namespace xo::mpi {
namespace {

// The state letter and start time of process `pid` from /proc/PID/stat; ('\0', 0) when it is gone.
// The fields after the command name, which may hold spaces and parentheses, are counted from its
// last ')': state is the 3rd field, starttime the 22nd.
std::pair<char, uint64_t> stat_of(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text;
  if (!in || !std::getline(in, text)) return {'\0', 0};
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {'\0', 0};
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  char state = '\0';
  uint64_t start = 0;
  for (int i = 3; fields >> field; ++i) {
    if (i == 3) state = field[0];
    if (i == 22) {
      start = std::strtoull(field.c_str(), nullptr, 10);
      break;
    }
  }
  return {state, start};
}

}  // namespace

RankProcess this_process(int rank, const std::string& host) {
  return {rank, getpid(), stat_of(getpid()).second, host};
}

bool still_runs(const RankProcess& p) {
  const auto [state, start] = stat_of(p.pid);
  return state != '\0' && state != 'Z' && state != 'X' && start == p.start;
}

PeerWatch::PeerWatch(std::vector<RankProcess> peers, RankProcess self, int size, int interval_ms)
    : peers_(std::move(peers)), self_(std::move(self)), size_(size), interval_ms_(interval_ms) {
  if (peers_.empty()) return;
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { watch(); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void PeerWatch::set_note(std::function<std::string()> note) {
  std::lock_guard lock(mutex_);
  note_ = std::move(note);
}

// Each peer's pidfd becomes readable the moment it ends (as near as the kernel can tell, ahead of
// the launcher, which then stops forwarding output); /proc is read too, every interval, for a
// kernel without pidfds and for a pid that was another process's by the time it was opened.
void PeerWatch::watch() {
  std::vector<pollfd> fds;
  for (const RankProcess& peer : peers_) {
    fds.push_back({static_cast<int>(syscall(SYS_pidfd_open, peer.pid, 0)), POLLIN, 0});
  }
  fds.push_back({wake_fd_, POLLIN, 0});  // the destructor's
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const int ready = poll(fds.data(), fds.size(), interval_ms_);
    lock.lock();
    if (stop_) break;
    for (size_t i = 0; i < peers_.size(); ++i) {
      const bool ended = ready > 0 && fds[i].fd >= 0 && (fds[i].revents & (POLLIN | POLLHUP));
      if (ended || !still_runs(peers_[i])) lost(peers_[i]);
    }
  }
  fds.pop_back();
  for (const pollfd& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
}

void PeerWatch::lost(const RankProcess& peer) {
  std::string note;
  try {
    if (note_) note = note_();
  } catch (const std::exception&) {
  }
  std::fflush(stdout);
  fmt::print(stderr,
             "crossover: rank {} of {} (process {} on {}) ended while the job ran (killed, or it "
             "failed: its own message, if it left one, is above): rank {} stops too (exit {}){}\n",
             peer.rank, size_, peer.pid, terminal_safe(peer.host), self_.rank, kExitRankLost,
             note.empty() ? "" : "; " + note);
  std::fflush(stderr);
  std::_Exit(kExitRankLost);
}

}  // namespace xo::mpi

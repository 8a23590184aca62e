#include "tune/slots.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "backend/backend.h"
#include "distributed/mpi.h"
#include "distributed/process.h"
#include "tune/parallel.h"
#include "tune/ranks.h"

namespace xo {
namespace {

double seconds_since(TrialRunner::Clock::time_point t) {
  return std::chrono::duration<double>(TrialRunner::Clock::now() - t).count();
}

}  // namespace

std::vector<Slot> local_slots(const std::vector<ParallelChoice>& choices, int threads, int cores) {
  std::vector<Slot> slots;
  for (const ParallelChoice& c : choices) {
    const bool cpu = device_kind_of(c.device) == DeviceKind::Cpu;
    const int each = trial_threads(threads, cores, c.k);
    for (int i = 0; i < c.k; ++i) slots.push_back({0, c.device, cpu ? each : 0});
  }
  return slots;
}

TrialRunner::TrialRunner(std::vector<Slot> slots, const mpi::World* world)
    : slots_(std::move(slots)), state_(slots_.size()), world_(world) {}

TrialRunner::~TrialRunner() {
  for (const State& s : state_) {
    if (s.pidfd >= 0) ::close(s.pidfd);
  }
}

bool TrialRunner::ranks() const { return world_ != nullptr && world_->size() > 1; }

bool JobRunner::any_busy() const {
  for (size_t s = 0; s < slots().size(); ++s)
    if (busy(s)) return true;
  return false;
}

void TrialRunner::start(size_t slot, const std::vector<std::string>& args,
                        const std::filesystem::path& log) {
  State& s = state_[slot];
  s.busy = true;
  s.started = Clock::now();
  if (slots_[slot].rank == 0) {
    s.pid = parked_ ? parked_->start(args, log) : spawn(args, log);
    parked_.reset();
    s.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, s.pid, 0));
  } else {
    send_trial(*world_, slots_[slot].rank, args);
  }
}

std::vector<TrialRunner::Ended> TrialRunner::collect_ended() {
  std::vector<Ended> ended;
  auto end = [&](size_t slot, int code) {
    state_[slot].busy = false;
    state_[slot].pid = -1;
    if (state_[slot].pidfd >= 0) ::close(state_[slot].pidfd);
    state_[slot].pidfd = -1;
    ended.push_back({slot, code, seconds_since(state_[slot].started)});
  };
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!state_[i].busy || slots_[i].rank != 0) continue;
    int status = 0;
    if (waitpid(state_[i].pid, &status, WNOHANG) == state_[i].pid) end(i, exit_status(status));
  }
  if (!ranks()) return ended;
  while (const std::optional<std::pair<int, int>> message = receive_ended(*world_)) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (state_[i].busy && slots_[i].rank == message->first) {
        end(i, message->second);
        break;
      }
    }
  }
  return ended;
}

void TrialRunner::wait_for_end(std::chrono::milliseconds at_most) const {
  std::vector<pollfd> ends;
  bool every = true;  // every running trial has a pidfd
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!state_[i].busy || slots_[i].rank != 0) continue;
    every = every && state_[i].pidfd >= 0;
    ends.push_back({state_[i].pidfd, POLLIN, 0});
  }
  if (ranks() || !every || ends.empty()) {
    std::this_thread::sleep_for(at_most);
    return;
  }
  // A signal (Ctrl-C) ends the wait early too; the search then looks at what ended.
  ::poll(ends.data(), ends.size(), static_cast<int>(at_most.count()));
}

void TrialRunner::park() {
  if (!parked_ && !ranks()) parked_ = std::make_unique<ParkedProcess>();
}

void TrialRunner::interrupt() {
  unpark();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (state_[i].busy && slots_[i].rank == 0) kill(state_[i].pid, SIGINT);
  }
  if (ranks()) interrupt_workers(*world_);
}

void TrialRunner::release_workers() {
  unpark();
  if (ranks()) end_workers(*world_);
}

}  // namespace xo

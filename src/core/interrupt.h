// Ctrl-C handling: the first SIGINT/SIGTERM asks crossover to stop at the next safe point; one
// that comes a second or more later ends the process at once, once a checkpoint being written is
// whole. Signals within a second of the first are the same request: `timeout` relays the signal it
// gets to its child and to its process group, so a Ctrl-C (or `kill -INT -- -PGID`) reaches a
// process under it two or three times within microseconds.
//
// Safe points: the trainer finishes its step and returns what completed (results so far are
// written); work outside the step loop (loading or generating data, probing peaks, evaluating,
// hashing) polls throw_if_stop_requested often enough to stop within a second or two, and the
// command catches Interrupted where it can keep what finished (cli/session.cpp, cli/main.cpp).
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <utility>

namespace xo {

// Blocks SIGINT and SIGTERM in this thread (and so in every thread it starts from then on) and
// takes them on a thread of their own. Call it first in main, before any other thread starts.
void install_interrupt_handler();
// SIGINT and SIGTERM as before install_interrupt_handler, in this thread: a forked child before
// it executes another program.
void unblock_stop_signals();
// SIGINT and SIGTERM blocked in this thread and those it starts: a worker of a process whose
// signals another thread takes (the Python module's jobs: Python's handler, on its main thread).
void block_stop_signals();
// The message the first signal prints stays unwritten: the ranks of an MPI job other than rank 0,
// which print nothing (mpirun hands Ctrl-C to every rank).
void quiet_interrupt_message();
bool stop_requested();
// Signals this long after the first are a new request (quit now); sooner, the same one relayed.
inline constexpr double kSameStopRequestSeconds = 1.0;

// While one is alive, a quit-now signal waits for its end: the process ends when the last one
// does. Held around writing a checkpoint (its files, its folder's pruning), so that quitting never
// leaves half a checkpoint and keeps the one being written.
class QuitAfterThis {
 public:
  QuitAfterThis();
  ~QuitAfterThis();
  QuitAfterThis(const QuitAfterThis&) = delete;
  QuitAfterThis& operator=(const QuitAfterThis&) = delete;
};
// What the first signal does, and its undoing: for tests, and for a front end that takes the
// signals itself (the Python module turns a KeyboardInterrupt into a stop request).
void request_stop();
void clear_stop_request();

// A stop request noticed outside the step loop: what() names the work it cut short ("loading
// the CSV file a.csv").
class Interrupted : public std::exception {
 public:
  explicit Interrupted(std::string doing) : doing_(std::move(doing)) {}
  const char* what() const noexcept override { return doing_.c_str(); }

 private:
  std::string doing_;
};

// Throws Interrupted(doing) once a stop is requested.
inline void throw_if_stop_requested(const char* doing) {
  if (stop_requested()) throw Interrupted(doing);
}

// The loops' poll: true every kStopPollEvery-th iteration i (a flag read is cheap, but not free
// in a loop of a few nanoseconds a turn).
constexpr int64_t kStopPollEvery = int64_t{1} << 14;
inline bool stop_poll_due(int64_t i) { return (i & (kStopPollEvery - 1)) == 0; }

}  // namespace xo

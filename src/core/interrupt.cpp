#include "core/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace xo {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_quiet{false};

// The quit-now signal's wait for the writes under way (QuitAfterThis): how many are, and the exit
// status to end with once they are done (0: none asked for).
std::mutex g_quit_mutex;
int g_holds = 0;
int g_quit_status = 0;

// SIGINT and SIGTERM, the signals that ask for a stop.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

double monotonic_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void say(const char* text, size_t size) {
  if (g_quiet) return;
  [[maybe_unused]] auto n = write(STDERR_FILENO, text, size);
}

// Ends the process with `status`: what stdout holds is written first where no thread is printing
// (a report cut short is better than none; a lock held elsewhere is not waited for).
[[noreturn]] void quit(int status) {
  if (ftrylockfile(stdout) == 0) {
    fflush_unlocked(stdout);
    funlockfile(stdout);
  }
  _exit(status);
}

// The one thread that takes the stop signals (every other thread blocks them): the first asks
// for a stop; one a second or more later ends the process, at once or at the end of the
// checkpoint being written. No handler runs on a working thread's stack: one that did (a
// handler's frame pushed below the interrupted thread's stack pointer) corrupted the heap of a
// stopped fused group in 8 of 16 runs (oneDNN's JIT products on the workers:
// docs/benchmarks.md), and a handler's locals on AddressSanitizer's fake stack read as an
// overflow.
void take_stop_signals() {
  const sigset_t set = stop_signals();
  double first = 0;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    const double now = monotonic_seconds();
    if (!g_stop.exchange(true)) {
      first = now;
      constexpr char kMessage[] =
          "\ncrossover: stopping at the next safe point, keeping a checkpoint (Ctrl-C again to "
          "quit now)\n";
      say(kMessage, sizeof(kMessage) - 1);
      continue;
    }
    if (now - first < kSameStopRequestSeconds) continue;  // the first, relayed
    std::lock_guard lock(g_quit_mutex);
    if (g_holds == 0) quit(128 + sig);
    if (g_quit_status == 0) {
      constexpr char kMessage[] =
          "\ncrossover: quitting once the checkpoint being written is whole\n";
      say(kMessage, sizeof(kMessage) - 1);
    }
    g_quit_status = 128 + sig;
  }
}

}  // namespace

QuitAfterThis::QuitAfterThis() {
  std::lock_guard lock(g_quit_mutex);
  ++g_holds;
}

QuitAfterThis::~QuitAfterThis() {
  std::lock_guard lock(g_quit_mutex);
  if (--g_holds == 0 && g_quit_status != 0) quit(g_quit_status);
}

void install_interrupt_handler() {
  // Blocked here, before any other thread starts: the threads started from now on (OpenMP's,
  // oneDNN's, the checkpoint writers, the sampler) inherit the mask.
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(take_stop_signals).detach();
}

void unblock_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void quiet_interrupt_message() { g_quiet = true; }

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop = true; }
void clear_stop_request() { g_stop = false; }

}  // namespace xo

#include "core/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace xo {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_quiet{false};

// SIGINT and SIGTERM, the signals that ask for a stop.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The one thread that takes the stop signals (every other thread blocks them): the first asks
// for a stop, a second ends the process at once. No handler runs on a working thread's stack:
// one that did (a handler's frame pushed below the interrupted thread's stack pointer) corrupted
// the heap of a stopped fused group in 8 of 16 runs (oneDNN's JIT products on the workers:
// docs/benchmarks.md), and a handler's locals on AddressSanitizer's fake stack read as an
// overflow.
void take_stop_signals() {
  const sigset_t set = stop_signals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (g_stop.exchange(true)) _exit(128 + sig);
    if (g_quiet) continue;
    constexpr char kMessage[] =
        "\ncrossover: stopping at the next safe point (again to quit now)\n";
    [[maybe_unused]] auto n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  }
}

}  // namespace

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

void quiet_interrupt_message() { g_quiet = true; }

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop = true; }
void clear_stop_request() { g_stop = false; }

}  // namespace xo

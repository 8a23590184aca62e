#include "core/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstdlib>

namespace xo {
namespace {

volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_quiet = 0;

void on_signal(int sig) {
  if (g_stop) _exit(128 + sig);
  g_stop = 1;
  if (g_quiet) return;
  // Static: a handler's locals may live on AddressSanitizer's fake stack, which a signal can
  // interrupt mid-frame (a false heap-buffer-overflow report on write()).
  static constexpr char kMessage[] =
      "\ncrossover: stopping at the next safe point (again to quit now)\n";
  [[maybe_unused]] auto n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

void quiet_interrupt_message() { g_quiet = 1; }

bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }
void clear_stop_request() { g_stop = 0; }

}  // namespace xo

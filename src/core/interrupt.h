// Ctrl-C handling: the first SIGINT/SIGTERM asks long loops to stop at the next safe point (the
// trainer finishes its step, results so far are written); a second one ends the process at once.
#pragma once

namespace xo {

void install_interrupt_handler();
bool stop_requested();

}  // namespace xo

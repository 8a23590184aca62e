#include "cli/messages.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "distributed/mpi.h"

namespace xo::cli {

void end_job(const mpi::World& world, const std::exception& e) {
  const bool interrupted = dynamic_cast<const Interrupted*>(&e) != nullptr;
  const bool user = interrupted || dynamic_cast<const UserError*>(&e) != nullptr;
  fmt::print(stderr, "crossover: {}{}: {} (rank {} of {}; ending every rank)\n",
             user ? "" : "internal ", interrupted ? "stopped" : "error", message_safe(e.what()),
             world.rank(), world.size());
  std::fflush(stderr);
  world.abort(interrupted ? kExitInterrupted : user ? kExitBadInput : kExitInternal);
}

}  // namespace xo::cli

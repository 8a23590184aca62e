#include "core/exit_codes.h"

#include <fmt/format.h>

#include <filesystem>
#include <new>
#include <stdexcept>

#include "core/error.h"
#include "core/format.h"
#include "core/interrupt.h"

namespace xo {

Failure failure_of(const std::exception_ptr& failure, const std::string& doing) {
  try {
    std::rethrow_exception(failure);
  } catch (const Interrupted& e) {
    // SIGINT/SIGTERM outside the step loop: what had finished is kept (the results written after
    // every run, a checkpoint); the unfinished piece of work is named.
    return {kExitInterrupted, fmt::format("crossover: stopped while {} (what had finished is kept)",
                                          message_safe(e.what()))};
  } catch (const MachineFailure& e) {
    // The machine failed it (a full disk, a limit on files): the same command can succeed later,
    // which its exit code says (a search retries such a trial).
    return {kExitMachine, fmt::format("crossover: error: {}", message_safe(e.what()))};
  } catch (const UserError& e) {  // OutOfMemory too: the device, the size, what is free
    // A message may echo a name from a file (a model, a key, a path): shown, never acted on (its
    // own line breaks kept, every other control character escaped).
    return {kExitBadInput, fmt::format("crossover: error: {}", message_safe(e.what()))};
  } catch (const std::bad_alloc&) {
    // The host ran out outside the backends' allocations (a data set, a kernel's own buffers):
    // the same remedy as the device's OutOfMemory, not a bug.
    return {kExitBadInput,
            fmt::format("crossover: error: out of host memory during `{}` (a smaller model, batch "
                        "or data set needs less)",
                        doing)};
  } catch (const std::length_error& e) {
    // A container asked for more elements than it can address: a size from the input, too big
    // for any memory.
    return {kExitBadInput,
            fmt::format("crossover: error: out of host memory during `{}`: {}", doing, e.what())};
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave (or a folder under it) that cannot be created, read or replaced.
    const std::string paths = e.path2().empty()
                                  ? e.path1().string()
                                  : fmt::format("{} -> {}", e.path1().string(), e.path2().string());
    return {machine_errno(e.code().value()) ? kExitMachine : kExitBadInput,
            fmt::format("crossover: error: {}: {} (during `{}`)", terminal_safe(paths),
                        e.code().message(), doing)};
  } catch (const std::exception& e) {
    return {kExitInternal, fmt::format("crossover: internal error: {}", message_safe(e.what()))};
  } catch (...) {
    return {kExitInternal, "crossover: internal error: an exception of an unknown type"};
  }
}

}  // namespace xo

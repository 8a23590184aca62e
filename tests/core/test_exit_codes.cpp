// How a command that threw ends (core/exit_codes.h's failure_of): the exit code and the line the
// `crossover` command prints, and a Dask worker's in-process job returns, for each kind of failure.
#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/interrupt.h"

namespace xo {
namespace {

TEST(ExitCodes, EachFailureEndsWithItsCodeAndLine) {
  struct Case {
    const char* what;
    std::function<void()> fail;
    int code;
    std::string line;
  };
  const std::vector<Case> cases = {
      {"bad input", [] { throw UserError("spec.toml:3: batch: expected a positive integer"); },
       kExitBadInput, "crossover: error: spec.toml:3: batch: expected a positive integer"},
      {"the device's memory", [] { throw OutOfMemory("cuda:0: 80 GiB asked", 1); }, kExitBadInput,
       "crossover: error: cuda:0: 80 GiB asked"},
      {"the machine's fault: the same command can succeed later",
       [] { throw MachineFailure("out/t01: no space left on the device"); }, kExitMachine,
       "crossover: error: out/t01: no space left on the device"},
      {"stopped outside the step loop", [] { throw Interrupted("loading the data"); },
       kExitInterrupted, "crossover: stopped while loading the data (what had finished is kept)"},
      {"host memory", [] { throw std::bad_alloc(); }, kExitBadInput,
       "crossover: error: out of host memory during `crossover train-group` (a smaller model, "
       "batch or data set needs less)"},
      {"a path that cannot be written",
       [] {
         throw std::filesystem::filesystem_error(
             "mkdir", "/ro/out", std::make_error_code(std::errc::permission_denied));
       },
       kExitBadInput,
       "crossover: error: /ro/out: Permission denied (during `crossover train-group`)"},
      {"a full disk under a path",
       [] {
         throw std::filesystem::filesystem_error(
             "write", "/full/out", std::make_error_code(std::errc::no_space_on_device));
       },
       kExitMachine,
       "crossover: error: /full/out: No space left on device (during `crossover train-group`)"},
      {"a failed check", [] { throw InternalError("plan: buffer 3 unassigned"); }, kExitInternal,
       "crossover: internal error: plan: buffer 3 unassigned"},
      {"not even a std::exception", [] { throw 42; }, kExitInternal,
       "crossover: internal error: an exception of an unknown type"},
      {"a control character in a message is shown, never acted on",
       [] { throw UserError("bad \x1b[2J name"); }, kExitBadInput,
       "crossover: error: bad \\x1b[2J name"},
  };
  for (const Case& c : cases) {
    try {
      c.fail();
      ADD_FAILURE() << c.what << ": did not throw";
    } catch (...) {
      const Failure f = failure_of(std::current_exception(), "crossover train-group");
      EXPECT_EQ(f.code, c.code) << c.what;
      EXPECT_EQ(f.line, c.line) << c.what;
    }
  }
}

}  // namespace
}  // namespace xo

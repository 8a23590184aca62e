// Error types shared by every layer: a user-facing error carries a message the user can act on
// (file, line, field, what was expected); internal failures carry expression, file and line.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace xo {

// Bad input from the user: a spec, a data file, a weights file or a flag. The message names the
// file (and line/key where there is one) and says what was expected. What it quotes from a file
// is kept whole and printable: control characters and NUL become escapes (core/format.h's
// message_safe), the message's own line breaks stay.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message);
  explicit UserError(const char* message) : UserError(std::string(message)) {}
};

// An allocation a device could not satisfy (the host's memory, for the CPU). A UserError: the
// remedy is the user's (a smaller model or batch, another device), and the message names the device
// and the size that was asked for.
class OutOfMemory : public UserError {
 public:
  OutOfMemory(const std::string& message, int64_t requested_bytes)
      : UserError(message), requested_bytes_(requested_bytes) {}
  int64_t requested_bytes() const { return requested_bytes_; }

 private:
  int64_t requested_bytes_ = 0;
};

// The machine, not the input, failed the work: a full disk or quota, an I/O error, a limit on open
// files. A UserError (the message names the file and the cause) whose command ends with
// kExitMachine: the same command can succeed once the machine has room, and a search retries a
// trial that failed so when it runs again.
class MachineFailure : public UserError {
 public:
  using UserError::UserError;
};

// Whether errno `err` says the machine failed (ENOSPC, EDQUOT, EIO, EMFILE, ENFILE, ENOMEM), not
// the input.
bool machine_errno(int err);
// Throws MachineFailure where machine_errno(err), else UserError, with `message`.
[[noreturn]] void throw_for_errno(int err, const std::string& message);

// A library call or an internal invariant failed; the message carries the expression and location.
class InternalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_internal(const char* expr, const std::string& detail, const char* file,
                                 int line);

}  // namespace xo

// Checks an internal invariant; on failure throws InternalError with the expression and location.
#define XO_ASSERT(cond)                                               \
  do {                                                                \
    if (!(cond)) ::xo::throw_internal(#cond, "", __FILE__, __LINE__); \
  } while (0)

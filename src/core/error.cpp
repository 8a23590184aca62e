#include "core/error.h"

#include <fmt/format.h>

#include <cerrno>

#include "core/format.h"

namespace xo {

UserError::UserError(const std::string& message) : std::runtime_error(message_safe(message)) {}

void throw_internal(const char* expr, const std::string& detail, const char* file, int line) {
  throw InternalError(fmt::format("{}:{}: check failed: {}{}{}", file, line, expr,
                                  detail.empty() ? "" : ": ", detail));
}

bool machine_errno(int err) {
  return err == ENOSPC || err == EDQUOT || err == EIO || err == EMFILE || err == ENFILE ||
         err == ENOMEM;
}

void throw_for_errno(int err, const std::string& message) {
  if (machine_errno(err)) throw MachineFailure(message);
  throw UserError(message);
}

}  // namespace xo

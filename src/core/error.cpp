#include "core/error.h"

#include <fmt/format.h>

#include "core/format.h"

namespace xo {

UserError::UserError(const std::string& message) : std::runtime_error(message_safe(message)) {}

void throw_internal(const char* expr, const std::string& detail, const char* file, int line) {
  throw InternalError(fmt::format("{}:{}: check failed: {}{}{}", file, line, expr,
                                  detail.empty() ? "" : ": ", detail));
}

}  // namespace xo

#include "core/error.h"

#include <fmt/format.h>

namespace xo {

void throw_internal(const char* expr, const std::string& detail, const char* file, int line) {
  throw InternalError(fmt::format("{}:{}: check failed: {}{}{}", file, line, expr,
                                  detail.empty() ? "" : ": ", detail));
}

}  // namespace xo

// Wall-clock time as results record it.
#pragma once

#include <string>

namespace xo {

// Now, in UTC, as ISO 8601 ("2026-11-22T18:05:24Z").
std::string utc_now();

}  // namespace xo

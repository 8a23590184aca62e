// The description of the machine and build that every result carries (what google/benchmark calls
// the context): CPU, cores, memory, OS, compiler, flags, library versions, date.
#pragma once

#include <nlohmann/json.hpp>

namespace xo {

nlohmann::json describe_machine();

}  // namespace xo

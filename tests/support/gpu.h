// Whether this machine has a GPU that crossover can use, for the tests that skip without one
// (visibly: GTEST_SKIP with the reason).
#pragma once

#include <string>

#include "backend/backend.h"

namespace xo::testing {

// True when a "cuda" device is available; else `why` (if given) gets the reasons there is none.
inline bool gpu_present(std::string* why = nullptr) {
  const DeviceList list = list_devices();
  for (const auto& id : list.available) {
    if (id.rfind("cuda", 0) == 0) return true;
  }
  if (why) {
    for (const auto& reason : list.unavailable_reasons) *why += reason;
  }
  return false;
}

}  // namespace xo::testing

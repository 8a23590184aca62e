// Whether this machine has a GPU that crossover can use, for the tests that skip without one
// (visibly: GTEST_SKIP with the reason), and how the GPU tests compare parameters with the CPU's.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

// The GPUs crossover can train on here.
inline int gpu_count() {
  int gpus = 0;
  for (const auto& id : list_devices().available) gpus += device_kind_of(id) == DeviceKind::Gpu;
  return gpus;
}

// The largest difference between two parameter vectors, relative to the largest parameter (1e-3
// at least, so that parameters near 0 are compared absolutely).
inline double max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-3;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  return diff / scale;
}

}  // namespace xo::testing

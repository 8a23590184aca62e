// The CUDA entry points the registry calls: defined in cuda_backend.cpp in a build with CUDA, in
// unavailable.cpp (which says plainly that CUDA was not built) in one without.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace xo::cuda {

// Device ids ("cuda:0", ...) present on this machine; empty with `why` set when there are none
// (no driver, no GPU, CUDA not built).
std::vector<std::string> list_devices(std::string* why);
std::unique_ptr<Backend> make_backend(int device_index, Precision precision);

}  // namespace xo::cuda

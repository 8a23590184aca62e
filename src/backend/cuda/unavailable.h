// The CUDA entry points the registry calls. This build's implementation (unavailable.cpp) says
// plainly that CUDA was not built; the CUDA backend provides the real ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace xo::cuda {

// Device ids ("cuda:0", ...) present on this machine; empty with `why` set when there are none.
std::vector<std::string> list_devices(std::string* why);
std::unique_ptr<Backend> make_backend(int device_index);

}  // namespace xo::cuda

// The CUDA entry points of a build without the CUDA backend: no devices, and a clear reason.
#include "backend/cuda/entry.h"

#include "core/error.h"

namespace xo::cuda {

namespace {
constexpr const char* kNotBuilt =
    "this crossover was built without CUDA (the CUDA backend is not part of this build)";
}

std::vector<std::string> list_devices(std::string* why) {
  if (why) *why = kNotBuilt;
  return {};
}

std::unique_ptr<Backend> make_backend(int /*device_index*/, Precision /*precision*/) { throw UserError(kNotBuilt); }

}  // namespace xo::cuda

// A device's kind by name, apart from the registry (which links every backend), so that the
// parsers of files that name kinds (the catalog, results.json) build without one (fuzz/).
#include "backend/backend.h"

namespace xo {

const char* device_kind_name(DeviceKind kind) { return kind == DeviceKind::Gpu ? "gpu" : "cpu"; }

std::optional<DeviceKind> parse_device_kind(std::string_view name) {
  if (name == "cpu") return DeviceKind::Cpu;
  if (name == "gpu" || name == "cuda") return DeviceKind::Gpu;
  return std::nullopt;
}

DeviceKind device_kind_of(std::string_view device_id) {
  return device_id.rfind("cuda", 0) == 0 ? DeviceKind::Gpu : DeviceKind::Cpu;
}

}  // namespace xo

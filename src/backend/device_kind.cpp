// A device's kind and a GPU's arithmetic by name, apart from the registry (which links every
// backend), so that the parsers of files that name them (the catalog, results.json) build without
// one (fuzz/).
#include <fmt/format.h>

#include "backend/backend.h"
#include "core/error.h"

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

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::F32:
      return "f32";
    case Precision::TF32:
      return "tf32";
    case Precision::BF16:
      return "bf16";
  }
  return "?";
}

Precision parse_precision(const std::string& text) {
  for (Precision p : {Precision::F32, Precision::TF32, Precision::BF16}) {
    if (text == precision_name(p)) return p;
  }
  throw UserError(fmt::format("--precision '{}': expected f32, tf32 or bf16", text));
}

}  // namespace xo

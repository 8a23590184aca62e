#include "job/devices.h"

#include <memory>

namespace xo {

DevicesOutcome devices_job(bool probe, bool reprobe) {
  const DeviceList list = list_devices();
  DevicesOutcome outcome;
  outcome.unavailable = list.unavailable_reasons;
  for (const std::string& id : list.available) {
    const std::unique_ptr<Backend> backend = make_backend(parse_device(id, 0));
    DeviceEntry entry{backend->info(), std::nullopt, std::nullopt};
    if (probe) entry.peaks = device_peaks(*backend, reprobe, default_peaks_cache());
    if (probe && entry.info.kind == DeviceKind::Cpu && !cpu_bf16_unit().empty()) {
      const std::unique_ptr<Backend> bf16 = make_backend(parse_device(id, 0, "bf16"));
      entry.bf16_peaks = device_peaks(*bf16, reprobe, default_peaks_cache());
    }
    outcome.devices.push_back(std::move(entry));
  }
  return outcome;
}

}  // namespace xo

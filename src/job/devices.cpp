#include "job/devices.h"

#include <memory>

namespace xo {

DevicesOutcome devices_job(bool probe, bool reprobe) {
  const DeviceList list = list_devices();
  DevicesOutcome outcome;
  outcome.unavailable = list.unavailable_reasons;
  for (const std::string& id : list.available) {
    const std::unique_ptr<Backend> backend = make_backend(parse_device(id, 0));
    DeviceEntry entry{backend->info(), std::nullopt};
    if (probe) entry.peaks = device_peaks(*backend, reprobe, default_peaks_cache());
    outcome.devices.push_back(std::move(entry));
  }
  return outcome;
}

}  // namespace xo

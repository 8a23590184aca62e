// `crossover devices`' job: each device this build can train on here, with its measured peaks
// where asked (probed, or read from the cache), and why the others are not there.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "measure/peaks.h"

namespace xo {

struct DeviceEntry {
  DeviceInfo info;
  std::optional<DevicePeaks> peaks;  // with `probe`
  // With `probe`, on a CPU with AMX or AVX-512 BF16: its peaks at --precision bf16.
  std::optional<DevicePeaks> bf16_peaks;
};

struct DevicesOutcome {
  std::vector<DeviceEntry> devices;
  std::vector<std::string> unavailable;  // "cuda: this crossover was built without CUDA", ...
};

// `probe`: each device's peaks from the cache, measured where it has none (or with `reprobe`).
DevicesOutcome devices_job(bool probe, bool reprobe);

}  // namespace xo

// NVIDIA's management library (NVML), loaded at run time with dlopen: crossover builds without
// its header and starts on machines without a driver. Where it is missing, available() is false
// and why() says so; nothing here throws for a missing driver.
#pragma once

#include <optional>
#include <string>

namespace xo {

struct GpuReading {
  std::optional<double> utilisation_percent;  // of the last sample period, as the driver reports
  std::optional<double> memory_used_mib;
  std::optional<double> power_w;
  std::optional<double> sm_clock_mhz;
};

class Nvml {
 public:
  // The process-wide instance (loaded and initialised on first use).
  static Nvml& get();

  bool available() const { return available_; }
  const std::string& why() const { return why_; }  // why it is not available
  int device_count() const { return count_; }
  std::string driver_version() const;
  std::string device_name(int index) const;
  // One reading of device `index`; fields the driver does not report stay empty.
  GpuReading read(int index) const;

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

 private:
  Nvml();
  ~Nvml();
  struct Api;
  Api* api_ = nullptr;
  void* library_ = nullptr;
  bool available_ = false;
  std::string why_;
  int count_ = 0;
};

}  // namespace xo

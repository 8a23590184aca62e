#include "measure/nvml.h"

#include <dlfcn.h>

#include <string>

namespace xo {
namespace {

// The few NVML types and entry points crossover uses, declared as the documented C ABI: every
// call returns nvmlReturn_t (0 = NVML_SUCCESS) and devices are opaque handles.
using Result = int;
using Device = void*;
struct Utilization {
  unsigned int gpu, memory;
};
struct Memory {
  unsigned long long total, free, used;
};
constexpr int kClockSm = 1;  // NVML_CLOCK_SM

}  // namespace

struct Nvml::Api {
  Result (*init)() = nullptr;
  Result (*shutdown)() = nullptr;
  Result (*device_count)(unsigned int*) = nullptr;
  Result (*device_handle)(unsigned int, Device*) = nullptr;
  Result (*device_name)(Device, char*, unsigned int) = nullptr;
  Result (*utilization)(Device, Utilization*) = nullptr;
  Result (*memory)(Device, Memory*) = nullptr;
  Result (*power)(Device, unsigned int*) = nullptr;
  Result (*clock)(Device, int, unsigned int*) = nullptr;
  Result (*driver_version)(char*, unsigned int) = nullptr;
  const char* (*error_string)(Result) = nullptr;
};

Nvml& Nvml::get() {
  static Nvml instance;
  return instance;
}

Nvml::Nvml() {
  library_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    why_ = "NVML (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine";
    return;
  }
  api_ = new Api;
  auto load = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library_, name));
    if (!fn && why_.empty()) why_ = std::string("NVML lacks ") + name;
  };
  load(api_->init, "nvmlInit_v2");
  load(api_->shutdown, "nvmlShutdown");
  load(api_->device_count, "nvmlDeviceGetCount_v2");
  load(api_->device_handle, "nvmlDeviceGetHandleByIndex_v2");
  load(api_->device_name, "nvmlDeviceGetName");
  load(api_->utilization, "nvmlDeviceGetUtilizationRates");
  load(api_->memory, "nvmlDeviceGetMemoryInfo");
  load(api_->power, "nvmlDeviceGetPowerUsage");
  load(api_->clock, "nvmlDeviceGetClockInfo");
  load(api_->driver_version, "nvmlSystemGetDriverVersion");
  load(api_->error_string, "nvmlErrorString");
  if (!why_.empty()) return;
  if (const Result r = api_->init(); r != 0) {
    why_ = std::string("nvmlInit failed: ") + api_->error_string(r);
    return;
  }
  unsigned int count = 0;
  if (const Result r = api_->device_count(&count); r != 0) {
    why_ = std::string("nvmlDeviceGetCount failed: ") + api_->error_string(r);
    api_->shutdown();
    return;
  }
  count_ = static_cast<int>(count);
  available_ = true;
}

Nvml::~Nvml() {
  if (available_) api_->shutdown();
  delete api_;
  // The library stays loaded: the driver's threads may outlive this destructor at exit.
}

std::string Nvml::driver_version() const {
  if (!available_) return "n/a";
  char buf[96] = {};
  return api_->driver_version(buf, sizeof(buf)) == 0 ? std::string(buf) : std::string("n/a");
}

std::string Nvml::device_name(int index) const {
  Device d = nullptr;
  if (!available_ || api_->device_handle(static_cast<unsigned>(index), &d) != 0) return "n/a";
  char buf[96] = {};
  return api_->device_name(d, buf, sizeof(buf)) == 0 ? std::string(buf) : std::string("n/a");
}

GpuReading Nvml::read(int index) const {
  GpuReading g;
  Device d = nullptr;
  if (!available_ || api_->device_handle(static_cast<unsigned>(index), &d) != 0) return g;
  if (Utilization u{}; api_->utilization(d, &u) == 0) g.utilisation_percent = u.gpu;
  if (Memory m{}; api_->memory(d, &m) == 0) g.memory_used_mib = m.used / (1024.0 * 1024.0);
  if (unsigned int mw = 0; api_->power(d, &mw) == 0) g.power_w = mw / 1000.0;
  if (unsigned int mhz = 0; api_->clock(d, kClockSm, &mhz) == 0) g.sm_clock_mhz = mhz;
  return g;
}

}  // namespace xo

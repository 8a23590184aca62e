#include "report/machine.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <string>

#include "backend/backend.h"
#include "core/clock.h"
#include "measure/nvml.h"
#include "report/manifest.h"

namespace xo {
namespace {

std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "";
}

MachineInfo describe_once() {
  MachineInfo m;
  utsname u{};
  uname(&u);
  const std::string flags = cpuinfo_field("flags");
  m.cpu = cpuinfo_field("model name");
  m.logical_cpus = sysconf(_SC_NPROCESSORS_ONLN);
  m.avx512 = flags.find("avx512f") != std::string::npos;
  m.memory_gib = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) /
                 (1024.0 * 1024.0 * 1024.0);
  m.os = std::string(u.sysname) + " " + u.release;
  m.hostname = u.nodename;
  m.compiler = CROSSOVER_COMPILER;
  m.flags = CROSSOVER_BUILD_FLAGS;
  m.cpu_cores = cpuinfo_field("cpu cores");
  m.libraries = build_libraries();
  const Nvml& nvml = Nvml::get();
  m.nvidia_driver = nvml.available() ? nvml.driver_version() : "n/a";
  for (int i = 0; i < nvml.device_count(); ++i) m.gpus.push_back(nvml.device_name(i));
  m.crossover = CROSSOVER_VERSION;
  const DeviceList devices = list_devices();
  m.devices = devices.available;
  m.devices_unavailable = devices.unavailable_reasons;
  return m;
}

}  // namespace

MachineInfo describe_machine() {
  // The machine does not change while a process runs: it is described once (a search writes its
  // report after every trial, a fused group a result per trial), dated each time.
  static const MachineInfo machine = describe_once();
  MachineInfo m = machine;
  m.date = utc_now();
  return m;
}

std::string machine_line(const MachineInfo& m) {
  return fmt::format("{}, {} logical CPUs, {:.0f} GiB, {}", m.cpu,
                     m.logical_cpus ? std::to_string(*m.logical_cpus) : "?",
                     m.memory_gib.value_or(0.0), m.os);
}

}  // namespace xo

// The machine a report was measured on: CPU, memory, OS, compiler and flags, library versions,
// the NVIDIA driver and GPUs (through NVML, when present), and the devices crossover can use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xo {

struct MachineInfo {
  std::string cpu;  // /proc/cpuinfo's model name
  std::optional<int64_t> logical_cpus;
  std::string cpu_cores;  // per socket, as /proc/cpuinfo says it
  bool avx512 = false;
  std::optional<double> memory_gib;
  std::string os, hostname, compiler, flags;
  std::vector<std::pair<std::string, std::string>> libraries;  // name, version
  std::string nvidia_driver;                                   // "n/a" without NVML
  std::vector<std::string> gpus;
  std::string crossover;  // its version
  std::string date;       // UTC, when described
  std::vector<std::string> devices, devices_unavailable;
};

// This machine, described once per process; dated now.
MachineInfo describe_machine();
// The machine in one line: CPU, logical CPUs, memory, OS (a device profile's `machine`).
std::string machine_line(const MachineInfo& m);

}  // namespace xo

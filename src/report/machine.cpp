#include "report/machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <string>

#include "backend/backend.h"

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

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

nlohmann::json describe_machine() {
  nlohmann::json m;
  utsname u{};
  uname(&u);
  const std::string flags = cpuinfo_field("flags");
  m["cpu"] = cpuinfo_field("model name");
  m["logical_cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  m["avx512"] = flags.find("avx512f") != std::string::npos;
  m["memory_gib"] = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE) /
                    (1024.0 * 1024.0 * 1024.0);
  m["os"] = std::string(u.sysname) + " " + u.release;
  m["hostname"] = u.nodename;
  m["compiler"] = CROSSOVER_COMPILER;
  m["crossover"] = CROSSOVER_VERSION;
  m["date"] = utc_now();
  const DeviceList devices = list_devices();
  m["devices"] = devices.available;
  m["devices_unavailable"] = devices.unavailable_reasons;
  return m;
}

}  // namespace xo

// The manifest of a measuring job (what `crossover replay` needs to run it again) from the CLI's
// options, and back: the options that repeat a recorded job. Also the command line as typed.
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/session.h"

namespace xo::cli {
namespace {

std::string& command_line() {
  static std::string line;
  return line;
}

}  // namespace

void record_command_line(int argc, const char* const* argv) {
  command_line() = shell_command_line(std::vector<std::string>(argv, argv + argc));
}

const std::string& recorded_command_line() { return command_line(); }

Manifest job_manifest(const MeasureOptions& o, const std::vector<std::string>& devices,
                      const std::vector<RunRecord>& runs) {
  Manifest m;
  m.build = this_build();
  m.libraries = build_libraries();
  for (const RunRecord& run : runs) {
    const DeviceInfo& d = run.result.device;
    bool listed = false;
    for (const auto& [id, library] : m.device_libraries) listed |= id == d.id;
    if (!listed) m.device_libraries.emplace_back(d.id, d.library);
  }
  m.command_line = recorded_command_line();
  m.settings = o.settings;
  m.settings.devices = devices;
  return m;
}

MeasureOptions measure_options(const ExecutionSettings& s) {
  MeasureOptions o;
  o.settings = s;
  return o;
}

}  // namespace xo::cli

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
  ExecutionSettings& s = m.settings;
  s.devices = devices;
  s.epochs = o.epochs;
  s.max_steps = o.max_steps;
  s.threads = o.threads;
  s.profile_steps = o.profile_steps;
  s.precision = o.precision;
  s.record_step = o.record_step;
  return m;
}

MeasureOptions measure_options(const ExecutionSettings& s) {
  MeasureOptions o;
  o.devices = s.devices;
  o.epochs = s.epochs;
  o.max_steps = s.max_steps;
  o.threads = s.threads;
  o.profile_steps = s.profile_steps;
  o.precision = s.precision;
  o.record_step = s.record_step;
  return o;
}

}  // namespace xo::cli

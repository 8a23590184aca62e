// The command line as typed, recorded once by main(): the manifest of every report a command
// writes carries it (MeasureOptions::command_line).
#include <string>
#include <vector>

#include "cli/commands.h"
#include "report/manifest.h"

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

}  // namespace xo::cli

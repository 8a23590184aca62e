// `crossover replay RESULTS.json`: the job a results.json recorded, run again here and compared
// run by run and figure by figure (job/replay.h); this file reads its flags.
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/terminal_hooks.h"
#include "core/exit_codes.h"
#include "job/replay.h"

namespace xo::cli {
namespace {

CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(v >= 0)) {
          return "expected a relative tolerance of 0 or more (e.g. 1e-5), got '" + text + "'";
        }
        return "";
      },
      "REL");
}

}  // namespace

Command add_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayJob>();
  CLI::App* sub = app.add_subcommand(
      "replay",
      "Run the job a results.json recorded again here, with its specs and settings, and report "
      "per run and per figure whether the outcome is bit-identical, within tolerance, or "
      "different, and what differs between the recorded build and machine and this one");
  sub->add_option("results", o->file, "A results.json written by run, sweep, advise or cost")
      ->required();
  sub->add_option("--tolerance", o->tolerance,
                  "Relative difference under which a figure that is not bit-identical is "
                  "'within tolerance'")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--out", o->out,
                  "Folder for the replay's own results.json, results.csv and report.html "
                  "(default: a fresh 'replay' folder beside the results)");
  sub->add_flag("--overwrite", o->overwrite, "Replace the finished job in --out");
  sub->add_option("--devices", o->devices,
                  "Replay only the runs on these devices (default: every recorded device present)")
      ->delimiter(',');
  sub->footer(fmt::format(
      "Exit codes: 0 every run replayed is bit-identical or within tolerance; {} a figure differs; "
      "2 bad input (a file that is not a results.json, one without a manifest or with settings out "
      "of range or beyond the run it recorded, no run replayable here); 130 interrupted.",
      kExitReplayDiffers));
  return {sub, [o] {
            o->command_line = recorded_command_line();
            TerminalHooks hooks;
            return replay_job(*o, hooks).exit_code();
          }};
}

}  // namespace xo::cli

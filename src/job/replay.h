// `crossover replay RESULTS.json`: the job a results.json recorded, run again here from its
// manifest (the settings) and its runs (each one's spec text, on the same device), then compared
// run by run and figure by figure: bit-identical, within a relative tolerance, or different, with
// what differs between the recorded build and machine and this one. The comparisons and the
// replay's header and summary are told as results through the hooks as each is known.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "advisor/replay.h"

namespace xo {

class JobHooks;

// Relative: well above the last bits of an f32 sum that a different order of additions moves
// (~1e-7 relative), well below any change a person would call a different result.
inline constexpr double kDefaultReplayTolerance = 1e-5;

struct ReplayJob {
  std::string file;  // the results.json replayed
  double tolerance = kDefaultReplayTolerance;
  std::string out;                   // empty: a fresh folder beside the results
  bool overwrite = false;            // replace a finished job in `out`
  std::vector<std::string> devices;  // empty: every device the file has runs on
  std::string command_line;          // how the replay was started, for its own manifest
};

struct ReplayOutcome {
  std::vector<RunComparison> compared;  // a run replayed and compared, in the recorded order
  size_t skipped = 0;                   // runs not replayable here (each told why)
  bool stopped = false;                 // a stop request ended it
  std::filesystem::path out;            // the replay's own report folder
  // 0 every run replayed is bit-identical or within tolerance; kExitReplayDiffers a figure
  // differs; 130 stopped.
  int exit_code() const;
};

// Throws UserError for a file that is not a replayable results.json, devices it has no run on,
// and where no run could be replayed here.
ReplayOutcome replay_job(const ReplayJob& o, JobHooks& hooks);

}  // namespace xo

// `crossover replay` on the terminal: how the recorded build and machine differ from this one, a
// table per replayed run (one row per figure, the worst epoch shown with both values), and the
// summary line. Rendered from the typed comparisons (advisor/replay.h) and the manifest.
#pragma once

#include <string>
#include <vector>

#include "advisor/replay.h"
#include "report/manifest.h"

namespace xo {

// "bit-identical", "within tolerance", "different" (for the data: "same" or "different").
std::string verdict_text(Verdict v, Figure figure);

// The manifest entries that differ, as a table; a line saying so when none does.
std::string manifest_differences_text(const std::vector<ManifestDifference>& differences);

// One run: the heading with its verdict, the figures, the median step time as a ratio, and notes
// (different data, an interrupted recording, setup that differs).
std::string run_comparison_text(const RunComparison& c);

// A run that was not replayed, and why.
std::string skipped_run_text(const std::string& model, const std::string& device,
                             const std::string& why);

// "replay: 3 runs: 2 bit-identical, 1 within tolerance (relative 1e-05), 0 different; 1 skipped"
std::string replay_summary_text(const std::vector<RunComparison>& runs, size_t skipped,
                                double tolerance);

}  // namespace xo

// Where a search stands, read from its record and the trials running now: each trial's progress
// as halving sees it, the next job for a free slot, and what the search decides at its end (the
// paused trials stopped, the best trial).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tune/halving.h"
#include "tune/record.h"

namespace xo {

// Each trial as tune/halving.h sees it; `running[i]`: trial i runs now.
std::vector<TrialProgress> trial_progress(const TuneRecord& r, const std::vector<bool>& running);

// The job for a free slot: first a trial promoted before the search stopped whose promotion did
// not complete, then what halving gives (a promotion or a new trial); none: wait, or the search is
// done.
std::optional<HalvingJob> next_job(const TuneRecord& r, const std::vector<bool>& running);

// At the end of a search that was not interrupted: every trial still paused at a rung gets no
// more epochs. Each becomes Stopped, with its decision recorded; their indices.
std::vector<size_t> stop_paused_trials(TuneRecord& r);

// The best trial that trained the whole budget (under halving, a stopped trial was compared at
// fewer epochs), or null.
const TrialRecord* best_trial(const TuneRecord& r);

}  // namespace xo

// A search started again with the same --out: the record found there continues the one just
// prepared from the flags, if it is the same search (spec, --vary, mode, objective, rungs and
// trials); another search is refused rather than mixed in.
#pragma once

#include <cstddef>
#include <string>

#include "tune/record.h"

namespace xo {

// `now`'s trials, decisions and measured choice of trials at once replaced by `was`'s, each trial
// that was running when the search stopped pending again (its checkpoint, if one was written,
// continues it), and so each trial the machine failed (TrialRecord::machine_failed: a full disk,
// a limit on files), at the rung it failed at. Throws UserError naming what differs and the two
// ways on (another --out, or
// --restart). Returns how many trials are kept: those not pending.
size_t continue_search(TuneRecord& now, TuneRecord was, const std::string& out);

}  // namespace xo

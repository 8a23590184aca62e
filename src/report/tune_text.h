// A search for the terminal and for the page: the trials best first, the halving decisions, the
// measured choice of trials at once, and the search priced elsewhere.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tune/record.h"

namespace xo {

// The terminal's tables and lines; a figure not measured reads "-".
std::string tune_table_text(const TuneRecord& r);
// "t03 promoted to 9 epochs: 1st of 3 at 3 epochs (the best one goes on)" or "t05 stopped at 1
// epoch: 4th of 9 (the best 3 went on)".
std::string decision_text(const HalvingDecision& d);
// "2 at once on cpu (measured: 1 × 2 threads 48,091 samples/s; 2 × 1 thread 56,373 samples/s)".
std::string parallel_text(const ParallelChoice& c);
// report.html of a search; `machine` is the machine as results.json writes it (may be null).
std::string render_tune_html(const TuneRecord& r, const nlohmann::json& machine);

}  // namespace xo

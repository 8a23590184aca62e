// A search's results.json (`crossover.tune/1`) and results.csv: the one writer and the strict
// reader of TuneRecord (a search started again in the same --out reads what it had done).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/machine.h"
#include "tune/record.h"

namespace xo {

nlohmann::json to_json(const TuneRecord& r);
// The same with the machine the search ran on (`machine`), as a search writes its results.json.
nlohmann::json to_json(const TuneRecord& r, const MachineInfo& machine);
// Throws UserError naming `origin`, the place and the field; the keys `machine` and `manifest`,
// which the command adds around the record, are not part of it.
TuneRecord read_tune_record(const std::string& text, const std::string& origin);
// One row per trial, best first (trials_by_objective), a column per varied key.
std::string tune_csv(const TuneRecord& r);

}  // namespace xo

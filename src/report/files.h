// The report folder: results.json (the document), results.csv (one line per run) and report.html,
// each written atomically, so an interrupted sweep keeps what it finished and a full disk leaves
// each file whole (its previous version, or the new one).
#pragma once

#include <filesystem>
#include <string>

#include "report/document.h"
#include "report/machine.h"
#include "tune/record.h"

namespace xo {

void write_report(const std::filesystem::path& out_dir, const Report& report);
// A search's folder (`crossover tune`): its results.json (the record and the machine it ran on),
// results.csv (a row per trial) and report.html.
void write_tune_report(const std::filesystem::path& out_dir, const TuneRecord& record,
                       const MachineInfo& machine);
std::string runs_csv(const Report& report);

}  // namespace xo

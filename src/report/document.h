// The report document (`crossover.report/2`): what `run`, `sweep`, `advise` and `cost` measured,
// predicted and concluded, as typed records. Written as results.json / results.csv / report.html
// by report/files.h, read back by report/report_json.h, printed by report/terminal.h and
// report/html.h. Each record is produced by the layer that computes it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/analysis.h"
#include "advisor/cost.h"
#include "advisor/sweep.h"
#include "advisor/verdict.h"
#include "measure/peaks.h"
#include "measure/run_record.h"
#include "report/machine.h"
#include "report/manifest.h"

namespace xo {

// Schema 2 (crossover 0.2.0): mean losses per sample, `_percent` and `_fraction` in the names of
// such figures. Schema 1's files are still read (report/report_json.cpp says how).
inline constexpr const char* kTrainSchema = "crossover.train/2";
inline constexpr const char* kReportSchema = "crossover.report/2";
inline constexpr const char* kReportSchemaV1 = "crossover.report/1";

// The device of a run as the tables and the page show it: "cpu", or "cpu (2 ranks)" for a
// data-parallel run.
inline std::string device_label(const TrainResult& r) {
  return r.ranks > 1 ? r.device.id + " (" + std::to_string(r.ranks) + " ranks)" : r.device.id;
}

// A run with its analysis against the device's peaks.
struct ReportRun {
  RunRecord run;
  RunAnalysis analysis;
};

struct Report {
  std::string kind;  // "run", "sweep", "advise" or "cost"
  std::string title;
  std::string created;   // UTC
  bool complete = true;  // false: interrupted, the runs are those that finished
  std::optional<MachineInfo> machine;
  // What `crossover replay` needs to run the job again; none in files written before 0.1.1.
  std::optional<Manifest> manifest;
  std::vector<DevicePeaks> peaks;
  std::vector<ReportRun> runs;
  std::optional<SweepRecord> sweep;
  std::vector<DevicePrediction> predictions;  // of one model, for every device; empty: none
  // How far predictions are from measurements: the shipped device profiles' leave-one-out table
  // (advisor/profile_predict.h); empty where no prediction was made.
  std::vector<ValidationRow> validation;
  std::optional<CostTable> cost;
  std::optional<GpuVerdict> verdict;  // the answer first: is a GPU worth it for this run
  std::optional<std::vector<std::string>> advice;  // the recommendation, one sentence a line
};

}  // namespace xo

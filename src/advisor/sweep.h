// A sweep as the report shows it: one series per device along the swept axis (seconds per 100
// epochs), measured or predicted, and where one device overtakes another.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/catalog.h"
#include "advisor/crossover_point.h"
#include "advisor/predict.h"
#include "measure/run_record.h"

namespace xo {

struct SweepLine {
  std::string device;  // a device id, or "ID (predicted)"
  bool predicted = false;
  // How a predicted line was predicted and why of that device ("" for a measured one).
  std::string note;
  std::vector<SweepPoint> points;  // seconds: per 100 epochs
};

struct SweepRecord {
  std::string axis;  // "depth", "width", "batch", "sequence"
  // The chart's x: "params" when the parameter count changes along the axis, else "axis_value".
  std::string x;
  std::vector<SweepLine> series;
  std::vector<Crossover> crossovers;
};

// Sweep series (one per device, x = the axis) of the runs, by seconds per 100 epochs.
std::vector<SweepSeries> sweep_series(const std::vector<RunRecord>& runs);

// The record's lines as series, for find_crossovers and fastest_throughout.
std::vector<SweepSeries> as_series(const SweepRecord& record);
// The record of `series` along `axis`; the devices in `predicted` are predictions.
SweepRecord sweep_record(const std::string& axis, const std::vector<SweepSeries>& series,
                         const std::vector<Crossover>& crossovers,
                         const std::vector<std::string>& predicted);

}  // namespace xo

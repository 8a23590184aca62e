// A sweep as the report shows it: one series per device along the swept axis (seconds per 100
// epochs), measured or predicted, and where one device overtakes another.
#pragma once

#include <cstdint>
#include <limits>
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

// One rank count of a sweep along "ranks" (`mpirun -np N crossover sweep SPEC --vary
// ranks=1,2,…`): the same global batch on `ranks` data-parallel processes.
struct ScalingPoint {
  int ranks = 1;
  double step_ms = 0;  // median, the whole batch's step
  double samples_per_second = 0;
  // The step's wait for the gradient sums (NaN on one rank).
  double communicate_ms = std::numeric_limits<double>::quiet_NaN();
  int64_t reduced_bytes = 0;  // gradient bytes each rank sums per step
  // The sum's bus bandwidth as nccl-tests reports it (bytes × 2(n−1)/n over the communicate
  // phase); NaN where that phase is not the whole sum (--reduce overlap hides part of it).
  double bus_gbs = std::numeric_limits<double>::quiet_NaN();
  // Throughput against `ranks` times one rank's (NaN when the sweep did not measure one rank).
  double efficiency = std::numeric_limits<double>::quiet_NaN();
};

struct SweepRecord {
  std::string axis;  // "depth", "width", "batch", "sequence", "ranks", or a spec key
  // The chart's x: "params" when the parameter count changes along the axis, else "axis_value".
  std::string x;
  std::vector<SweepLine> series;
  std::vector<Crossover> crossovers;
  std::vector<ScalingPoint> scaling;  // along "ranks" only
};

// The scaling points of the runs along "ranks", in the order measured.
std::vector<ScalingPoint> scaling_points(const std::vector<RunRecord>& runs);

// Sweep series (one per device, x = the axis) of the runs, by seconds per 100 epochs.
std::vector<SweepSeries> sweep_series(const std::vector<RunRecord>& runs);

// The record's lines as series, for find_crossovers and fastest_throughout.
std::vector<SweepSeries> as_series(const SweepRecord& record);
// The record of `series` along `axis`; the devices in `predicted` are predictions.
SweepRecord sweep_record(const std::string& axis, const std::vector<SweepSeries>& series,
                         const std::vector<Crossover>& crossovers,
                         const std::vector<std::string>& predicted);

}  // namespace xo

// Where one device overtakes another along a sweep: for each pair of devices, wherever the sign of
// log(time_a / time_b) changes between two neighbouring points of the axis, the crossing is
// interpolated linearly in that log ratio; the axis value is interpolated linearly and the
// parameter count geometrically (parameters grow geometrically along the classic sweeps).
#pragma once

#include <string>
#include <vector>

namespace xo {

struct SweepPoint {
  double axis_value = 0;  // the swept quantity: layers, width, batch, sequence length
  double params = 0;
  double seconds = 0;  // the time compared (per step, per epoch or per 100 epochs): > 0
};

struct SweepSeries {
  std::string device;
  std::vector<SweepPoint> points;  // any order; matched across devices by axis_value
};

struct Crossover {
  std::string faster;  // the device that is faster past the crossing (larger axis values)
  std::string slower;
  double axis_value = 0;
  double params = 0;
  double below_axis = 0, above_axis = 0;  // the measured points it lies between
};

// Every crossing of every pair of series, ordered by axis value. Points whose time is not
// positive and finite are skipped. A tie exactly at a measured point counts once, when the order
// differs on both sides of it.
std::vector<Crossover> find_crossovers(const std::vector<SweepSeries>& series);

}  // namespace xo

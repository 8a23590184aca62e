#include "advisor/sweep.h"

#include <algorithm>

namespace xo {

std::vector<SweepSeries> sweep_series(const std::vector<RunRecord>& runs) {
  std::vector<SweepSeries> series;
  for (const RunRecord& run : runs) {
    SweepSeries* s = nullptr;
    for (SweepSeries& existing : series) {
      if (existing.device == run.result.device.id) s = &existing;
    }
    if (!s) {
      series.push_back({run.result.device.id, {}});
      s = &series.back();
    }
    s->points.push_back({run.axis_value, static_cast<double>(run.result.params),
                         seconds_per_100_epochs(run.result)});
  }
  return series;
}

std::vector<SweepSeries> as_series(const SweepRecord& record) {
  std::vector<SweepSeries> out;
  for (const SweepLine& l : record.series) out.push_back({l.device, l.points});
  return out;
}

SweepRecord sweep_record(const std::string& axis, const std::vector<SweepSeries>& series,
                         const std::vector<Crossover>& crossovers,
                         const std::vector<std::string>& predicted) {
  SweepRecord r;
  r.axis = axis;
  // Parameters on x when they change along the axis; else the axis itself (batch, sequence).
  bool params_vary = false;
  for (const SweepSeries& s : series) {
    for (const SweepPoint& p : s.points) params_vary |= p.params != s.points.front().params;
  }
  r.x = params_vary ? "params" : "axis_value";
  for (const SweepSeries& s : series) {
    const bool is_predicted =
        std::find(predicted.begin(), predicted.end(), s.device) != predicted.end();
    r.series.push_back({s.device, is_predicted, "", s.points});
  }
  r.crossovers = crossovers;
  return r;
}

}  // namespace xo

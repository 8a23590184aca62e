#include "advisor/sweep.h"

#include <algorithm>
#include <cmath>

#include "advisor/scale_out.h"

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

std::vector<ScalingPoint> scaling_points(const std::vector<RunRecord>& runs) {
  std::vector<ScalingPoint> points;
  double one_rank_ms = std::numeric_limits<double>::quiet_NaN();
  for (const RunRecord& run : runs) {
    if (run.axis == "ranks" && run.result.ranks == 1) one_rank_ms = run.result.step_ms.median;
  }
  for (const RunRecord& run : runs) {
    if (run.axis != "ranks") continue;
    const TrainResult& r = run.result;
    ScalingPoint p;
    p.ranks = r.ranks;
    p.step_ms = r.step_ms.median;
    p.samples_per_second = r.samples_per_second;
    if (r.ranks > 1) p.communicate_ms = r.communicate_ms;
    p.reduced_bytes = r.ranks > 1 ? r.reduced_bytes : 0;
    p.bus_gbs = communicate_bus_gbs(r.reduced_bytes, r.ranks, r.communicate_ms, r.reduce_mode);
    if (std::isfinite(one_rank_ms) && p.step_ms > 0) {
      p.efficiency = one_rank_ms / (p.ranks * p.step_ms);
    }
    points.push_back(p);
  }
  return points;
}

}  // namespace xo

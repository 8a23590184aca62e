#include "advisor/crossover_point.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace xo {
namespace {

struct Paired {
  double axis, params, log_ratio;  // log(time_a / time_b): > 0 where a is slower
};

std::vector<Paired> pair_up(const SweepSeries& a, const SweepSeries& b) {
  std::map<double, const SweepPoint*> in_b;
  for (const SweepPoint& p : b.points) {
    if (p.seconds > 0 && std::isfinite(p.seconds)) in_b[p.axis_value] = &p;
  }
  std::vector<Paired> out;
  for (const SweepPoint& p : a.points) {
    if (!(p.seconds > 0 && std::isfinite(p.seconds))) continue;
    const auto it = in_b.find(p.axis_value);
    if (it == in_b.end()) continue;
    out.push_back({p.axis_value, p.params, std::log(p.seconds / it->second->seconds)});
  }
  std::sort(out.begin(), out.end(),
            [](const Paired& x, const Paired& y) { return x.axis < y.axis; });
  return out;
}

double geometric(double lo, double hi, double t) {
  if (lo > 0 && hi > 0) return std::exp(std::log(lo) + t * (std::log(hi) - std::log(lo)));
  return lo + t * (hi - lo);
}

}  // namespace

std::vector<Crossover> find_crossovers(const std::vector<SweepSeries>& series) {
  std::vector<Crossover> found;
  for (size_t i = 0; i < series.size(); ++i) {
    for (size_t j = i + 1; j < series.size(); ++j) {
      const SweepSeries &a = series[i], &b = series[j];
      const std::vector<Paired> p = pair_up(a, b);
      // Walk the sign changes, stepping over exact ties: a tie between two points of opposite
      // sign is one crossing, at the tie.
      size_t last = p.size();  // index of the last point with a non-zero ratio
      for (size_t k = 0; k < p.size(); ++k) {
        if (p[k].log_ratio == 0) continue;
        if (last < p.size() && (p[last].log_ratio > 0) != (p[k].log_ratio > 0)) {
          const Paired &lo = p[last], &hi = p[k];
          Crossover c;
          const bool a_faster_after = hi.log_ratio < 0;
          c.faster = a_faster_after ? a.device : b.device;
          c.slower = a_faster_after ? b.device : a.device;
          c.below_axis = lo.axis;
          c.above_axis = hi.axis;
          if (k - last > 1) {  // ties in between: the crossing is the first tie
            c.axis_value = p[last + 1].axis;
            c.params = p[last + 1].params;
          } else {
            const double t = lo.log_ratio / (lo.log_ratio - hi.log_ratio);
            c.axis_value = lo.axis + t * (hi.axis - lo.axis);
            c.params = geometric(lo.params, hi.params, t);
          }
          found.push_back(c);
        }
        last = k;
      }
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Crossover& x, const Crossover& y) { return x.axis_value < y.axis_value; });
  return found;
}

}  // namespace xo

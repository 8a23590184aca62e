// The disc data set of the classic CPU-vs-GPU experiment.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/interrupt.h"
#include "core/random.h"
#include "data/dataset.h"

namespace xo {
namespace {

constexpr int64_t kDiscFeatures = 2;  // the point's x and y
constexpr int64_t kDiscClasses = 2;   // outside (0) or inside (1) the quarter disc

}  // namespace

Dataset make_disc(int64_t samples, uint64_t seed) {
  if (samples < 1) throw UserError(fmt::format("disc: {} samples: expected at least 1", samples));
  constexpr double kRadiusSquared = 1.0 / (2.0 * std::numbers::pi);
  Dataset d;
  d.samples = samples;
  d.features = kDiscFeatures;
  d.classes = kDiscClasses;
  d.y.resize(samples);
  std::vector<double> xy(kDiscFeatures * samples);
  Rng rng(seed);
  for (int64_t i = 0; i < samples; ++i) {
    if (stop_poll_due(i)) throw_if_stop_requested("generating the disc data set");
    // x is drawn before y: the order is part of what a seed means.
    const double x = rng.uniform();
    const double y = rng.uniform();
    xy[kDiscFeatures * i] = x;
    xy[kDiscFeatures * i + 1] = y;
    // std::fma spells out the rounding: GCC contracts a*b + c into an FMA wherever the target has
    // one (-march=native), so a plain expression would round differently on machines without.
    d.y[i] = std::fma(x, x, y * y) < kRadiusSquared ? 1 : 0;
  }
  // One mean and one (population) standard deviation over every coordinate, as in the experiment.
  double mean = 0;
  for (double v : xy) mean += v;
  mean /= static_cast<double>(xy.size());
  double var = 0;
  for (double v : xy) var = std::fma(v - mean, v - mean, var);  // fma: see the label above
  const double stddev = std::sqrt(var / static_cast<double>(xy.size()));
  d.x.resize(xy.size());
  for (size_t i = 0; i < xy.size(); ++i) d.x[i] = static_cast<float>((xy[i] - mean) / stddev);
  d.description = fmt::format(
      "disc: {} points in [0,1]^2, seed {}, label x^2+y^2<1/(2pi), standardized (mean {:.4f}, "
      "std {:.4f})",
      samples, seed, mean, stddev);
  return d;
}

}  // namespace xo

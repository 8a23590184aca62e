// The disc data set of the classic CPU-vs-GPU experiment.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/random.h"
#include "data/dataset.h"

namespace xo {

Dataset make_disc(int64_t samples, uint64_t seed) {
  if (samples < 1) throw UserError(fmt::format("disc: {} samples: expected at least 1", samples));
  constexpr double kRadiusSquared = 1.0 / (2.0 * std::numbers::pi);
  Dataset d;
  d.samples = samples;
  d.features = 2;
  d.classes = 2;
  d.y.resize(samples);
  std::vector<double> xy(2 * samples);
  Rng rng(seed);
  for (int64_t i = 0; i < samples; ++i) {
    const double x = rng.uniform(), y = rng.uniform();
    xy[2 * i] = x;
    xy[2 * i + 1] = y;
    d.y[i] = x * x + y * y < kRadiusSquared ? 1 : 0;
  }
  // One mean and one (population) standard deviation over every coordinate, as in the experiment.
  double mean = 0;
  for (double v : xy) mean += v;
  mean /= static_cast<double>(xy.size());
  double var = 0;
  for (double v : xy) var += (v - mean) * (v - mean);
  const double std = std::sqrt(var / static_cast<double>(xy.size()));
  d.x.resize(xy.size());
  for (size_t i = 0; i < xy.size(); ++i) d.x[i] = static_cast<float>((xy[i] - mean) / std);
  d.description = fmt::format(
      "disc: {} points in [0,1]^2, seed {}, label x^2+y^2<1/(2pi), standardized (mean {:.4f}, "
      "std {:.4f})",
      samples, seed, mean, std);
  return d;
}

}  // namespace xo

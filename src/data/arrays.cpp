#include "data/arrays.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "core/error.h"

namespace xo {

Dataset borrow_arrays(const SampleArrays& a, int64_t classes) {
  if (a.samples <= 0 || a.features <= 0) {
    throw UserError(
        fmt::format("{} holds {} samples of {} features (expected at least one of each)", a.x_name,
                    a.samples, a.features));
  }
  const auto values = static_cast<size_t>(a.samples) * static_cast<size_t>(a.features);
  for (size_t i = 0; i < values; ++i) {
    if (!std::isfinite(a.x[i])) {
      throw UserError(fmt::format(
          "{}: sample {}, feature {} is {} (expected a finite float32 value)", a.x_name,
          i / static_cast<size_t>(a.features), i % static_cast<size_t>(a.features), a.x[i]));
    }
  }
  const auto* labels = static_cast<const int32_t*>(a.y);
  for (int64_t s = 0; labels && s < a.samples; ++s) {
    if (classes == 0) {
      const float target = std::bit_cast<float>(labels[s]);
      if (!std::isfinite(target)) {
        throw UserError(fmt::format("{}: sample {} has target {} (expected a finite float32 value)",
                                    a.y_name, s, target));
      }
    } else if (labels[s] < 0 || labels[s] >= classes) {
      throw UserError(fmt::format(
          "{}: sample {} has label {} (expected a class in [0, {}]: the model has {} classes)",
          a.y_name, s, labels[s], classes - 1, classes));
    }
  }
  Dataset d{a.samples, a.features, classes, {}, {}, fmt::format("{}: {} samples", kArraysData,
                                                                 a.samples)};
  d.borrowed_x = a.x;
  d.borrowed_y = labels;
  d.owner = a.owner;
  return d;
}

}  // namespace xo

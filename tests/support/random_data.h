// Random data sets for tests that train: any shape, seeded, with class labels or token ids.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "core/random.h"
#include "data/dataset.h"

namespace xo::testing {

// Random samples for a model with `features` inputs: uniform floats, or token ids below `vocab`.
inline Dataset random_data(int64_t samples, int64_t features, int64_t classes, uint64_t seed,
                           int64_t vocab = 0) {
  Rng rng(seed);
  Dataset d;
  d.samples = samples;
  d.features = features;
  d.classes = classes;
  d.description = fmt::format("random: {} samples, seed {}", samples, seed);
  for (int64_t i = 0; i < samples * features; ++i) {
    d.x.push_back(vocab > 0 ? static_cast<float>(rng.below(static_cast<uint64_t>(vocab)))
                            : static_cast<float>(rng.uniform(-1, 1)));
  }
  for (int64_t i = 0; i < samples; ++i) {
    d.y.push_back(static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes))));
  }
  return d;
}

}  // namespace xo::testing

// Summary statistics of repeated timings: median and spread, as every crossover figure is reported.
#pragma once

#include <cstdint>
#include <vector>

namespace xo {

struct TimingStats {
  int64_t count = 0;
  double median = 0, mean = 0, min = 0, max = 0, p10 = 0, p90 = 0;
  double cv = 0;  // coefficient of variation: standard deviation / mean
};

// Summarises the samples (any unit; the result is in the same unit). Empty input gives zeros.
TimingStats summarize(std::vector<double> samples);

}  // namespace xo

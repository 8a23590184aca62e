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

// The spread shown beside a median: (p90 - p10) / median, the middle 80% of the samples as a share
// of the median. Robust where the CV is not: one step of a thousand slowed by a page fault or
// another process blows the standard deviation up (issue 19 reported a CV of 1184% over steps
// whose p10-p90 was 6.42-6.80 us) but moves p10 and p90 not at all. NaN without samples.
double relative_spread(const TimingStats& s);

// Summarises the samples (any unit; the result is in the same unit). Empty input gives zeros.
TimingStats summarize(std::vector<double> samples);

}  // namespace xo

// A run's step times in bounded space. A run of 10^12 steps holds, and writes into each of its
// checkpoints, no more than one of a few thousand: when every step's time was kept, a tiny model
// trained for a minute held 2.4 GiB of them and wrote a 449 MiB checkpoint.
//
// The first time (the warm-up: first-touch page faults, cold caches) is held apart and left out of
// the summary. The others are kept as they are up to kExactSamples, and summarised exactly as
// summarize() does; past that, every one is counted in log-spaced bins kBinWidth wide (relative):
// count, min, max, mean and CV stay exact (Welford's running moments), and the median, p10 and p90
// are read from the bins to within kBinWidth / 2 of the exact order statistics (0.01%). At most
// kMaxBins are kept: past them the outermost bin of the longer tail (in bins from the median's)
// is merged into its neighbour, which moves only the times of that tail's farthest samples (the
// stalled steps beyond p90, or the rare quick ones below p10).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "train/stats.h"

namespace xo {

class TimingSeries {
 public:
  static constexpr size_t kExactSamples = 4096;
  static constexpr double kBinWidth = 2e-4;
  static constexpr size_t kMaxBins = 8192;

  // What a checkpoint holds of a series past kExactSamples: the running moments and the bins.
  struct Folded {
    int64_t count = 0;  // samples after the warm-up
    double mean = 0, m2 = 0, min = 0, max = 0;
    std::vector<std::pair<int32_t, int64_t>> bins;  // (bin, samples), bins ascending
  };

  void add(double ms);
  // Every sample added, the warm-up too.
  int64_t size() const;
  // After the warm-up (the warm-up itself when it is the only sample; zeros when there is none).
  TimingStats summary() const;

  bool folded() const { return folded_; }
  // A series as a checkpoint holds it: every sample, the warm-up first (not folded), or the
  // warm-up and the folded rest.
  std::vector<double> samples() const;
  double warmup() const { return warmup_; }
  const Folded& folded_state() const { return f_; }
  static TimingSeries from_samples(const std::vector<double>& samples);
  static TimingSeries from_folded(double warmup, Folded folded);

 private:
  void fold();
  void count_in_bin(double ms);
  void merge_farther_tail();

  bool has_warmup_ = false, folded_ = false;
  double warmup_ = 0;
  std::vector<double> exact_;  // after the warm-up, until folded
  Folded f_;                   // once folded
};

}  // namespace xo

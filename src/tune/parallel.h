// How many trials at once on each device of this machine: --parallel, or measured. K concurrent
// `crossover train` processes train the first trial's spec for a fixed number of steps, for K = 1,
// 2, 4, ... (up to the cores on a CPU, 4 on a GPU), and the K whose samples per second summed is
// highest is taken. A trial then gets the CPU's cores shared among the K (or --threads).
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "train/trainer.h"
#include "tune/record.h"

namespace xo {

// Reads a `crossover train --json` file back (the report layer's reader, handed down); `origin`
// names the file.
using TrainResultReader =
    std::function<TrainResult(const std::string& text, const std::string& origin)>;

struct ParallelSettings {
  int parallel = 0;  // --parallel: trials at once per device (0: measure)
  int threads = 0;   // --threads: CPU threads per trial (0: the cores shared among the trials)
  int cores = 1;     // this machine's
  std::filesystem::path spec;     // what the measuring processes train (the first trial's)
  std::filesystem::path dir;      // where they write their results and their log
  int steps = 200;                // --probe-steps
  std::string precision = "f32";  // --precision of the measuring processes
  // The search's trial-steps in all, and its trials (0: not known; every count measured over
  // `steps`): the processes measured train at most kFuseProbeShare of those steps together, and
  // where that leaves fewer than kMinProbeSteps each, nothing is measured (a search shorter than
  // measuring it would be): the most trials at once there are (up to the cores on a CPU, 4 on a
  // GPU), whose process starts overlap.
  int64_t search_steps = 0;
  int trials = 0;
  // Fused trials (tune --fuse): one group at a time on a device, not measured (on the CPU the
  // group spreads its trials over every core).
  int fused_cpu = 0;  // the most trials in a group (0: trials not fused)
  int fused_gpu = 0;  // the same on a GPU (tune --fuse K only)
  // The group sizes measured for fused_cpu (measure_fuse_cap; empty: not measured, as asked).
  std::vector<ParallelOption> fused_options;
  TrainResultReader read_result;
  // Told before each measurement: K trials at once on `device`.
  std::function<void(int k, const std::string& device)> measuring;
};

// What measure_fuse_cap may spend: the steps a group is timed over at most (--probe-steps), the
// trial-steps the search trains in all (its trials' epochs times their steps per epoch, summed),
// and the seconds a size may take at most.
struct FuseProbe {
  int64_t steps = 200;
  int64_t search_steps = 0;
  double budget_s = 1.5;
  // Told once, before the first group is timed.
  std::function<void()> measuring;
};

// A share of the search's own time, the most the probe spends timing one group size: the search
// trained one trial at a time would take one trial's step times its trial-steps, and the probe
// pays only where it can save more than it costs. Trials at once (--fuse off) are measured within
// the same share of the search's trial-steps.
inline constexpr double kFuseProbeShare = 0.05;
// The fewest steps a group or a measuring process is timed over: its median step is the figure.
inline constexpr int64_t kMinProbeSteps = 10;

// The fused group size (tune --fuse auto) that trains the most samples per second on `backend`:
// groups of K trials of `spec` (seeds apart) trained as one (train/trials.h), for K = 4, 16, 64,
// ... below `cap` and `cap` itself, each timed by its median step over at most `probe.steps`
// steps, and over at most kFuseProbeShare of the search's own time (one trial's step times
// `probe.search_steps`) and `probe.budget_s` seconds: a group that cannot be set up (each trial's
// model and plan, at what one trial's cost) and take 10 steps within that is not tried (the next
// size is predicted from the last one timed). The size chosen from those timed (choose_fuse_size);
// each K measured goes to `options` (threads 0: the backend's). `cap` when there is nothing to
// choose (one size), where no two sizes could be timed (can_compare_sizes), or no group could be
// timed (a search shorter than timing it would be).
int measure_fuse_cap(Backend& backend, const ModelSpec& spec, const DataSplit& data, int cap,
                     const FuseProbe& probe, std::vector<ParallelOption>& options);

// The group size --fuse auto takes from the sizes timed (`options`, the first of `sizes`, fewer
// where the budget held no more): the largest within 5% of the fastest rate (fewer, larger
// groups: fewer processes to start), or, where that is the largest timed and larger sizes were
// not timed, the largest size (taken as fast a trial as the largest timed); `sizes.back()` where
// none was timed.
int choose_fuse_size(const std::vector<ParallelOption>& options, const std::vector<int>& sizes);

// Whether timing group sizes can choose between them: the second of `sizes` (a choice needs two
// timed) can be set up within `budget_s` at `setup_s` a trial. One size timed decides nothing
// (choose_fuse_size takes the sizes not reached as fast as it: the largest), so where only the
// first fits, none is timed: on this machine a 16-trial mnist-mlp search timed a group of 4 for
// 1.1 s and took 16 (docs/benchmarks.md, "A search of mnist-mlp on the cluster").
bool can_compare_sizes(double setup_s, double budget_s, const std::vector<int>& sizes);

// CPU threads for each of `k` trials at once: --threads, else the cores shared among them.
int trial_threads(int threads, int cores, int k);

// The choice for each of `devices`, replacing `choices` (the record's: a device measured before a
// restart keeps its measurement; --parallel replaces any; a choice for another device, such as an
// MPI rank's slot of a search stopped under a launcher, goes). Throws UserError where a measuring
// process fails, with its log's error.
void choose_parallel(std::vector<ParallelChoice>& choices, const std::vector<std::string>& devices,
                     const ParallelSettings& s);

}  // namespace xo

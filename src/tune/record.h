// What `crossover tune` found: the trials with their values, learning curves, objective and cost,
// the halving decisions, the measured choice of concurrent trials, and the predicted cost of the
// same search elsewhere. Written as results.json (`crossover.tune/1`), results.csv and report.html
// after every trial that finishes, and read back when the same search starts again.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/halving.h"

namespace xo {

inline constexpr char kTuneSchema[] = "crossover.tune/1";

// One epoch of a trial's learning curve (NaN: not measured, e.g. no validation split).
struct CurvePoint {
  int64_t epoch = 0;
  double loss = std::numeric_limits<double>::quiet_NaN();
  double val_loss = std::numeric_limits<double>::quiet_NaN();
  double val_accuracy_percent = std::numeric_limits<double>::quiet_NaN();
  double test_loss = std::numeric_limits<double>::quiet_NaN();
  double test_accuracy_percent = std::numeric_limits<double>::quiet_NaN();
  double seconds = 0;  // the epoch's training wall time
};

enum class TrialStatus {
  Pending,       // not started yet (or interrupted before its first epoch)
  Running,       // in a worker now (in a file: the search was stopped while it ran)
  Paused,        // completed a rung below the last; halving may give it more epochs
  Stopped,       // halving gave it no more epochs
  Finished,      // trained every epoch of the spec
  EarlyStopped,  // its own [train.early_stopping] ended it
  Diverged,      // the loss became NaN or infinite
  Failed,        // the trial's process failed (its message kept)
};
const char* trial_status_name(TrialStatus s);
std::optional<TrialStatus> parse_trial_status(const std::string& text);

struct TrialRecord {
  std::string id;                                           // "t03"
  std::vector<std::pair<std::string, std::string>> values;  // KEY, VALUE as varied
  TrialStatus status = TrialStatus::Pending;
  std::string device;  // where it ran: "cpu", "cuda:0"
  int threads = 0;     // CPU threads it was given (0 on a GPU)
  int rank = 0;        // the MPI rank that ran it (0 without MPI)
  std::string host;    // that rank's machine (empty without MPI)
  int64_t params = 0;
  int64_t epochs = 0;  // trained so far
  int64_t steps = 0;
  double objective = std::numeric_limits<double>::quiet_NaN();  // at the epoch its weights are
  std::vector<double> rung_objective;                           // at each rung it completed
  std::vector<CurvePoint> curve;
  double train_seconds = 0;    // its epochs' training time (a fused trial's share)
  double process_seconds = 0;  // its processes' wall time (start-up, data, evaluation included)
  // Median step; a fused trial's share of its group's (the group's step over its trials).
  double step_ms = std::numeric_limits<double>::quiet_NaN();
  // The most trials that ran at once on its device while it ran: its timings are those of a
  // shared device when above 1.
  int concurrent = 1;
  // The fused group it last trained in ("g003", tune --fuse; empty: a process of its own) and
  // how many trials that group trained at once.
  std::string group;
  int fused = 1;
  // Its process time priced at TuneRecord::dollars_instance's rate, predicted for that instance's
  // device (NaN: no instance priced).
  double dollars = std::numeric_limits<double>::quiet_NaN();
  std::string error;  // a failed trial's message
  // Why its result is not bit-identical to an uninterrupted run's (a checkpoint resumed in another
  // number of batch shards: TrainResult::resumed_differently); empty: it is.
  std::string resumed_differently;
  // Failed by the machine (a full disk, a limit on files, killed by the kernel), not by its own
  // settings: the search retries it when it runs again.
  bool machine_failed = false;
};

// A halving decision: a trial promoted to more epochs or stopped, with its place at the rung.
struct HalvingDecision {
  std::string trial;
  bool promoted = false;
  int64_t at_epochs = 0;
  int64_t to_epochs = 0;  // a promotion's new budget
  int place = 0, of = 0, top = 0;
};

// How many trials at once: each option measured as K concurrent processes training the first
// trial's spec for a fixed number of steps, summing their samples per second.
struct ParallelOption {
  int k = 1;
  int threads = 0;                // per trial (CPU)
  double samples_per_second = 0;  // all K together
  std::vector<double> per_trial;  // each process's own
};
struct ParallelChoice {
  std::string device;
  int k = 1;
  bool measured = false;  // false: --parallel chose it (or fusing did), or `short_search`
  std::vector<ParallelOption> options;
  // Trials fused into one group at most (tune --fuse) on this device, one group at a time: 0, not
  // fused; kMaxAutoFuse for --fuse auto.
  int fused = 0;
  // Not measured: the search is shorter than measuring trials at once would be (its trials'
  // steps too few for the probe's share, tune/parallel.h); `k` is then the most at once.
  bool short_search = false;
};

// The measured search's trials predicted on a catalog instance: one at a time, on N instances,
// and every trial on its own instance at once (wall time, billed instance-hours in dollars).
struct SearchCostLine {
  std::string instance;
  std::string device;  // its GPU or CPU
  int devices = 1;     // trials one instance runs at once (its GPUs, or 1)
  double price_per_hour = 0;
  bool lower_bound = false;  // a GPU predicted at its roofline: at least this long
  struct Plan {
    int instances = 1;
    double wall_seconds = 0;
    double dollars = 0;
  };
  std::vector<Plan> plans;  // 1, N, all at once
};

struct TuneRecord {
  std::string schema = kTuneSchema;
  std::string model;              // the base spec's name
  std::string spec_toml;          // the base spec
  std::vector<std::string> vary;  // the --vary arguments
  std::string mode;               // "grid" or "random"
  int64_t samples = 0;
  uint64_t seed = 0;
  std::string objective;  // a metric name: val_accuracy, test_accuracy, val_loss, test_loss, loss
  bool higher_is_better = true;
  int64_t max_epochs = 0;
  std::optional<HalvingSettings> halving;
  std::vector<int64_t> rungs;
  std::vector<TrialRecord> trials;
  std::vector<HalvingDecision> decisions;
  std::vector<ParallelChoice> parallel;
  int ranks = 1;              // MPI ranks that ran trials
  double wall_seconds = 0;    // the search's wall time so far (across restarts)
  double device_seconds = 0;  // the trials' process time summed
  std::string best;           // the best trial's id ("" while none finished)
  std::vector<SearchCostLine> cost;
  std::string dollars_instance;  // the instance each trial's dollars are for: the search's cheapest
  std::string cost_note;         // what the predictions assume
  bool interrupted = false;
};

// The trials best first: those that trained every epoch (finished or stopped by their own early
// stopping) before those halving stopped, each group by the objective; failed ones (NaN) last.
std::vector<size_t> trials_by_objective(const TuneRecord& r);

}  // namespace xo

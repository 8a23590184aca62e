// Successive halving as ASHA runs it (Li et al., "A System for Massively Parallel Hyperparameter
// Tuning", MLSys 2020): trials start at the smallest budget (rung 0: `min_epochs`); whenever a
// slot is free, the best trial of the highest rung that is among the top 1/factor of the trials
// that rung has seen, and not promoted yet, gets the next rung's budget (`factor` times more
// epochs, up to train.epochs); else a new trial starts. Weak trials stop early without waiting
// for a whole rung to finish. A pure function of the trials' progress, so every decision can be
// recorded and replayed, and checked against a hand-computed example.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xo {

struct HalvingSettings {
  int64_t min_epochs = 1;
  int64_t factor = 3;
};

// The epochs of each rung: min_epochs, min_epochs * factor, ... up to and ending at max_epochs.
// Without halving, one rung: max_epochs.
std::vector<int64_t> rung_epochs(const std::optional<HalvingSettings>& h, int64_t max_epochs);

// Where one trial is: the highest rung it completed (-1: none), its objective there (NaN where it
// failed: the worst), whether it runs now, and whether it can go no further (it failed, stopped
// early by its own rule, or completed the last rung).
struct TrialProgress {
  int rung = -1;
  std::vector<double> value;  // per completed rung
  bool running = false;
  bool ended = false;
  bool started() const { return running || rung >= 0; }
};

struct HalvingJob {
  size_t trial = 0;
  int rung = 0;  // the rung to run it to
  bool promotion = false;
  int place = 0;  // a promotion: its place among the trials that completed the rung below
  int of = 0;     //   (1-based), of how many, and how many of them the top 1/factor holds
  int top = 0;
};

// The next job for a free slot, or none (wait for running trials, or the search is done). Trials
// are taken in their order when new; `higher_is_better` says how the objective ranks.
std::optional<HalvingJob> next_halving_job(const std::vector<TrialProgress>& trials, int rungs,
                                           int64_t factor, bool higher_is_better);

// A trial's place (1-based) among those that completed `rung`, and how many did; ties keep the
// trials' order.
std::pair<int, int> place_at_rung(const std::vector<TrialProgress>& trials, size_t trial, int rung,
                                  bool higher_is_better);

}  // namespace xo

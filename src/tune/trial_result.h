// What a search reads from a trial's `crossover train`: the figure trials are ranked by, chosen
// once from --objective and the data's splits, and the trial's record brought up to date with the
// result its process wrote.
#pragma once

#include <string>

#include "data/dataset.h"
#include "model/spec.h"
#include "optim/schedule.h"
#include "train/trainer.h"
#include "tune/record.h"

namespace xo {

// `objective` as given (--objective; empty: the default), checked against what the data has: a
// validation or test metric needs that split, and a regression has no accuracy. The default is
// held-out data before the test split (tuning on the test split overfits it), accuracy where the
// model has one; else the training loss. Throws UserError naming the flag.
Metric objective_metric(const std::string& objective, const ModelSpec& base, const DataSplit& data,
                        bool regression);

// The trial's epochs, steps, curve and timings from `r`, and its objective where its saved weights
// are: the best epoch where early stopping put that one back, else the last.
void record_result(TrialRecord& t, const TrainResult& r, Metric metric);

// `value` as the trial's objective at `rung` (NaN: it failed there).
void end_rung(TrialRecord& t, int rung, double value);

// The status of a trial whose process trained to its end: stopped early by its own rule, paused
// at a rung below the last, or finished.
TrialStatus trained_status(const TrainResult& r);

}  // namespace xo

// A recorded run and its replay compared figure by figure (`crossover replay`): the data and the
// final parameters by their hashes, each epoch's training loss, training error, test loss and test
// accuracy by value (bit-identical, within a relative tolerance, or different), the setup each
// ran with, and the median step time as a ratio (a measurement: never "different").
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "measure/run_record.h"

namespace xo {

// Ordered from best to worst: a run's verdict is its worst figure's.
enum class Verdict { Identical, WithinTolerance, Different };

enum class Figure {
  Data,
  Parameters,
  Epochs,
  Loss,
  TrainError,
  ValLoss,
  ValAccuracy,
  TestLoss,
  TestAccuracy
};

const char* figure_name(Figure f);  // "data", "final parameters", "epochs", "loss", ...

struct FigureComparison {
  Figure figure = Figure::Loss;
  int64_t epoch = 0;  // 1-based for the per-epoch figures; 0 for the run's own
  Verdict verdict = Verdict::Identical;
  // The values compared: numbers for the epoch count and the per-epoch figures (NaN for the
  // hashes), the hashes' text for the data and the final parameters.
  double recorded = std::numeric_limits<double>::quiet_NaN();
  double replayed = std::numeric_limits<double>::quiet_NaN();
  std::string recorded_hash, replayed_hash;
};

// A part of the setup that differs between the two runs: what it explains, not an outcome.
struct SetupDifference {
  std::string what;  // "device", "libraries", "threads", "batch shards", "precision", ...
  std::string recorded, replayed;
};

struct RunComparison {
  std::string model, device;
  std::vector<FigureComparison> figures;
  std::vector<SetupDifference> setup;
  // The recorded run was stopped by Ctrl-C: its finished epochs are compared, its epoch count and
  // final parameters are not.
  bool recorded_interrupted = false;
  double recorded_step_ms = std::numeric_limits<double>::quiet_NaN();  // median step times
  double replayed_step_ms = std::numeric_limits<double>::quiet_NaN();

  Verdict verdict() const;    // the worst figure's (Identical when there is none)
  bool data_differs() const;  // then every other figure compares different experiments
  double step_ratio() const { return replayed_step_ms / recorded_step_ms; }
};

// Within `tolerance` when |replayed - recorded| <= tolerance * max(|recorded|, |replayed|);
// Identical when the bits agree, NaN counting as equal to NaN (a diverged loss, replayed, is NaN
// again).
Verdict compare_values(double recorded, double replayed, double tolerance);

// The two runs figure by figure. Test figures are compared where either run had a test set.
RunComparison compare_runs(const RunRecord& recorded, const RunRecord& replayed, double tolerance);

}  // namespace xo

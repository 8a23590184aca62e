// One trial of a search as a process: its files in the search's folder, the `crossover train`
// command line that runs it, what a failed one said, and the figure trials are ranked by.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/source.h"
#include "model/spec.h"
#include "train/epoch_rules.h"

namespace xo {

// A trial's folder under the search's --out and the files in it.
struct TrialFiles {
  std::filesystem::path dir, spec, result, weights, checkpoints, log;
};
TrialFiles trial_files(const std::filesystem::path& out, const std::string& id);

// The `crossover train` arguments of a trial on `device` with `threads`, pausing after
// `pause_after` epochs (a halving rung) or training to the end. It resumes from its checkpoint
// where one is (a promoted or stopped trial goes on).
std::vector<std::string> train_args(const TrialFiles& f, const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every);

// The spec as a file in a trial's folder: the paths it names (data, test split, initial weights),
// which the spec reader keeps relative to where crossover runs, made absolute, so that they read
// the same from there.
ModelSpec with_absolute_paths(ModelSpec spec);

// The last line of `log` that says "error", for a failed trial's record; else the exit code.
std::string failure_text(const std::filesystem::path& log, int code);

// The figure the search ranks trials by: --objective (empty: held-out data before the test split,
// accuracy where the model has one, else the training loss), checked against the data's splits.
Metric objective_metric(const std::string& objective, const ModelSpec& base, const DataSplit& data,
                        bool regression);

// Arguments as one text for an MPI message (NUL-separated), and back.
std::string join_args(const std::vector<std::string>& args);
std::vector<std::string> split_args(const std::string& text);

}  // namespace xo

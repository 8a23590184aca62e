// The options the commands share, registered once: checkpoints and stops, what a measuring job
// measures and where it writes, the GPU's arithmetic, and the cost assumptions.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "job/options.h"

namespace xo::cli {

// Registers each group of flags into its job option (job/options.h).
void add_checkpoint_options(CLI::App* sub, CheckpointFlags& f, bool for_train);
void add_data_options(CLI::App* sub, DataFlags& f);
void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps);
void add_cost_options(CLI::App* sub, CostOptions& o);
// --threads, the one declaration of it: CPU threads for the process (0: the cores it may run on,
// shared among the ranks on its machine), or for each trial of a search (`per_trial`: unset, the
// cores shared among the trials at once).
void add_threads_option(CLI::App* sub, int& threads, bool per_trial = false);
// --precision and --no-graph, shared by `train` and the measuring commands.
void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step);
// --precision alone (tune, train-group: their processes and groups take no --no-graph).
void add_precision_option(CLI::App* sub, std::string& precision);

}  // namespace xo::cli

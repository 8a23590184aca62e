// The options the commands share, registered once: checkpoints and stops, what a measuring job
// measures and where it writes, the GPU's arithmetic, and the cost assumptions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "model/spec.h"
#include "report/manifest.h"
#include "train/checkpoint.h"

namespace xo::cli {

// What every training command takes about checkpoints and stops: --checkpoint-every, --resume,
// --restart, --on-nan (and --checkpoint-dir for `train`; the measuring commands keep theirs in
// --out).
struct CheckpointFlags {
  std::string every = "60s";
  std::string dir;
  bool resume = false;   // `train`: continue from the checkpoint (the others resume by themselves)
  bool resume_if_any = false;  // `train` as a search's trial runs it: resume where there is one
  bool restart = false;  // discard what an earlier, unfinished run left and start afresh
  std::string on_nan = "stop";
};
void add_checkpoint_options(CLI::App* sub, CheckpointFlags& f, bool for_train);
// `train`'s checkpoints: crossover-checkpoints/MODEL in the working folder.
std::filesystem::path default_checkpoint_dir(const std::string& model);
// The checkpoint options for one run into `dir`. Before any work: a checkpoint already there is
// continued with --resume, discarded with --restart, and else refused with a message saying so.
CheckpointOptions checkpoint_options(const CheckpointFlags& f, const std::filesystem::path& dir);

// What every command that trains takes about its model's data and first weights, as `train`
// does: --data, --test-data, --init.
struct DataFlags {
  std::string data;       // a CSV file or a source ("fashion-mnist", "idx:DIR", …): spec.data
  std::string test_data;  // a CSV file of the same columns: the test split (spec's data.test)
  std::string init;       // initial weights: a safetensors file (PyTorch names) or an ONNX model
};
void add_data_options(CLI::App* sub, DataFlags& f);
// The spec a command names (a built-in name, a TOML spec or an ONNX model, resolve_spec) with the
// flags' data and initial weights in place of its own.
ModelSpec resolve_spec_with(const std::string& name_or_path, const DataFlags& f);
// The same for a command that uses a trained model (`evaluate`, `predict`), its notes printed:
// refused, naming `command`, where it names no trained weights (what it gave would be its random
// start's).
ModelSpec trained_spec_with(const std::string& command, const std::string& name_or_path,
                            const DataFlags& f);

// Where a measuring job writes when --out is not given.
inline constexpr char kDefaultOutFolder[] = "crossover-results";

struct MeasureOptions {
  // What the job's manifest records and `replay` repeats: the devices (empty: every device
  // present), --epochs, --steps, --threads, the per-node profile's steps, --precision, --no-graph.
  ExecutionSettings settings = {.profile_steps = 10};
  double sample_interval_s = 0.1;
  bool reprobe = false;    // measure the peaks again rather than use the cache
  std::string out;         // empty: kDefaultOutFolder, or a dated folder (Session::out())
  bool overwrite = false;  // replace a finished job in `out` rather than refuse
  CheckpointFlags checkpoint;
  DataFlags data;
};

// The cost options every advising command takes.
struct CostOptions {
  std::vector<std::string> catalogs;  // user catalog files merged over the shipped one
  std::vector<std::string> prices;    // ID=USD overrides
  AdviceOptions advice;
};

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps);
void add_cost_options(CLI::App* sub, CostOptions& o);
// --threads, the one declaration of it: CPU threads for the process (0: the cores it may run on,
// shared among the ranks on its machine), or for each trial of a search (`per_trial`: unset, the
// cores shared among the trials at once).
void add_threads_option(CLI::App* sub, int& threads, bool per_trial = false);
// --precision and --no-graph, shared by `train` and the measuring commands.
void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step);
Catalog load_user_catalog(const CostOptions& o);

}  // namespace xo::cli

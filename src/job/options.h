// What a job is asked to do, as values: the options every front end fills (the CLI from its flags,
// the Python module from its arguments) and the few decisions made from them before any work —
// the spec with the data and weights given, where checkpoints go, the catalog with the user's
// prices, the manifest a report carries.
#pragma once

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

namespace xo {

class JobHooks;
struct DataSplit;
struct RunRecord;

// Checkpoints and stops: --checkpoint-every, --resume, --restart, --on-nan (and --checkpoint-dir
// for `train`; the measuring jobs keep theirs in their output folder).
struct CheckpointFlags {
  std::string every = "60s";
  std::string dir;
  bool resume = false;  // `train`: continue from the checkpoint (the others resume by themselves)
  bool resume_if_any = false;  // `train` as a search's trial runs it: resume where there is one
  bool restart = false;        // discard what an earlier, unfinished run left and start afresh
  std::string on_nan = "stop";
};
// `train`'s checkpoints: crossover-checkpoints/MODEL in the working folder.
std::filesystem::path default_checkpoint_dir(const std::string& model);
// The checkpoint options for one run into `dir`. Before any work: a checkpoint already there is
// continued with `resume`, discarded with `restart` (said through `hooks`), and else refused with
// a message saying so.
CheckpointOptions checkpoint_options(const CheckpointFlags& f, const std::filesystem::path& dir,
                                     JobHooks& hooks);

// A model's data and first weights in place of its spec's: --data, --test-data, --init.
struct DataFlags {
  std::string data;       // a CSV file or a source ("fashion-mnist", "idx:DIR", …): spec.data
  std::string test_data;  // a CSV file of the same columns: the test split (spec's data.test)
  std::string init;       // initial weights: a safetensors file (PyTorch names) or an ONNX model
};
// The spec a job names (a built-in name, a TOML spec or an ONNX model, resolve_spec) with the
// flags' data and initial weights in place of its own.
ModelSpec resolve_spec_with(const std::string& name_or_path, const DataFlags& f);
// The same for a job that uses a trained model (`evaluate`, `predict`), its notes told: refused,
// naming `command`, where it names no trained weights (what it gave would be its random start's).
ModelSpec trained_spec_with(const std::string& command, const std::string& name_or_path,
                            const DataFlags& f, JobHooks& hooks);

// Where a measuring job writes when no folder is given.
inline constexpr char kDefaultOutFolder[] = "crossover-results";

struct MeasureOptions {
  // What the job's manifest records and `replay` repeats: the devices (empty: every device
  // present), --epochs, --steps, --threads, the per-node profile's steps, --precision, --no-graph.
  ExecutionSettings settings = {.node_time_steps = 10};
  double sample_interval_s = 0.1;
  bool reprobe = false;    // measure the peaks again rather than use the cache
  std::string out;         // empty: kDefaultOutFolder, or a dated folder (Session::out())
  bool overwrite = false;  // replace a finished job in `out` rather than refuse
  CheckpointFlags checkpoint;
  DataFlags data;
  // How the job was started, as the manifest records it (the shell command line, or a Python
  // call); it also names the job in its folder's lock.
  std::string command_line;
  // The Python module's arrays in place of each spec's data (data/arrays.h); null: the specs'.
  const DataSplit* arrays = nullptr;
};

// The cost assumptions of every advising job.
struct CostOptions {
  std::vector<std::string> catalogs;  // user catalog files merged over the shipped one
  std::vector<std::string> prices;    // ID=USD overrides
  AdviceOptions advice;
};
// The shipped catalog with the user's catalogs and prices over it; the assumptions checked.
Catalog load_user_catalog(const CostOptions& o);

// The manifest of a job measured with `o` on `devices` (resolved ids): this build, its libraries
// and those of the devices `runs` used, the command line and the settings.
Manifest job_manifest(const MeasureOptions& o, const std::vector<std::string>& devices,
                      const std::vector<RunRecord>& runs);
// The measuring options that repeat a job recorded with `settings` (`crossover replay`).
MeasureOptions measure_options(const ExecutionSettings& settings);

}  // namespace xo

// What `run`, `sweep`, `advise` and `cost` share: the devices and their backends, each device's
// measured peaks (probed once, cached), training a spec with the utilisation sampler running and
// a per-layer profile, the progress bar, the catalog with the user's overrides, and the report
// document written after every model (so an interruption keeps what finished).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "cli/commands.h"
#include "core/file.h"
#include "measure/peaks.h"
#include "measure/run.h"
#include "report/document.h"
#include "report/machine.h"

namespace xo::mpi {
class World;
}

namespace xo {
class DataParallel;
}

namespace xo::cli {

// An error on one rank of an MPI job: printed with the rank, then every rank of the job ends at
// once (2 for bad input, 3 for an internal error, 130 for a stop request), none left waiting in a
// collective.
[[noreturn]] void end_job(const mpi::World& world, const std::exception& e);

// What every training command takes about checkpoints and stops: --checkpoint-every, --resume,
// --restart, --on-nan (and --checkpoint-dir for `train`; the measuring commands keep theirs in
// --out).
struct CheckpointFlags {
  std::string every = "60s";
  std::string dir;
  bool resume = false;   // `train`: continue from the checkpoint (the others resume by themselves)
  bool restart = false;  // discard what an earlier, unfinished run left and start afresh
  std::string on_nan = "stop";
};
void add_checkpoint_options(CLI::App* sub, CheckpointFlags& f, bool for_train);
// `train`'s checkpoints: crossover-checkpoints/MODEL in the working folder.
std::filesystem::path default_checkpoint_dir(const std::string& model);
// The checkpoint options for one run into `dir`. Before any work: a checkpoint already there is
// continued with --resume, discarded with --restart, and else refused with a message saying so.
CheckpointOptions checkpoint_options(const CheckpointFlags& f, const std::filesystem::path& dir);
// Why a run stopped before its end (interrupted, diverged), with where its checkpoint is and how
// to go on (`how_to_resume`, e.g. "the same command with --resume continues it"); empty for a run
// that finished.
std::string stop_message(const TrainResult& r, const CheckpointOptions& checkpoint,
                         const std::string& how_to_resume);
// What early stopping did: "stopped early after epoch 7: test_loss did not improve by more than 0
// for 5 epochs (best 0.3121 at epoch 2; weights of epoch 2 restored)"; empty without it.
std::string early_stopping_message(const TrainResult& r);
// 0 finished, 130 interrupted, kExitDiverged stopped because the loss was not finite.
int exit_code(const TrainResult& r);

// Where a measuring job writes when --out is not given.
inline constexpr char kDefaultOutFolder[] = "crossover-results";

struct MeasureOptions {
  std::vector<std::string> devices;  // empty: every device present
  std::optional<int64_t> epochs;
  int64_t max_steps = 0;  // 0: train every epoch
  int threads = 0;
  int profile_steps = 10;
  double sample_interval_s = 0.1;
  bool reprobe = false;           // measure the peaks again rather than use the cache
  std::string precision = "f32";  // GPUs' matmul arithmetic (the CPU always runs f32)
  bool record_step = true;        // replay each step as one CUDA Graph where the device can
  std::string out;                // empty: kDefaultOutFolder, or a dated folder (Session::out())
  bool overwrite = false;         // replace a finished job in `out` rather than refuse
  CheckpointFlags checkpoint;
};

// The cost options every advising command takes.
struct CostOptions {
  std::vector<std::string> catalogs;  // user catalog files merged over the shipped one
  std::vector<std::string> prices;    // ID=USD overrides
  AdviceOptions advice;
};

// A spec's notes (how an imported model was understood) on stderr, "note: NAME: …".
void print_notes(const ModelSpec& spec);
// What a batch larger than the training set becomes (every step takes the whole set, as PyTorch's
// DataLoader does), said rather than done silently; empty when the batch fits.
std::string batch_note(const ModelSpec& spec, int64_t training_samples);

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps);
void add_cost_options(CLI::App* sub, CostOptions& o);
// --precision and --no-graph, shared by `train` and the measuring commands.
void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step);
Catalog load_user_catalog(const CostOptions& o);

class Session {
 public:
  // Locks the --out folder first (FolderLock: a second job into it is refused at once), then
  // resolves the devices and probes their peaks. Under an MPI launcher (`world`), rank 0 does so
  // and reports; every other rank follows: it trains its slice of the runs rank 0 trains
  // (measure() with a DataParallel), with rank 0's --out and checkpoints, and prints nothing.
  explicit Session(const MeasureOptions& o, const mpi::World* world = nullptr);

  // This process reports: no launcher, or rank 0 of the job.
  bool lead() const { return lead_; }

  // The folder the job writes: --out, or the default chosen when it was not given.
  const std::string& out() const { return o_.out; }
  const std::vector<std::string>& devices() const { return devices_; }
  const std::vector<DevicePeaks>& peaks() const { return peaks_; }
  const std::vector<RunRecord>& runs() const { return runs_; }
  bool stopped() const { return stopped_; }

  // Trains `spec` on `device` (progress on the terminal, the sampler running) and appends the
  // run. `job` / `jobs` place it in the whole job for the progress bar. Null when a stop request
  // cut it short before it had trained (while its data loaded, say): stopped() then holds.
  // With `data_parallel`, every rank of its group calls it and trains its slice of each batch;
  // the followers' runs are null (rank 0 records the run).
  const RunRecord* measure(const ModelSpec& spec, const std::string& device, size_t job,
                           size_t jobs, const std::string& axis = "", double axis_value = 0,
                           DataParallel* data_parallel = nullptr);

  // The report document around the runs measured so far, each analysed against its peaks;
  // complete only once the job has `finished` every run, uninterrupted.
  Report report(const std::string& kind, const std::string& title, bool finished) const;

  // Picks up the job `kind`/`title` where an earlier process left it in the --out folder: its
  // finished runs are kept (measure() returns them instead of training again) and the run it was
  // in resumes from its checkpoint. A finished job's folder starts afresh; an unfinished one of
  // another job is refused unless --restart. Call before the first measure().
  void resume_job(const std::string& kind, const std::string& title);
  // Removes the checkpoints of the runs finished so far: call once the report holding them is
  // written.
  void settle();

 private:
  Backend& backend(const std::string& device);

  bool lead_ = true;
  MeasureOptions o_;
  CheckpointInterval checkpoint_every_;
  // --out, for the whole job: taken before any work, dropped at its end (rank 0's alone).
  std::optional<FolderLock> out_lock_;
  std::vector<std::string> devices_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DevicePeaks> peaks_;
  MachineInfo machine_;
  std::vector<RunRecord> runs_;
  std::vector<RunRecord> earlier_;  // finished by an earlier process of this job (resume_job)
  std::vector<std::filesystem::path> finished_checkpoints_;
  Progress progress_;
  bool stopped_ = false;
  double started_ = 0;
};

// The manifest of a job measured with `o` on `devices` (resolved ids): this build, its
// libraries and those of the devices `runs` used, the command line and the settings
// (cli/manifest.cpp).
Manifest job_manifest(const MeasureOptions& o, const std::vector<std::string>& devices,
                      const std::vector<RunRecord>& runs);
// The measuring options that repeat a job recorded with `settings` (`crossover replay`).
MeasureOptions measure_options(const ExecutionSettings& settings);

// `o` with the device profiles predictions start from (advice.h use_profiles): this machine's
// cached ones (`crossover devices --profile`) and the shipped ones. Unchanged when it has some.
AdviceOptions with_profiles(const AdviceOptions& o);

// Adds predictions, cost, the verdict and advice for `focus` to a report document; the crossover
// is the report's sweep's (along `axis`, predicted or measured), if it has one.
void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::string& axis, bool crossover_predicted);

}  // namespace xo::cli

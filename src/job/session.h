// A measuring job (`run`, `sweep`, `advise`, `cost`): its --out folder, locked, continued or
// started afresh; the devices and their backends, each device's measured peaks (probed once,
// cached); every run measured (measure/run.h), its progress and its line told through the job's
// hooks; and the report document around the runs so far (written after every model by the job, so
// that an interruption keeps what finished).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/file.h"
#include "job/options.h"
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

namespace xo {

class JobHooks;

class Session {
 public:
  // Locks the --out folder first (FolderLock: a second job into it is refused at once), then
  // resolves the devices and probes their peaks. Under an MPI launcher (`world`), rank 0 does so
  // and reports; every other rank follows: it trains its slice of the runs rank 0 trains
  // (measure() with a DataParallel), with rank 0's --out and checkpoints, and prints nothing.
  // What it says goes to `hooks`, which must outlive it.
  // bf16_beside: the job's models include one bf16 changes (bf16_changes_products), so the CPU at
  // bf16 joins the devices where none were named (devices()).
  Session(const MeasureOptions& o, JobHooks& hooks, const mpi::World* world = nullptr,
          bool bf16_beside = false);

  // This process reports: no launcher, or rank 0 of the job.
  bool lead() const { return lead_; }

  // The folder the job writes: --out, or the default chosen when it was not given.
  const std::string& out() const { return o_.out; }
  // The devices the job measures on: those asked for, else every device here, with the CPU at bf16
  // (cpu:bf16) beside the CPU where it has AMX or AVX-512 BF16, the job runs at f32 and
  // bf16_beside.
  const std::vector<std::string>& devices() const { return devices_; }
  // Whether the job measures `spec` on `device`: cpu:bf16 that the job added beside cpu only where
  // bf16 changes one of the model's products (bf16_changes_products), elsewhere it would train
  // exactly as cpu does; a device the user named always.
  bool measures(const ModelSpec& spec, const std::string& device) const;
  const std::vector<DevicePeaks>& peaks() const { return peaks_; }
  const std::vector<RunRecord>& runs() const { return runs_; }
  bool stopped() const { return stopped_; }

  // Trains `spec` on `device` (its progress told, the sampler running) and appends the
  // run. `job` / `jobs` place it in the whole job for the progress bar. Null when a stop request
  // cut it short before it had trained (while its data loaded, say): stopped() then holds.
  // With `data_parallel`, every rank of its group calls it and trains its slice of each batch;
  // the followers' runs are null (rank 0 records the run).
  const RunRecord* measure(const ModelSpec& spec, const std::string& device, size_t job,
                           size_t jobs, const std::string& axis = "", double axis_value = 0,
                           DataParallel* data_parallel = nullptr);

  // `trials` trials of `spec` (seeds apart, everything else the spec's) trained as one fused
  // group on `device` (train/trials.h) and appended as one run: the first trial's record, named
  // "NAME xK", with the group's work (K trials' FLOPs and bytes a step), at `axis_value` along
  // `axis` (by default along "trials", at K). No checkpoints (a stopped job measures the group
  // again). Null when a stop came first. Throws UserError where the group cannot train as one
  // (more trials than the device's memory holds).
  const RunRecord* measure_trials(const ModelSpec& spec, int trials, const std::string& device,
                                  size_t job, size_t jobs, const std::string& axis = "trials",
                                  std::optional<double> axis_value = std::nullopt);

  // The runs measured from now on take at most `steps` training steps (0: as the options say);
  // a replay bounds each run by the steps it recorded.
  void limit_steps(int64_t steps) { step_limit_ = steps; }

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
  std::vector<RunRecord>::iterator earlier_run(const std::string& spec_toml,
                                               const std::string& device, int ranks);
  // Appends a run an earlier process of this job finished (earlier_run's), saying so.
  const RunRecord* keep_earlier(std::vector<RunRecord>::iterator earlier, const std::string& label);
  MeasureSettings settings_for(const ModelSpec& spec, const std::string& spec_toml,
                               const Backend& be, DataParallel* data_parallel);
  EpochCallback progress_bar(size_t job, size_t jobs, const std::string& label);
  void tell_measured(const std::string& label, const ModelSpec& spec, const RunRecord& run,
                     const CheckpointOptions& checkpoint) const;

  bool lead_ = true;
  JobHooks& hooks_;
  MeasureOptions o_;
  CheckpointInterval checkpoint_every_;
  // --out, for the whole job: taken before any work, dropped at its end (rank 0's alone).
  std::optional<FolderLock> out_lock_;
  std::vector<std::string> devices_;
  bool bf16_added_ = false;  // cpu:bf16 joined the devices by default (measures())
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DevicePeaks> peaks_;
  MachineInfo machine_;
  std::vector<RunRecord> runs_;
  std::vector<RunRecord> earlier_;  // finished by an earlier process of this job (resume_job)
  std::vector<std::filesystem::path> finished_checkpoints_;
  bool stopped_ = false;
  double started_ = 0;
  int64_t step_limit_ = 0;  // limit_steps
};

}  // namespace xo

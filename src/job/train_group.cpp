#include "job/train_group.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/file.h"
#include "io/safetensors.h"
#include "job/hooks.h"
#include "job/run_notes.h"
#include "measure/run.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/train_text.h"
#include "train/checkpoint.h"
#include "train/checkpoint_lock.h"
#include "train/trials.h"
#include "tune/trial_process.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

struct TrialLog {
  fs::path path;
  std::ofstream out;
  // Opened (created where new) before any work: its folder takes the trial's files. Where it
  // cannot, the trial's folder is named with why. No probe file is made and removed (each cost
  // a 32-trial group's file system an inode: 3.6 ms of its 48 on this machine's ext4).
  void open(const fs::path& folder) {
    errno = 0;
    out.open(path, std::ios::app);
    const int opened = out.is_open() ? 0 : (errno ? errno : EIO);
    const int writable = opened ? opened : ::access(folder.c_str(), W_OK) == 0 ? 0 : errno;
    if (writable != 0) {
      throw UserError(fmt::format("train-group: {}: cannot write a trial's files there ({})",
                                  folder.string(), std::strerror(writable)));
    }
  }
  void write(const std::string& text) { out << text << std::flush; }
};

// A trial's run as its folder holds it, its checkpoints' notes told and in its log.
FusedRun trial_run(const TrialFiles& f, const CheckpointInterval& every, bool resume,
                   const std::shared_ptr<TrialLog>& log, JobHooks& hooks) {
  FusedRun run;
  run.spec = resolve_spec(f.spec.string());
  run.checkpoint.dir = f.checkpoints;
  run.checkpoint.every = every;
  run.checkpoint.resume = resume;
  // What the trial's checkpoints say (resumed, a damaged one skipped).
  run.checkpoint.note = [log, &hooks](const std::string& m) {
    hooks.note("crossover: " + m);
    log->write(m + "\n");
  };
  return run;
}

// A trial's folder, named once: the files this command writes there are its own, so a link (or
// anything but a regular file, or a folder for its checkpoints) planted at their names is removed,
// never written through. `seen` holds the folders named before (as the file system names them).
// Where the trials take checkpoints, the trial's checkpoint folder is locked for the group's run
// (train/checkpoint_lock.h): the lock joins `locks`. The folder stays, empty, after a finished
// trial: a search makes them by the thousand, and each one removed slowed the next search's files
// (docs/benchmarks.md, "Files a search makes").
void own_trial_files(const TrialFiles& f, const std::string& dir, std::vector<fs::path>& seen,
                     bool checkpoints, std::vector<std::unique_ptr<CheckpointFolderLock>>& locks) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(f.dir, ec);
  if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) {
    throw UserError(fmt::format(
        "train-group: {} is named twice (each trial folder once: a trial trains once a group)",
        dir));
  }
  seen.push_back(canonical);
  for (const fs::path& p : {f.log, f.result, f.weights}) remove_unless_regular(p);
  remove_unless_folder(f.checkpoints);
  if (checkpoints) {
    locks.push_back(
        std::make_unique<CheckpointFolderLock>(f.checkpoints, "", CheckpointFolder::Keep));
  }
}

// Each trial's weights, result and last log line written, its finished checkpoints removed; the
// exit code: interrupted if any trial was, and a group of one's as its trial's `crossover train`
// (diverged too: a trial alone on a Dask worker trains as the group of its one folder).
int write_outcomes(const std::vector<RunRecord>& records, const std::vector<FusedRun>& runs,
                   const std::vector<TrialFiles>& files,
                   const std::vector<std::shared_ptr<TrialLog>>& logs,
                   const std::vector<std::vector<NamedTensor>>& weights, JobHooks& hooks) {
  int code = records.size() == 1 ? exit_code(records.front().result) : kExitOk;
  // Every trial's weights and result written together (their waits for the disk overlapped),
  // files of the search's own: a link planted at their names while the group trained is replaced,
  // never written through (own_trial_files removed those planted before it started).
  AtomicWrites outputs;
  for (size_t i = 0; i < records.size(); ++i) {
    const TrainResult& r = records[i].result;
    const TrialFiles& f = files[i];
    const std::string summary = train_summary(r, runs[i].spec.train.epochs);
    hooks.result(fmt::format("{}: {}", f.dir.filename().string(), summary));
    // Each trial's log says how its run ended, as its own `crossover train` would.
    logs[i]->write(summary);
    // Weights that hold NaN or infinities are not saved: the last good ones are in the checkpoint.
    if (!r.stopped_diverged) {
      outputs.replace(
          f.weights,
          encode_safetensors(weights[i],
                             {{"format", "pt"}, {"model", r.model}, {"producer", "crossover"}},
                             f.weights.string()));
    }
    const Utilisation& load = *records[i].utilisation;
    const TrainDocument doc{r, describe_machine(), load.mean_other_cores,
                            timings_contaminated(load)};
    outputs.replace(f.result, to_json(doc).dump(2) + "\n");
    if (r.interrupted) code = kExitInterrupted;
  }
  outputs.commit();
  // A finished trial's checkpoints hold nothing more (its result is on disk now); a paused,
  // stopped or diverged one's are where it goes on from.
  for (size_t i = 0; i < records.size(); ++i) {
    const TrainResult& r = records[i].result;
    if (!r.paused && !r.interrupted && !r.stopped_diverged)
      remove_checkpoints(files[i].checkpoints, CheckpointFolder::Keep);
  }
  return code;
}

}  // namespace

int train_group_job(const TrainGroupJob& o, JobHooks& hooks) {
  std::vector<TrialFiles> files;
  std::vector<FusedRun> runs;
  const CheckpointInterval every =
      parse_checkpoint_interval(o.checkpoint_every, "--checkpoint-every");
  if (o.pause_after > 0 && !every.enabled()) {
    throw UserError(
        "--pause-after needs checkpoints: with --checkpoint-every off there is nothing to go on "
        "from");
  }
  // Each trial's log, opened at its first line and kept open to the group's end (each line
  // flushed): what its checkpoints said, then how its run ended.
  std::vector<std::shared_ptr<TrialLog>> logs;
  std::vector<fs::path> seen;  // each trial's folder, as the file system names it
  std::vector<std::unique_ptr<CheckpointFolderLock>> locks;  // each trial's checkpoint folder
  for (const std::string& dir : o.dirs) {
    const TrialFiles f = trial_folder(dir);
    own_trial_files(f, dir, seen, every.enabled(), locks);
    logs.push_back(std::make_shared<TrialLog>(TrialLog{f.log, {}}));
    logs.back()->open(f.dir);
    runs.push_back(trial_run(f, every, o.resume, logs.back(), hooks));
    files.push_back(f);
  }
  std::vector<std::vector<NamedTensor>> weights(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].hooks.trained = [&weights, i](const Model& m) { weights[i] = m.export_params(); };
    if (!o.quiet) {
      runs[i].hooks.epoch = [name = files[i].dir.filename().string(),
                             scheduled = runs[i].spec.train.schedule.has_value(),
                             &hooks](const EpochRecord& e, int64_t n) {
        hooks.result(fmt::format("{}: {}", name, epoch_line(e, n, scheduled)));
      };
    }
  }
  DeviceRequest request = parse_device(o.device, o.threads, o.precision);
  const std::unique_ptr<Backend> backend = make_backend(request);
  MeasureSettings settings;
  settings.exec.stop_on_nan = o.on_nan == "stop";
  settings.exec.pause_after_epochs = o.pause_after;
  const std::vector<RunRecord> records = measure_fused(*backend, runs, settings);
  return write_outcomes(records, runs, files, logs, weights, hooks);
}

}  // namespace xo

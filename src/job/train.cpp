// `crossover train`'s job (job/train.h): one model trained, its outputs written, what it says
// told through the hooks.
#include "job/train.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "advisor/link_probe.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "data/source.h"
#include "distributed/mpi.h"
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
#include "train/data_parallel.h"

namespace xo {
namespace {

// The spec as named, with the flags' overrides.
ModelSpec train_spec(const TrainJob& o, JobHooks& hooks) {
  ModelSpec spec = o.model ? *o.model : resolve_spec_with(o.spec, o.data);
  if (o.epochs) spec.train.epochs = *o.epochs;
  if (o.batch) spec.train.batch = *o.batch;
  if (!o.optimizer.empty()) {
    for (OptimizerType type : kOptimizerTypes) {
      if (o.optimizer == optimizer_type_name(type) && type != spec.train.optimizer.type) {
        spec.train.optimizer = torch_defaults(type);
        if (!o.lr) {
          hooks.note(
              fmt::format("note: --optimizer {}: lr {} (torch.optim's default; --lr sets another)",
                          o.optimizer, spec.train.optimizer.lr));
        }
      }
    }
  }
  if (o.lr) spec.train.optimizer.lr = *o.lr;
  if (o.seed) spec.train.seed = *o.seed;
  return spec;
}

// Before any work: an unfinished run's checkpoint is continued or discarded only when asked.
// Across ranks rank 0 decides (and discards, with --restart) before any rank reads one. The
// process that writes the checkpoints (rank 0) locks their folder first, for the whole command:
// another run writing there is refused now, not found out a minute later.
CheckpointOptions train_checkpoints(const TrainJob& o, const std::string& model,
                                    const mpi::World* world, bool lead,
                                    std::optional<CheckpointFolderLock>& lock, JobHooks& hooks) {
  const std::filesystem::path dir = o.checkpoint.dir.empty()
                                        ? default_checkpoint_dir(model)
                                        : std::filesystem::path(o.checkpoint.dir);
  CheckpointOptions checkpoint;
  if (lead) {
    if (parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every").enabled())
      lock.emplace(dir, "--checkpoint-dir");
    checkpoint = checkpoint_options(o.checkpoint, dir, hooks);
  } else {
    checkpoint.every = parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every");
    checkpoint.resume = o.checkpoint.resume || o.checkpoint.resume_if_any;
    if (checkpoint.every.enabled() || checkpoint.resume) checkpoint.dir = dir;
  }
  if (world) world->broadcast(std::string());  // rank 0 has decided
  if (o.pause_after > 0 && !checkpoint.every.enabled()) {
    throw UserError(
        "--pause-after needs checkpoints: with --checkpoint-every off there is nothing to go on "
        "from");
  }
  return checkpoint;
}

// The GPUs of this machine that this build can train on.
int gpus_here() {
  int gpus = 0;
  for (const std::string& id : list_devices().available) {
    gpus += device_kind_of(id) == DeviceKind::Gpu;
  }
  return gpus;
}

// The device to train on. The ranks of a job on one machine share its cores: each takes its part
// unless told. GPU ranks (--device cuda, or auto where the machine has GPUs: `gpus`) take the
// machine's GPUs in turn by local rank (rank k of a machine with n GPUs: cuda:k mod n; several
// ranks may share one); cuda:N puts every rank of the machine on GPU N. Notes are rank 0's to
// print.
std::unique_ptr<Backend> train_backend(const TrainJob& o, const mpi::World* world, int gpus,
                                       bool lead, JobHooks& hooks) {
  const int threads = world ? threads_per_rank(o.threads, world->local_size()) : o.threads;
  DeviceRequest request = parse_device(o.device, threads, o.precision);
  if (world && gpus > 0 && (o.device == "cuda" || o.device == "auto")) {
    request.kind = "cuda";
    request.index = world->local_rank() % gpus;
  }
  auto backend = make_backend(request);
  if (lead && backend->info().kind == DeviceKind::Cpu && !request.note.empty()) {
    hooks.note(fmt::format("note: {}", request.note));
  }
  if (lead && backend->info().kind == DeviceKind::Cpu && request.precision == Precision::TF32) {
    hooks.note(
        fmt::format("note: --precision {} applies to GPUs; the CPU computes in f32", o.precision));
  }
  return backend;
}

MeasureSettings train_settings(const TrainJob& o, const CheckpointOptions& checkpoint,
                               DataParallel* ranks) {
  MeasureSettings settings;
  ExecutionOptions& exec = settings.exec;
  exec.shards = o.shards;
  exec.record_step = o.record_step;
  exec.stop_on_nan = o.checkpoint.on_nan == "stop";
  exec.checkpoint = checkpoint;
  exec.pause_after_epochs = o.pause_after;
  exec.max_steps = o.max_steps;
  exec.data_parallel = ranks;
  settings.init_weights = o.weights;
  settings.data = o.arrays;
  return settings;
}

// What the caller is told while the model trains (rank 0, unless `quiet`): the header once the
// model and its data are ready, then every epoch. --save's weights are taken once trained.
RunHooks train_hooks(const TrainJob& o, const ModelSpec& spec, const mpi::World* world, bool lead,
                     std::vector<NamedTensor>& weights, JobHooks& hooks) {
  const bool quiet = o.quiet || !lead;
  RunHooks run_hooks;
  run_hooks.ready = [&spec, &hooks, world, lead, quiet](const Model& model, const DataSplit& data) {
    if (const std::string note = batch_note(spec, data.train.samples); lead && !note.empty()) {
      hooks.note("note: " + note);
    }
    if (quiet) return;
    hooks.result(train_header(spec, model.parameter_count(), model.backend().info(),
                              world ? world->size() : 0, data));
  };
  if (!quiet) {
    run_hooks.epoch = [&hooks, scheduled = spec.train.schedule.has_value()](
                          const EpochRecord& e, int64_t n) { hooks.epoch(e, n, scheduled); };
  }
  if (lead && (!o.save.empty() || o.keep_weights)) {
    run_hooks.trained = [&weights](const Model& model) { weights = model.export_params(); };
  }
  return run_hooks;
}

// --save and --json, once the run is over. Weights that hold NaN or infinities are not saved:
// the last good ones are in the checkpoint.
void write_outputs(const TrainJob& o, const RunRecord& run, const std::vector<NamedTensor>& weights,
                   JobHooks& hooks) {
  const TrainResult& r = run.result;
  if (!o.save.empty() && r.stopped_diverged) {
    hooks.note(
        fmt::format("crossover: --save {}: not written, the parameters are not finite", o.save));
  } else if (!o.save.empty()) {
    save_safetensors(o.save, weights,
                     {{"format", "pt"}, {"model", r.model}, {"producer", "crossover"}});
  }
  if (!o.json.empty()) write_file_atomic(o.json, train_document(run).dump(2) + "\n");
}

// The results are written: a finished run's checkpoint holds nothing more. A paused run's is where
// it goes on from; an interrupted or diverged one's too.
void settle_checkpoints(const TrainResult& r, int64_t planned_epochs,
                        const CheckpointOptions& checkpoint, JobHooks& hooks) {
  if (r.paused) {
    hooks.note(fmt::format(
        "crossover: {} paused after epoch {} of {}; its checkpoint is kept in {} (the same "
        "command with --resume and a later --pause-after, or none, continues it)",
        terminal_safe(r.model), epochs_completed(r), planned_epochs, checkpoint.dir.string()));
  } else if (!r.interrupted && !r.stopped_diverged) {
    remove_checkpoints(checkpoint.dir);
  }
}

}  // namespace

nlohmann::json train_document(const RunRecord& run) {
  const Utilisation& load = *run.utilisation;
  return to_json(TrainDocument{run.result, describe_machine(), load.mean_other_cores,
                               timings_contaminated(load)});
}

TrainOutcome train_job(const TrainJob& o, JobHooks& hooks, const mpi::World* world) {
  const bool lead = !world || world->rank() == 0;
  // Before any work: a path the results cannot be written to fails now, not after the training.
  if (lead && !o.save.empty()) check_writable_path(o.save, "--save");
  if (lead && !o.json.empty()) check_writable_path(o.json, "--json");
  const ModelSpec spec = train_spec(o, hooks);
  if (lead) tell_spec_notes(hooks, spec);
  std::optional<CheckpointFolderLock> folder_lock;
  const CheckpointOptions checkpoint =
      train_checkpoints(o, spec.name, world, lead, folder_lock, hooks);
  if (world) {  // a rank lost: the survivors name the checkpoint to go on from
    world->on_lost_rank([checkpoint] {
      return kept_checkpoint(checkpoint, "the same command with --resume continues it");
    });
  }
  const int gpus = world ? gpus_here() : 0;  // the machine's, shared out among its ranks
  const std::unique_ptr<Backend> backend = train_backend(o, world, gpus, lead, hooks);
  std::optional<DataParallel> ranks;
  if (world) ranks.emplace(*world, reduce_mode_for(o.reduce, *world, backend->info().kind, gpus));
  const MeasureSettings settings = train_settings(o, checkpoint, ranks ? &*ranks : nullptr);
  std::vector<NamedTensor> weights;
  TrainOutcome outcome{
      measure_run(*backend, spec, settings, train_hooks(o, spec, world, lead, weights, hooks)),
      lead, spec};
  if (world) predict_communicate(*world, *backend, outcome.run.result);
  const TrainResult& r = outcome.run.result;
  if (!lead) return outcome;  // rank 0 reports and writes
  hooks.result(train_summary(r, spec.train.epochs));
  tell_run_notes(hooks, true, "", outcome.run, checkpoint,
                 "the same command with --resume continues it");
  write_outputs(o, outcome.run, weights, hooks);
  settle_checkpoints(r, spec.train.epochs, checkpoint, hooks);
  if (o.keep_weights) outcome.weights = std::move(weights);
  return outcome;
}

}  // namespace xo

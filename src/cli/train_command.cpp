// `crossover train SPEC_OR_NAME`: trains one model and prints each epoch's loss and error; under
// mpirun, one model across the ranks.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "advisor/link_probe.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/messages.h"
#include "cli/options.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "data/source.h"
#include "dist/mpi.h"
#include "io/safetensors.h"
#include "measure/run.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/train_text.h"
#include "train/checkpoint.h"
#include "train/checkpoint_lock.h"
#include "train/data_parallel.h"

namespace xo::cli {
namespace {

struct TrainOptions {
  std::string spec;
  std::string device = "cpu";
  std::optional<int64_t> epochs, batch;
  std::string optimizer;  // a torch.optim name: its defaults in place of the spec's optimizer
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  int threads = 0;
  int shards = 0;
  DataFlags data;
  std::string save, json;
  bool quiet = false;
  std::string precision = "f32";
  bool record_step = true;
  int64_t pause_after = 0;
  int64_t max_steps = 0;
  CheckpointFlags checkpoint;
  std::string reduce = "auto";
};

// The spec as named, with the flags' overrides.
ModelSpec train_spec(const TrainOptions& o) {
  ModelSpec spec = resolve_spec_with(o.spec, o.data);
  if (o.epochs) spec.train.epochs = *o.epochs;
  if (o.batch) spec.train.batch = *o.batch;
  if (!o.optimizer.empty()) {
    for (OptimizerType type : kOptimizerTypes) {
      if (o.optimizer == optimizer_type_name(type) && type != spec.train.optimizer.type) {
        spec.train.optimizer = torch_defaults(type);
        if (!o.lr) {
          fmt::print(stderr,
                     "note: --optimizer {}: lr {} (torch.optim's default; --lr sets another)\n",
                     o.optimizer, spec.train.optimizer.lr);
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
CheckpointOptions train_checkpoints(const TrainOptions& o, const std::string& model,
                                    const mpi::World* world, bool lead,
                                    std::optional<CheckpointFolderLock>& lock) {
  const std::filesystem::path dir = o.checkpoint.dir.empty()
                                        ? default_checkpoint_dir(model)
                                        : std::filesystem::path(o.checkpoint.dir);
  CheckpointOptions checkpoint;
  if (lead) {
    if (parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every").enabled())
      lock.emplace(dir, "--checkpoint-dir");
    checkpoint = checkpoint_options(o.checkpoint, dir);
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
std::unique_ptr<Backend> train_backend(const TrainOptions& o, const mpi::World* world, int gpus,
                                       bool lead) {
  const int threads = world ? threads_per_rank(o.threads, world->local_size()) : o.threads;
  DeviceRequest request = parse_device(o.device, threads, o.precision);
  if (world && gpus > 0 && (o.device == "cuda" || o.device == "auto")) {
    request.kind = "cuda";
    request.index = world->local_rank() % gpus;
  }
  auto backend = make_backend(request);
  if (lead && backend->info().kind == DeviceKind::Cpu && !request.note.empty()) {
    fmt::print(stderr, "note: {}\n", request.note);
  }
  if (lead && backend->info().kind == DeviceKind::Cpu && request.precision != Precision::F32) {
    fmt::print(stderr, "note: --precision {} applies to GPUs; the CPU computes in f32\n",
               o.precision);
  }
  return backend;
}

MeasureSettings train_settings(const TrainOptions& o, const CheckpointOptions& checkpoint,
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
  return settings;
}

// A run's epoch lines: at most about this many, so that 100 epochs or 10,000 fit one screen.
constexpr int64_t kEpochLines = 25;

// Whether epoch `epoch` (1-based) of `epochs` gets its line: the first, the last, and every
// stride-th between.
bool shows_epoch_line(int64_t epoch, int64_t epochs) {
  const int64_t stride = (epochs + kEpochLines - 1) / kEpochLines;
  return epochs <= kEpochLines || epoch == 1 || epoch == epochs || epoch % stride == 0;
}

// What the terminal shows while the model trains (rank 0, without --quiet): the header once the
// model and its data are ready, a line per epoch. --save's weights are taken once trained.
RunHooks train_hooks(const TrainOptions& o, const ModelSpec& spec, const mpi::World* world,
                     bool lead, std::vector<NamedTensor>& weights) {
  const bool quiet = o.quiet || !lead;
  RunHooks hooks;
  hooks.ready = [&spec, world, lead, quiet](const Model& model, const DataSplit& data) {
    if (const std::string note = batch_note(spec, data.train.samples); lead && !note.empty()) {
      fmt::print(stderr, "note: {}\n", note);
    }
    if (quiet) return;
    fmt::print("{}", train_header(spec, model.parameter_count(), model.backend().info(),
                                  world ? world->size() : 0, data));
  };
  if (!quiet) {
    // A line for the first and last epochs and every stride-th, at most about kEpochLines in all
    // (a long run fits one screen); on a terminal the epochs between show on the progress line.
    auto progress = std::make_shared<Progress>();
    hooks.epoch = [scheduled = spec.train.schedule.has_value(), progress](const EpochRecord& e,
                                                                          int64_t n) {
      const std::string line = epoch_line(e, n, scheduled);
      if (!shows_epoch_line(e.epoch, n)) {
        progress->update(line.substr(0, line.find('\n')));
        return;
      }
      progress->clear();
      fmt::print("{}", line);
      std::fflush(stdout);
    };
  }
  if (lead && !o.save.empty()) {
    hooks.trained = [&weights](const Model& model) { weights = model.export_params(); };
  }
  return hooks;
}

// --save and --json, once the run is over. Weights that hold NaN or infinities are not saved:
// the last good ones are in the checkpoint.
void write_outputs(const TrainOptions& o, const RunRecord& run,
                   const std::vector<NamedTensor>& weights) {
  const TrainResult& r = run.result;
  if (!o.save.empty() && r.stopped_diverged) {
    fmt::print(stderr, "crossover: --save {}: not written, the parameters are not finite\n",
               o.save);
  } else if (!o.save.empty()) {
    save_safetensors(o.save, weights,
                     {{"format", "pt"}, {"model", r.model}, {"producer", "crossover"}});
  }
  if (!o.json.empty()) {
    const Utilisation& load = *run.utilisation;
    const TrainDocument doc{r, describe_machine(), load.mean_other_cores,
                            timings_contaminated(load)};
    write_file_atomic(o.json, to_json(doc).dump(2) + "\n");
  }
}

// The results are written: a finished run's checkpoint holds nothing more. A paused run's is where
// it goes on from; an interrupted or diverged one's too.
void settle_checkpoints(const TrainResult& r, int64_t planned_epochs,
                        const CheckpointOptions& checkpoint) {
  if (r.paused) {
    fmt::print(stderr,
               "crossover: {} paused after epoch {} of {}; its checkpoint is kept in {} (the same "
               "command with --resume and a later --pause-after, or none, continues it)\n",
               terminal_safe(r.model), epochs_completed(r), planned_epochs,
               checkpoint.dir.string());
  } else if (!r.interrupted && !r.stopped_diverged) {
    remove_checkpoints(checkpoint.dir);
  }
}

// One process, or (world) one rank of an MPI job training the model data-parallel: then rank 0
// alone prints and writes (results, weights, checkpoints), and every rank trains its slice of
// each batch. The run is measured as every command measures one (measure/run.h).
int run_train(const TrainOptions& o, const mpi::World* world) {
  const bool lead = !world || world->rank() == 0;
  // Before any work: a path the results cannot be written to fails now, not after the training.
  if (lead && !o.save.empty()) check_writable_path(o.save, "--save");
  if (lead && !o.json.empty()) check_writable_path(o.json, "--json");
  const ModelSpec spec = train_spec(o);
  if (lead) print_notes(spec);
  std::optional<CheckpointFolderLock> folder_lock;
  const CheckpointOptions checkpoint = train_checkpoints(o, spec.name, world, lead, folder_lock);
  if (world) {  // a rank lost: the survivors name the checkpoint to go on from
    world->on_lost_rank([checkpoint] {
      return kept_checkpoint(checkpoint, "the same command with --resume continues it");
    });
  }
  const int gpus = world ? gpus_here() : 0;  // the machine's, shared out among its ranks
  const std::unique_ptr<Backend> backend = train_backend(o, world, gpus, lead);
  std::optional<DataParallel> ranks;
  if (world) ranks.emplace(*world, reduce_mode_for(o.reduce, *world, backend->info().kind, gpus));
  const MeasureSettings settings = train_settings(o, checkpoint, ranks ? &*ranks : nullptr);
  std::vector<NamedTensor> weights;
  RunRecord run = measure_run(*backend, spec, settings, train_hooks(o, spec, world, lead, weights));
  if (world) predict_communicate(*world, *backend, run.result);
  const TrainResult& r = run.result;
  if (!lead) return exit_code(r);  // rank 0 reports and writes
  fmt::print("{}", train_summary(r, spec.train.epochs));
  print_run_notes(stdout, "", run, checkpoint, "the same command with --resume continues it");
  write_outputs(o, run, weights);
  settle_checkpoints(r, spec.train.epochs, checkpoint);
  return exit_code(r);
}

}  // namespace

Command add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train one model (a built-in name, a TOML spec or an ONNX model)");
  sub->add_option("spec", o->spec,
                  "Built-in model name (see `crossover models`), spec file, or ONNX model")
      ->required();
  sub->add_option("--device", o->device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  sub->add_option("--epochs", o->epochs, "Override train.epochs")->check(positive_number());
  sub->add_option("--batch", o->batch, "Override train.batch")->check(positive_number());
  std::vector<std::string> optimizers;
  for (OptimizerType type : kOptimizerTypes) optimizers.emplace_back(optimizer_type_name(type));
  sub->add_option("--optimizer", o->optimizer,
                  "Train with this torch.optim rule and its defaults (lr too, unless --lr) in "
                  "place of the spec's optimizer; the spec's own settings where it names the same")
      ->check(CLI::IsMember(optimizers));
  sub->add_option("--lr", o->lr, "Override the optimizer's learning rate")
      ->check(positive_number());
  sub->add_option("--seed", o->seed, "Override train.seed (data, initial weights, shuffling)");
  add_threads_option(sub, o->threads);
  sub->add_option("--shards", o->shards,
                  "Split each batch into N shards trained concurrently (0 = the backend decides)")
      ->check(non_negative_integer());
  add_data_options(sub, o->data);
  sub->add_option("--save", o->save, "Write the trained weights to a safetensors file");
  sub->add_option("--json", o->json, "Write the result as JSON to this file");
  sub->add_flag("--quiet,-q", o->quiet, "Print only the final summary line");
  sub->add_option("--pause-after", o->pause_after,
                  "Stop after this many epochs of train.epochs and keep a checkpoint there (the "
                  "rate schedule and the arithmetic stay those of train.epochs; --resume goes on)")
      ->check(positive_number());
  sub->add_option("--steps", o->max_steps,
                  "Stop after this many training steps in all (to time a model; a partial epoch "
                  "is not reported as an epoch)")
      ->check(positive_number());
  sub->add_option("--reduce", o->reduce,
                  "Under mpirun, how the gradients are summed across ranks: shared (the ranks of "
                  "one machine share the gradient, parameter and optimizer buffers, and each sums "
                  "and steps its part), after-backward (MPI all-reduce of 4 MB buckets once "
                  "backward is done), overlap (bucket by bucket while backward runs, as PyTorch "
                  "DDP); for GPU ranks host-staged (the gradients copied to page-locked host "
                  "memory, summed by MPI, copied back; ranks may share a GPU) or nccl (NCCL's "
                  "all-reduce on the GPUs, inside the recorded step; a GPU per rank); auto: "
                  "host-staged for GPU ranks, else shared on one machine and after-backward "
                  "across machines")
      ->check(CLI::IsMember({"auto", "shared", "after-backward", "overlap", "host-staged", "nccl"}))
      ->capture_default_str();
  add_gpu_options(sub, o->precision, o->record_step);
  add_checkpoint_options(sub, o->checkpoint, true);
  return {sub, [o] {
            // A process no launcher started never touches MPI.
            if (!mpi::launched()) return run_train(*o, nullptr);
            const mpi::World world;
            try {
              return run_train(*o, &world);
            } catch (const std::exception& e) {
              end_job(world, e);
            }
          }};
}

}  // namespace xo::cli

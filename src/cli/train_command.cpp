// `crossover train SPEC_OR_NAME`: trains one model and prints each epoch's loss and error.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "data/source.h"
#include "dist/mpi.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "train/data_parallel.h"
#include "train/memory.h"

namespace xo::cli {
namespace {

// ", test accuracy 97.10% (10000 samples)", or the loss where no accuracy is measured (mse); ""
// without the split.
std::string split_figures(const char* split, double loss, double accuracy, int64_t samples) {
  if (std::isnan(loss) && std::isnan(accuracy)) return "";
  return std::isnan(accuracy)
             ? fmt::format(", {} loss {:.6f} ({} samples)", split, loss, samples)
             : fmt::format(", {} accuracy {:.2f}% ({} samples)", split, accuracy, samples);
}

struct TrainOptions {
  std::string spec;
  std::string device = "cpu";
  std::optional<int64_t> epochs, batch;
  std::optional<double> lr;
  std::optional<uint64_t> seed;
  int threads = 0;
  int shards = 0;
  std::string data, init, save, json;
  bool quiet = false;
  std::string precision = "f32";
  bool record_step = true;
  int64_t pause_after = 0;
  int64_t max_steps = 0;
  CheckpointFlags checkpoint;
  std::string reduce = "auto";
};

// One process, or (world) one rank of an MPI job training the model data-parallel: then rank 0
// alone prints and writes (results, weights, checkpoints), and every rank trains its slice of
// each batch.
int run_train(const TrainOptions& o, const mpi::World* world) {
  const bool lead = !world || world->rank() == 0;
  // Before any work: a path the results cannot be written to fails now, not after the training.
  if (lead && !o.save.empty()) check_writable_path(o.save, "--save");
  if (lead && !o.json.empty()) check_writable_path(o.json, "--json");
  ModelSpec spec = resolve_spec(o.spec);
  if (o.epochs) spec.train.epochs = *o.epochs;
  if (o.batch) spec.train.batch = *o.batch;
  if (o.lr) spec.train.optimizer.lr = *o.lr;
  if (o.seed) spec.train.seed = *o.seed;
  if (!o.data.empty()) spec.data.source = data_source_argument(o.data, "--data");
  if (lead) print_notes(spec);
  // Before any work: an unfinished run's checkpoint is continued or discarded only when asked.
  // Across ranks rank 0 decides (and discards, with --restart) before any rank reads one.
  const std::filesystem::path checkpoint_dir = o.checkpoint.dir.empty()
                                                   ? default_checkpoint_dir(spec.name)
                                                   : std::filesystem::path(o.checkpoint.dir);
  CheckpointOptions checkpoint;
  if (lead) {
    checkpoint = checkpoint_options(o.checkpoint, checkpoint_dir);
  } else {
    checkpoint.every = parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every");
    checkpoint.resume = o.checkpoint.resume;
    if (checkpoint.every.enabled() || checkpoint.resume) checkpoint.dir = checkpoint_dir;
  }
  if (world) world->broadcast(std::string());  // rank 0 has decided
  if (o.pause_after > 0 && !checkpoint.every.enabled()) {
    throw UserError(
        "--pause-after needs checkpoints: with --checkpoint-every off there is nothing to go on "
        "from");
  }
  // The ranks of a job on one machine share its cores: each takes its part unless told.
  const int threads = o.threads > 0 || !world
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                                            std::max(1, world->local_size()));
  const DeviceRequest request = parse_device(o.device, threads, o.precision);
  // Refused before a GPU is touched on every rank (and after, for an `auto` that found one).
  auto backend = world && request.kind == "cuda" ? nullptr : make_backend(request);
  if (world && (!backend || backend->info().kind != DeviceKind::Cpu)) {
    throw UserError(fmt::format(
        "--device {}: training across MPI ranks runs on the CPU in this version (the GPU's "
        "collectives, over NCCL, are not built yet); use --device cpu, or one process per GPU "
        "run",
        o.device));
  }
  // Notes and warnings are rank 0's to print.
  if (lead && backend->info().kind == DeviceKind::Cpu && !request.note.empty()) {
    fmt::print(stderr, "note: {}\n", request.note);
  }
  if (lead && backend->info().kind == DeviceKind::Cpu && request.precision != Precision::F32) {
    fmt::print(stderr, "note: --precision {} applies to GPUs; the CPU computes in f32\n",
               o.precision);
  }
  check_model_memory(spec, *backend);
  Model model(spec, *backend);
  const DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  if (const std::string note = batch_note(spec, data.train.samples); lead && !note.empty()) {
    fmt::print(stderr, "note: {}\n", note);
  }
  initialize(model, o.init);
  const bool quiet = o.quiet || !lead;
  if (!quiet) {
    const DeviceInfo& d = backend->info();
    fmt::print(
        "{}: {} parameters, {} on {} ({}, {}); data: {}\n", terminal_safe(spec.name),
        model.parameter_count(), optimizer_type_name(spec.train.optimizer.type), d.id, d.name,
        d.kind == DeviceKind::Cpu
            ? fmt::format("{}{} thread{}", world ? fmt::format("{} ranks of ", world->size()) : "",
                          d.threads, d.threads == 1 ? "" : "s")
            : d.precision,
        data.train.description);
    if (data.validation.samples > 0) {
      fmt::print("validation: {}; training on the first {}\n", data.validation.description,
                 data.train.samples);
    }
    if (!spec.data.test.empty()) {
      fmt::print("test: {} ({} samples)\n", terminal_safe(spec.data.test), data.test.samples);
    }
  }
  ExecutionOptions exec;
  exec.shards = o.shards;
  exec.record_step = o.record_step;
  exec.stop_on_nan = o.checkpoint.on_nan == "stop";
  exec.checkpoint = checkpoint;
  exec.pause_after_epochs = o.pause_after;
  exec.max_steps = o.max_steps;
  std::optional<DataParallel> ranks;
  if (world) {
    ranks.emplace(*world, reduce_mode_for(o.reduce, *world));
    exec.data_parallel = &*ranks;
  }
  // Beside the training, the load of other processes on this one's CPUs: timings measured while
  // another process ran are marked as such (bench/contention.py: one busy process, 2.6x the mean
  // step).
  Sampler sampler(0.1);
  sampler.start();
  const TrainResult r = train_model(
      model, data, spec.train,
      [&](const EpochRecord& e, int64_t n) {
        if (!quiet) {
          // What was measured, nothing else: a regression has no error or accuracy, a split
          // that is not there no figures.
          // A scheduled rate changes between epochs: each line says which one the epoch used.
          std::string figures =
              spec.train.schedule ? fmt::format("lr {:.6g}  ", e.lr) : std::string();
          figures += fmt::format("loss {:.6f}", e.loss);
          if (!std::isnan(e.train_error))
            figures += fmt::format("  train error {:6.2f}%", e.train_error);
          if (!std::isnan(e.val_loss)) figures += fmt::format("  val loss {:.4f}", e.val_loss);
          if (!std::isnan(e.val_accuracy))
            figures += fmt::format("  val accuracy {:6.2f}%", e.val_accuracy);
          if (!std::isnan(e.test_loss)) figures += fmt::format("  test loss {:.4f}", e.test_loss);
          if (!std::isnan(e.test_accuracy))
            figures += fmt::format("  test accuracy {:6.2f}%", e.test_accuracy);
          fmt::print("epoch {:>{}}/{}  {}  {:.3f} ms\n", e.epoch, fmt::formatted_size("{}", n), n,
                     figures, e.seconds * 1e3);
          std::fflush(stdout);
        }
      },
      exec);
  sampler.stop();
  Utilisation load = sampler.timeline(1);
  if (world && load.mean_other_cores) {
    // The job's other ranks on this machine are this run, not other load.
    *load.mean_other_cores =
        std::max(0.0, *load.mean_other_cores -
                          static_cast<double>((world->local_size() - 1) * backend->info().threads));
  }
  if (!lead) return exit_code(r);  // rank 0 reports and writes
  fmt::print(
      "{}: {}{}, {:.4f} ms/step (median of {}, p10-p90 {:.4f}-{:.4f}), "
      "{:.1f} GFLOP/s, {:.0f} samples/s, {:.2f} s training, {} shard{}{}{}{}\n",
      r.model,
      r.epochs.empty()
          ? "no epoch completed"
          : fmt::format("final loss {:.6f}{}", r.final_loss,
                        std::isnan(r.final_train_error)
                            ? std::string()
                            : fmt::format(", train error {:.2f}%", r.final_train_error)),
      split_figures("validation", r.final_val_loss, r.final_val_accuracy, r.validation_samples) +
          split_figures("test", r.final_test_loss, r.final_test_accuracy, r.test_samples),
      r.step_ms.median, r.step_ms.count, r.step_ms.p10, r.step_ms.p90, r.gflops,
      r.samples_per_second, r.train_seconds, r.shards, r.shards == 1 ? "" : "s",
      r.ranks <= 1 ? std::string()
      : r.reduce_mode == "shared"
          ? fmt::format(" per rank, {} ranks (summing {} of gradients per step in shared memory, "
                        "each rank its part within its optimizer pass: {:.4f} ms; waiting for the "
                        "slowest rank {:.4f} ms)",
                        r.ranks, byte_size(static_cast<double>(r.reduced_bytes)), r.optimizer_ms,
                        r.communicate_ms)
          : fmt::format(" per rank, {} ranks (summing {} of gradients per step {}: {:.4f} ms "
                        "beyond backward)",
                        r.ranks, byte_size(static_cast<double>(r.reduced_bytes)), r.reduce_mode,
                        r.communicate_ms),
      r.recorded_step ? ", replayed as one CUDA Graph" : "",
      r.interrupted ? " (interrupted)"
      : r.paused ? fmt::format(" (paused after epoch {} of {})", r.epochs.size(), spec.train.epochs)
      : r.resumed_at_step > 0
          ? fmt::format(" (resumed from its checkpoint at step {})", r.resumed_at_step)
          : "");
  if (const std::string early = early_stopping_message(r); !early.empty()) {
    fmt::print("{}: {}\n", terminal_safe(r.model), early);
  }
  if (const std::string stuck = stuck_warning(r); !stuck.empty()) {
    fmt::print(stderr, "crossover: warning: {}\n", terminal_safe(stuck));
  }
  if (const std::string busy = contamination_warning(
          load, "this run", backend->info().kind == DeviceKind::Cpu ? backend->info().threads : 0);
      !busy.empty()) {
    fmt::print(stderr, "crossover: warning: {}\n", busy);
  }
  if (const std::string why =
          stop_message(r, exec.checkpoint, "the same command with --resume continues it");
      !why.empty()) {
    fmt::print(stderr, "crossover: {}\n", terminal_safe(why));
  }
  if (!o.save.empty() && r.stopped_diverged) {
    // The parameters hold NaN or infinities now: the last good ones are in the checkpoint.
    fmt::print(stderr, "crossover: --save {}: not written, the parameters are not finite\n",
               o.save);
  } else if (!o.save.empty()) {
    save_safetensors(o.save, model.export_params(),
                     {{"format", "pt"}, {"model", spec.name}, {"producer", "crossover"}});
  }
  if (!o.json.empty()) {
    nlohmann::json j = to_json(r);
    j["machine"] = to_json(describe_machine());
    j["mean_other_cores"] =
        load.mean_other_cores ? nlohmann::json(*load.mean_other_cores) : nlohmann::json();
    j["timings_contaminated"] = timings_contaminated(load);
    write_file_atomic(o.json, j.dump(2) + "\n");
  }
  // The results are written: the checkpoint of a finished run holds nothing more. A paused run's
  // is where it goes on from.
  if (r.paused) {
    fmt::print(stderr,
               "crossover: {} paused after epoch {} of {}; its checkpoint is kept in {} (the same "
               "command with --resume and a later --pause-after, or none, continues it)\n",
               terminal_safe(r.model), r.epochs.size(), spec.train.epochs,
               exec.checkpoint.dir.string());
  } else if (!r.interrupted && !r.stopped_diverged) {
    remove_checkpoints(exec.checkpoint.dir);
  }
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
  sub->add_option("--lr", o->lr, "Override the optimizer's learning rate")
      ->check(positive_number());
  sub->add_option("--seed", o->seed, "Override train.seed (data, initial weights, shuffling)");
  sub->add_option("--threads", o->threads, "CPU threads (0 = all cores)")
      ->check(non_negative_integer());
  sub->add_option("--shards", o->shards,
                  "Split each batch into N shards trained concurrently (0 = the backend decides)")
      ->check(non_negative_integer());
  sub->add_option("--data", o->data,
                  "Train on this CSV file, or this source (fashion-mnist, idx:DIR, imdb:DIR, "
                  "imdb-synthetic, disc), instead of the spec's");
  sub->add_option("--init", o->init, "Initial weights from a safetensors file (PyTorch names)");
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
                  "backward is done) or overlap (bucket by bucket while backward runs, as PyTorch "
                  "DDP); auto: shared on one machine, after-backward across machines")
      ->check(CLI::IsMember({"auto", "shared", "after-backward", "overlap"}))
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

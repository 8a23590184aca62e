// `crossover train SPEC_OR_NAME`: trains one model and prints each epoch's loss and error; under
// mpirun, one model across the ranks. The job is job/train.h's; this file reads its flags and
// shows its epochs.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "distributed/mpi.h"
#include "job/train.h"
#include "optim/optimizer.h"
#include "report/train_text.h"

namespace xo::cli {
namespace {

// A run's epoch lines: at most about this many, so that 100 epochs or 10,000 fit one screen.
constexpr int64_t kEpochLines = 25;

// Whether epoch `epoch` (1-based) of `epochs` gets its line: the first, the last, and every
// stride-th between.
bool shows_epoch_line(int64_t epoch, int64_t epochs) {
  const int64_t stride = (epochs + kEpochLines - 1) / kEpochLines;
  return epochs <= kEpochLines || epoch == 1 || epoch == epochs || epoch % stride == 0;
}

// The terminal while a model trains: a line for the first and last epochs and every stride-th, at
// most about kEpochLines in all (a long run fits one screen); on a terminal the epochs between
// show on the progress line.
class TrainTerminal : public TerminalHooks {
 public:
  void epoch(const EpochRecord& e, int64_t epochs, bool scheduled) override {
    const std::string line = epoch_line(e, epochs, scheduled);
    if (!shows_epoch_line(e.epoch, epochs)) {
      status(line.substr(0, line.find('\n')));
      return;
    }
    result(line);
  }
};

}  // namespace

Command add_train(CLI::App& app) {
  auto o = std::make_shared<TrainJob>();
  CLI::App* sub = app.add_subcommand(
      "train", "Train one model (a built-in name, a TOML spec or an ONNX model)");
  sub->add_option("spec", o->spec,
                  "Built-in model name (see `crossover models`), spec file, or ONNX model")
      ->required();
  sub->add_option("--device", o->device, "cpu, cpu:bf16 (the CPU at bf16), cuda, cuda:N or auto")
      ->capture_default_str();
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
            TrainTerminal terminal;
            if (!mpi::launched()) return train_job(*o, terminal).exit_code();
            const mpi::World world;
            try {
              return train_job(*o, terminal, &world).exit_code();
            } catch (const std::exception& e) {
              end_job(world, e);
            }
          }};
}

}  // namespace xo::cli

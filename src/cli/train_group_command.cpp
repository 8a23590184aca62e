// `crossover train-group DIR...`: trial folders of a search (each with its spec.toml) trained as
// one fused group (train/trials.h), each writing what `crossover train` writes of a trial there:
// its result.json (--json), weights.safetensors (--save) and checkpoints/. `tune --fuse` starts it;
// it runs by hand on any folders laid out so.
#include <memory>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/terminal_hooks.h"
#include "job/train_group.h"

namespace xo::cli {

Command add_train_group(CLI::App& app) {
  auto o = std::make_shared<TrainGroupJob>();
  CLI::App* sub = app.add_subcommand(
      "train-group",
      "Train trial folders of a search (each holding a spec.toml) as one fused group: the same "
      "architecture, data and batch size trained in lockstep, each trial writing its "
      "result.json, weights.safetensors and checkpoints/ (what `tune --fuse` runs)");
  sub->add_option("dirs", o->dirs, "The trial folders (OUT/trials/ID)")->required();
  sub->add_option("--device", o->device,
                  "cpu or cuda:N (fused trials on a GPU have not yet run on one: see "
                  "docs/benchmarks.md)")
      ->capture_default_str();
  add_threads_option(sub, o->threads);
  add_precision_option(sub, o->precision);
  sub->add_flag("--quiet,-q", o->quiet, "Print only each trial's final summary line");
  sub->add_option("--pause-after", o->pause_after,
                  "Stop each trial after this many epochs of its train.epochs and keep its "
                  "checkpoint there (--resume goes on)")
      ->check(positive_number());
  sub->add_option("--checkpoint-every", o->checkpoint_every,
                  "Every trial's checkpoint at the same step, this often: 500steps, 60s, 2min, off")
      ->capture_default_str();
  sub->add_flag("--resume", o->resume, "Continue each trial from its checkpoint, where it has one");
  sub->add_option("--on-nan", o->on_nan,
                  "stop: a trial whose loss becomes NaN or infinite stops (the others go on); "
                  "continue: it trains on")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
  return {sub, [o] {
            TerminalHooks hooks;
            return train_group_job(*o, hooks);
          }};
}

}  // namespace xo::cli

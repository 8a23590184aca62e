// What a job says about a run, the same words whichever job trained it (job/run_notes.h).
#include "job/run_notes.h"

#include <fmt/format.h>

#include <optional>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/format.h"
#include "job/hooks.h"
#include "measure/sampler.h"
#include "train/checkpoint.h"

namespace xo {

void tell_spec_notes(JobHooks& hooks, const ModelSpec& spec) {
  for (const std::string& note : spec.notes) {
    hooks.note(fmt::format("note: {}: {}", terminal_safe(spec.origin), terminal_safe(note)));
  }
}

std::string batch_note(const ModelSpec& spec, int64_t training_samples) {
  if (training_samples <= 0 || spec.train.batch <= training_samples) return "";
  return fmt::format(
      "batch {} is larger than the {} training samples: every step takes all {} (one step per "
      "epoch)",
      spec.train.batch, training_samples, training_samples);
}

namespace {

std::string diverged_message(const TrainResult& r, const std::string& kept) {
  const std::string where = r.diverged_from == r.diverged_step
                                ? fmt::format("step {}", r.diverged_step)
                                : fmt::format("steps {} to {}", r.diverged_from, r.diverged_step);
  const std::string last =
      r.last_finite_step > 0
          ? fmt::format("the last finite loss was {:.6g}, at epoch {} step {}", r.last_finite_loss,
                        r.last_finite_epoch, r.last_finite_step)
          : "no step had a finite loss";
  return fmt::format(
      "error: training of {} stopped: the loss became NaN or infinite at epoch {}, {}; {}; {}. "
      "Try a smaller --lr, or --on-nan continue to train on regardless",
      r.model, r.diverged_epoch, where, last, kept);
}

}  // namespace

std::string kept_checkpoint(const CheckpointOptions& checkpoint, const std::string& how_to_resume) {
  const std::optional<int64_t> saved =
      checkpoint.dir.empty() ? std::nullopt : newest_checkpoint(checkpoint.dir);
  if (!saved) return "no checkpoint had been saved yet (--checkpoint-every sets how often)";
  return fmt::format("the checkpoint at step {} is kept in {}{}", *saved, checkpoint.dir.string(),
                     how_to_resume.empty() ? "" : fmt::format(" ({})", how_to_resume));
}

std::string stop_message(const TrainResult& r, const CheckpointOptions& checkpoint,
                         const std::string& how_to_resume) {
  if (r.stopped_diverged) return diverged_message(r, kept_checkpoint(checkpoint, ""));
  if (r.interrupted) {
    return fmt::format("{} interrupted after {} training steps; {}", r.model, r.steps_taken,
                       kept_checkpoint(checkpoint, how_to_resume));
  }
  if (r.diverged_epoch > 0) {
    return fmt::format(
        "warning: training diverged at epoch {} (the loss is not finite); try a smaller --lr",
        r.diverged_epoch);
  }
  return "";
}

std::string early_stopping_message(const TrainResult& r) {
  if (r.early_stopping_monitor.empty() || r.epochs.empty()) return "";
  const std::string best =
      r.best_epoch > 0
          ? fmt::format(
                "best {:.4f} at epoch {}{}", r.best_value, r.best_epoch,
                r.restored_best ? fmt::format("; weights of epoch {} restored", r.best_epoch) : "")
          : std::string("no epoch improved on the start");
  if (!r.stopped_early) {
    return r.restored_best ? fmt::format("early stopping did not stop the run ({})", best) : "";
  }
  return fmt::format(
      "stopped early after epoch {}: {} did not improve by more than {:g} for {} "
      "epochs ({})",
      r.epochs.back().epoch, r.early_stopping_monitor, r.early_stopping_min_delta,
      r.early_stopping_patience, best);
}

void tell_run_notes(JobHooks& hooks, bool outcome_as_result, const std::string& label,
                    const RunRecord& run, const CheckpointOptions& checkpoint,
                    const std::string& how_to_resume) {
  const TrainResult& r = run.result;
  const std::string prefix = label.empty() ? std::string() : label + ": ";
  if (const std::string early = early_stopping_message(r); !early.empty()) {
    const std::string line = (label.empty() ? terminal_safe(r.model) + ": " : prefix) + early;
    if (outcome_as_result) {
      hooks.result(line + "\n");
    } else {
      hooks.note(line);
    }
  }
  if (const std::string stuck = stuck_warning(r); !stuck.empty()) {
    // It names the model. Long warnings are wrapped to the screen's width.
    hooks.note(wrap("crossover: warning: " + terminal_safe(stuck)));
  }
  if (run.utilisation) {
    const int cpu_threads = r.device.kind == DeviceKind::Cpu ? r.device.threads : 0;
    if (const std::string busy = contamination_warning(*run.utilisation, "this run", cpu_threads);
        !busy.empty()) {
      hooks.note(wrap("crossover: warning: " + prefix + busy));
    }
  }
  if (!r.resumed_differently.empty()) {
    hooks.note(wrap("crossover: note: " + prefix + "not bit-identical to an uninterrupted run: " +
                    terminal_safe(r.resumed_differently)));
  }
  if (const std::string why = stop_message(r, checkpoint, how_to_resume); !why.empty()) {
    hooks.note("crossover: " + terminal_safe(why));
  }
}

int exit_code(const TrainResult& r) {
  if (r.stopped_diverged) return kExitDiverged;
  return r.interrupted ? kExitInterrupted : kExitOk;
}

}  // namespace xo

// What a job says about a run, the same words whichever job trained it: the notes before it, the
// lines after it (early stopping, a stuck loss, a busy machine, why it stopped) and its exit code.
#pragma once

#include <cstdint>
#include <string>

#include "measure/run_record.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

class JobHooks;

// A spec's notes (how an imported model was understood), "note: NAME: …".
void tell_spec_notes(JobHooks& hooks, const ModelSpec& spec);
// What a batch larger than the training set becomes (every step takes the whole set, as PyTorch's
// DataLoader does), said rather than done silently; empty when the batch fits.
std::string batch_note(const ModelSpec& spec, int64_t training_samples);

// Why a run stopped before its end (interrupted, diverged), with where its checkpoint is and how
// to go on (`how_to_resume`, e.g. "the same command with --resume continues it"); empty for a run
// that finished.
std::string stop_message(const TrainResult& r, const CheckpointOptions& checkpoint,
                         const std::string& how_to_resume);
// "the checkpoint at step N is kept in DIR (HOW_TO_RESUME)", or that none was saved yet.
std::string kept_checkpoint(const CheckpointOptions& checkpoint, const std::string& how_to_resume);
// What early stopping did: "stopped early after epoch 7: test_loss did not improve by more than 0
// for 5 epochs (best 0.3121 at epoch 2; weights of epoch 2 restored)"; empty without it.
std::string early_stopping_message(const TrainResult& r);

// The lines after a finished run, the one place they are written: what early stopping did (an
// outcome where `outcome_as_result`, the job's result, else a note), then as notes a loss that
// never moved, other processes' load on the run's cores, a resume that is not bit-identical and
// why the run stopped before its end. `label` names the run in the lines a job of several runs
// says ("disc-4 on cpu"); empty where the job trains one.
void tell_run_notes(JobHooks& hooks, bool outcome_as_result, const std::string& label,
                    const RunRecord& run, const CheckpointOptions& checkpoint,
                    const std::string& how_to_resume);

// 0 finished, 130 interrupted, kExitDiverged stopped because the loss was not finite.
int exit_code(const TrainResult& r);

}  // namespace xo

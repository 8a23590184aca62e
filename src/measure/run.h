// Measuring one run: a spec trained on a device with the utilisation sampler running beside it,
// a per-node profile after training, the step's work and the peak memory — what the measuring
// commands record of every (model, device).
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "measure/run_record.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

struct MeasureSettings {
  int profile_steps = 10;   // extra steps timing every node apart (0: none)
  int64_t max_steps = 0;    // stop after this many training steps (0: every epoch)
  bool record_step = true;  // replay each step as one CUDA Graph where the device can
  double sample_interval_s = 0.1;
  CheckpointOptions checkpoint;  // none unless checkpoint.dir is set
  bool stop_on_nan = true;
  // This process is one rank of a data-parallel job (train/data_parallel.h); null: the whole.
  DataParallel* data_parallel = nullptr;
};

// Trains `spec` on `backend` from its seed; `on_epoch` sees every epoch (progress). The record's
// axis is left empty for the caller.
RunRecord measure_run(Backend& backend, const ModelSpec& spec, const MeasureSettings& settings,
                      const EpochCallback& on_epoch = {});

}  // namespace xo

// `crossover train` on the terminal: the line before the first epoch (the model, the device, the
// data), a line per epoch, and the summary line of the finished run. Figures come from the
// typed records; what was not measured (a regression's accuracy, a split that is not there) is
// left out rather than shown as nothing.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "data/source.h"
#include "model/spec.h"
#include "train/trainer.h"

namespace xo {

// "disc-4: 12,345 parameters, sgd on cpu (Intel Xeon, 2 ranks of 1 thread); data: ...", then the
// validation and test splits where there are some. `ranks`: the job's MPI ranks (0: no job).
std::string train_header(const ModelSpec& spec, int64_t parameters, const DeviceInfo& device,
                         int ranks, const DataSplit& data);
// "epoch  3/10  lr 0.025  loss 0.412345  train error  12.50%  ...  1.234 ms"; the rate only
// where a schedule changes it between epochs.
std::string epoch_line(const EpochRecord& e, int64_t epochs, bool scheduled);
// The finished run in one line: its final figures, the step time and throughput, the shards and
// ranks, and how the run ended (interrupted, paused after epoch N of `planned_epochs`, resumed).
std::string train_summary(const TrainResult& r, int64_t planned_epochs);

}  // namespace xo

#include "measure/run_record.h"

namespace xo {

double seconds_per_epoch(const TrainResult& r, bool* estimated) {
  const bool measured = !r.epochs.empty();
  if (estimated) *estimated = !measured;
  if (measured) return r.train_seconds / static_cast<double>(epochs_completed(r));
  return r.step_ms.median * static_cast<double>(r.steps_per_epoch) / 1e3;
}

double seconds_per_100_epochs(const TrainResult& r) { return 100.0 * seconds_per_epoch(r); }

}  // namespace xo

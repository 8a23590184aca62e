// What a measured run says against its device's measured peaks: the fraction of the peak it
// reached, what the probe's roofline predicted for it (and so how far a prediction for a device
// one does not have would be off), where the time of a step went, and which term bounds each
// layer. Computed once here; the report only renders it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "measure/peaks.h"
#include "measure/run_record.h"

namespace xo {

// One node's share of a step timed node by node.
struct LayerTime {
  std::string name;  // "0 linear+relu"
  double forward_ms = 0, backward_ms = 0;
  double flops = 0, bytes = 0;
  double gflops = 0;                    // its FLOPs over its forward + backward time
  std::optional<double> peak_fraction;  // of the device's matmul peak; none without peaks
  std::optional<std::string> bound;     // "FLOPs", "bytes" or "overhead"; none without peaks
};

// The phases of a step: from the node-by-node times (forward, backward) and the loop's own timing
// (data, optimizer; none when the step was recorded as one CUDA Graph).
struct StepPhases {
  std::optional<double> data_ms;
  double forward_ms = 0, backward_ms = 0;
  std::optional<double> optimizer_ms;
};

// The loop's own split of its step (sharded where the backend shards); none of them for a
// recorded step, which is timed as a whole.
struct LoopPhases {
  std::optional<double> data_ms, forward_backward_ms, optimizer_ms;
};

struct RunAnalysis {
  double seconds_per_epoch = 0;
  bool per_epoch_estimated = false;     // from the median step (no epoch completed)
  std::optional<double> peak_gflops;    // the device's probed matmul peak (x ranks)
  std::optional<double> peak_fraction;  // the run's GFLOP/s over it
  // The probe's roofline for this run (efficiency 1) and its error against the measurement.
  std::optional<double> roofline_step_ms, roofline_error_percent;
  std::optional<std::string> roofline_bound;
  std::optional<StepPhases> phases;    // with node-by-node times only
  std::vector<LayerTime> layer_times;  // empty without them
  LoopPhases loop_phases;
};

// `peaks` may be null (the device was not probed).
RunAnalysis analyse_run(const RunRecord& run, const DevicePeaks* peaks);

}  // namespace xo

// Predicted step times for hardware one does not have: a roofline per layer (its FLOPs over the
// device's matmul rate, its bytes over its memory bandwidth, whichever is longer) plus the fixed
// cost of a step and of each layer, with an efficiency factor calibrated on a device measured
// here. Every prediction carries the assumptions it rests on.
#pragma once

#include <string>
#include <vector>

#include "measure/peaks.h"
#include "model/work.h"

namespace xo {

// The rates a prediction uses: what kernels reach on the device, not its datasheet figures.
struct DeviceRates {
  double gflops = 0;  // f32 matmul
  double bandwidth_gbs = 0;
  double step_overhead_us = 0;
  double layer_overhead_us = 0;
};

// A device's rates as its probe measured them.
DeviceRates probed_rates(const DevicePeaks& p);

struct StepPrediction {
  double seconds = 0;                           // the predicted step
  double flops_seconds = 0, bytes_seconds = 0;  // the layers' roofline terms, by binding term
  double overhead_seconds = 0;
  std::string bound;                      // "FLOPs", "bytes" or "overhead": the largest
  std::vector<std::string> layer_bounds;  // per StepWork layer: "FLOPs" or "bytes"
};

// The roofline of a step on `rates`; the layers' terms are divided by `efficiency` (0, 1].
StepPrediction predict_step(const StepWork& step, const DeviceRates& rates, double efficiency = 1);

// The efficiency that makes the roofline meet a measured step: roofline / (measured - overhead),
// kept in [0.02, 1]. When the measured step is within the overhead, 1 (the case is bound by the
// overhead, which carries over as measured).
double calibrate_efficiency(const StepWork& step, const DeviceRates& rates, double measured_s);

}  // namespace xo

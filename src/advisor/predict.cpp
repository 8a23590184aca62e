#include "advisor/predict.h"

#include <fmt/format.h>

#include <algorithm>

namespace xo {

DeviceRates probed_rates(const DevicePeaks& p) {
  return {p.matmul_gflops, p.bandwidth_gbs, p.step_overhead_us, p.layer_overhead_us};
}

StepPrediction predict_step(const StepWork& step, const DeviceRates& rates, double efficiency) {
  StepPrediction p;
  const double flops_per_s = rates.gflops * 1e9 * efficiency;
  const double bytes_per_s = rates.bandwidth_gbs * 1e9 * efficiency;
  for (const LayerWork& l : step.layers) {
    const double tf = l.flops / flops_per_s, tb = l.bytes / bytes_per_s;
    if (tf >= tb) {
      p.flops_seconds += tf;
      p.layer_bounds.push_back("FLOPs");
    } else {
      p.bytes_seconds += tb;
      p.layer_bounds.push_back("bytes");
    }
  }
  p.bytes_seconds += step.optimizer_bytes / bytes_per_s;
  p.overhead_seconds =
      (rates.step_overhead_us + rates.layer_overhead_us * static_cast<double>(step.layers.size())) *
      1e-6;
  p.seconds = p.flops_seconds + p.bytes_seconds + p.overhead_seconds;
  if (p.overhead_seconds >= p.flops_seconds && p.overhead_seconds >= p.bytes_seconds) {
    p.bound = "overhead";
  } else {
    p.bound = p.flops_seconds >= p.bytes_seconds ? "FLOPs" : "bytes";
  }
  return p;
}

double calibrate_efficiency(const StepWork& step, const DeviceRates& rates, double measured_s) {
  const StepPrediction ideal = predict_step(step, rates, 1.0);
  const double work = ideal.flops_seconds + ideal.bytes_seconds;
  const double left = measured_s - ideal.overhead_seconds;
  if (work <= 0 || left <= work) return 1.0;
  return std::clamp(work / left, 0.02, 1.0);
}

}  // namespace xo

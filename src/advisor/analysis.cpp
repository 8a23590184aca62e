#include "advisor/analysis.h"

#include <algorithm>
#include <cmath>

#include "advisor/predict.h"

namespace xo {
namespace {

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// Which term bounds a layer that took `ms`: its FLOPs or its bytes at the measured peaks, or
// neither (the time is far above both: fixed costs such as dispatch and synchronisation).
std::string layer_bound(double flops, double bytes, double ms, const DevicePeaks& p) {
  const double tf = flops / (p.matmul_gflops * 1e9), tb = bytes / (p.bandwidth_gbs * 1e9);
  if (std::max(tf, tb) < 0.2 * ms * 1e-3) return "overhead";
  return tf >= tb ? "FLOPs" : "bytes";
}

}  // namespace

RunAnalysis analyse_run(const RunRecord& run, const DevicePeaks* peaks) {
  const TrainResult& r = run.result;
  RunAnalysis a;
  a.seconds_per_epoch = seconds_per_epoch(r, &a.per_epoch_estimated);
  const double peak = peaks ? peaks->matmul_gflops : 0;
  if (peak > 0) {
    // Data-parallel ranks each compute on the probed device (their share of the cores): the
    // job's peak is theirs together.
    a.peak_gflops = peak * std::max(1, r.ranks);
    a.peak_fraction = r.gflops / *a.peak_gflops;
  }
  // What the probe's roofline predicts for this run (efficiency 1): the error shows how far the
  // model of a device one does not have would be off here (of one process's run).
  if (peaks && peak > 0 && !run.work.layers.empty() && r.ranks <= 1) {
    const StepPrediction p = predict_step(run.work, probed_rates(*peaks));
    a.roofline_step_ms = p.seconds * 1e3;
    if (r.step_ms.median > 0) {
      a.roofline_error_percent = 100 * (p.seconds * 1e3 - r.step_ms.median) / r.step_ms.median;
    }
    a.roofline_bound = p.bound;
  }
  if (r.node_timed_steps > 0) {
    StepPhases phases;
    phases.forward_ms = r.loss_ms;
    for (const LayerWork& l : run.work.layers) {
      LayerTime e;
      e.name = l.name;
      e.forward_ms = r.node_forward_ms[l.node];
      e.backward_ms = r.node_backward_ms[l.node];
      e.flops = l.flops;
      e.bytes = l.bytes;
      phases.forward_ms += e.forward_ms;
      phases.backward_ms += e.backward_ms;
      const double ms = e.forward_ms + e.backward_ms;
      e.gflops = ms > 0 ? l.flops / (ms * 1e-3) / 1e9 : 0;
      if (peaks && peak > 0) {
        e.peak_fraction = e.gflops / peak;
        e.bound = layer_bound(l.flops, l.bytes, ms, *peaks);
      }
      a.layer_times.push_back(std::move(e));
    }
    phases.data_ms = finite(r.data_ms);
    phases.optimizer_ms = finite(r.optimizer_ms);
    a.phases = phases;
  }
  // The loop's own split (its forward + backward runs sharded where the backend shards). A
  // recorded step (one CUDA Graph) is timed as a whole: its phases are none.
  a.loop_phases = {finite(r.data_ms), finite(r.forward_backward_ms), finite(r.optimizer_ms)};
  return a;
}

}  // namespace xo

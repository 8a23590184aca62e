// Step times predicted from a device profile (measure/profile.h): each node of the model's plan
// from the profile's samples of its own kernels (the same shape where it was measured, else the
// nearest measured shape scaled by the roofline's ratio of the two), plus the loss, the optimizer,
// the shards' merge and the step's fixed costs the engine actually pays. A device without its own
// profile is predicted from another's, each kernel's time scaled by the ratio of the rate that
// bounds it (compute or bandwidth, as Habitat does) and labelled with the profile it came from.
// The validation (leave-one-out) table puts every such prediction against a measurement.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advisor/predict.h"
#include "measure/profile.h"
#include "model/model.h"

namespace xo {

// The device a prediction is for: its rates and rules.
struct TargetDevice {
  std::string id, name;
  DeviceKind kind = DeviceKind::Cpu;
  int threads = 0;    // CPU threads (a kernel on one thread gets gflops / threads)
  double gflops = 0;  // f32 matmul, what kernels reach
  double bandwidth_gbs = 0;
  double step_overhead_us = 0, layer_overhead_us = 0;  // fixed costs, used across kinds
  ExecutionPolicy policy;
  std::string rates;  // where the rates come from ("probed 2026-11-23", "datasheet x 0.8")
};

// A target from its rates and rules; `rates` says where the rates come from.
TargetDevice make_target(std::string id, std::string name, DeviceKind kind, int threads,
                         const DeviceRates& r, const ExecutionPolicy& policy, std::string rates);
// A profile's own device as a target (its probed peaks and rules).
TargetDevice profile_target(const DeviceProfile& p);

struct ProfilePrediction {
  double seconds = 0;
  std::string source;  // the profile's id
  bool own = false;    // the device's own profile
  int shards = 1;
  double kernels_s = 0, fixed_s = 0;
  double flops_s = 0, bytes_s = 0;  // the kernels' time by what bounds each (kernels_s split)
  int nodes = 0, interpolated = 0, unprofiled = 0;  // unprofiled: roofline on the source's peaks
  std::string bound;        // "FLOPs", "bytes" or "overhead": what bounds most of the step
  std::string how() const;  // "own profile", "from amd-epyc-2t's profile, scaled"
};

// The step of `spec` at `batch` on `target` from `source` (own when target is its device).
ProfilePrediction predict_with_profile(const ModelSpec& spec, int64_t batch,
                                       const DeviceProfile& source, const TargetDevice& target,
                                       bool own);

// One device's predictions against its measurements (the profile's `measured` steps).
struct ValidationRow {
  std::string device, name;  // the measured device (a profile id) and its name
  std::string from;          // the profile the predictions came from
  bool own = false;
  std::string how;  // "own profile" / "from X's profile, scaled by probed peaks"
  struct Entry {
    std::string model;
    double predicted_ms = 0, measured_ms = 0;
    double error() const { return predicted_ms / measured_ms - 1; }  // signed fraction
  };
  std::vector<Entry> entries;
  std::string unmeasured;  // why there are no entries (no kernel profile of that device)
  double median_abs = 0, worst_abs = 0;
};

// Leave-one-out over `profiles`: every device with measured steps, predicted from its own profile
// (where it has kernel samples) and from each other profile with kernel samples. Models are the
// built-in specs the measurements name.
std::vector<ValidationRow> validate_profiles(const std::vector<DeviceProfile>& profiles);

// The median absolute error the table shows for a prediction of a `to` device from a `from`
// profile (own or another device's), or none when the table has no such row.
std::optional<double> expected_error(const std::vector<ValidationRow>& rows, DeviceKind from,
                                     DeviceKind to, bool own,
                                     const std::vector<DeviceProfile>& profiles);

}  // namespace xo

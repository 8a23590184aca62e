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
  // A GPU: whether its steps are recorded as one CUDA Graph (crossover's default) or launch every
  // kernel (`--no-graph`); its multiprocessors and boost clock (0: not known), what carries a
  // GPU profile's latency-bound kernels and graph nodes to it.
  bool graph = false;
  int sm_count = 0;
  double clock_mhz = 0;
  std::string architecture;  // a GPU's ("hopper"; advisor/catalog.h), "" where not known
  // A CPU's arithmetic, as DevicePeaks::precision says it ("bf16"; "" for f32): only a profile
  // timed in it predicts the target.
  std::string precision;
  bool local = false;  // a device of this machine (local_target), its rates probed here
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
  bool graph = false;       // a GPU's recorded step, from the profile's graph times
  std::string bound;        // "FLOPs", "bytes" or "overhead": what bounds most of the step
  std::string how() const;  // "own profile", "from amd-epyc-2t's profile, scaled"
};

// The step of `spec` at `batch` on `target` from `source` (own when target is its device), in
// `shards` batch shards (0: as the device's policy says).
ProfilePrediction predict_with_profile(const ModelSpec& spec, int64_t batch,
                                       const DeviceProfile& source, const TargetDevice& target,
                                       bool own, int shards = 0);

// Whether `p` timed fused groups' Linears (op "trials_linear"), which predict_fused_with_profile
// takes for a device of its kind; else it predicts each as one Linear as many times taller.
bool has_trials_samples(const DeviceProfile& p);

// The step of `trials` fused trials of `spec` (train/trials.h), each on batches of `batch`, on
// `target`: the trials split into groups, one per worker (a CPU's shard threads; one on a GPU),
// the step the longest group's; in a group each Linear is one kernel over its trials (predicted
// as one Linear as many times taller: the same FLOPs and launches, the weights read once), every
// other node, the loss, the optimizer and the batch gather once per trial. `shards` says the
// groups. Trials that step apart (model/fused_network.h, fused_stepping) take one alone's step for
// each trial one after another, or for each trial of the busiest worker side by side.
ProfilePrediction predict_fused_with_profile(const ModelSpec& spec, int64_t batch, int trials,
                                             const DeviceProfile& source,
                                             const TargetDevice& target, bool own);

// How a validation row's predictions were made, from the most to the least the profile knew.
enum class Holdout {
  None,    // the device's own profile, every kernel of the model in it
  Model,   // leave one model out: its own profile less the samples only that model gave
  Device,  // leave one device out: another device's profile, scaled (same kind or not)
};
// "own profile", "leave one model out", "other device". Inline: the report's reader (linked into
// the fuzz targets without the predictor) names it too.
inline const char* holdout_name(Holdout h) {
  switch (h) {
    case Holdout::None:
      return "own profile";
    case Holdout::Model:
      return "leave one model out";
    case Holdout::Device:
      return "other device";
  }
  return "?";
}

// What a prediction is of, for its expected error: a validation row backs only predictions of
// its own kind.
enum class PredictionKind {
  Own,                // a device from its own profile, a model it did not measure
  SameArchitecture,   // a GPU from another GPU's profile of its architecture
  OtherArchitecture,  // a GPU from a GPU profile of another (or an unknown) architecture
  CpuFromCpu,         // a CPU from another CPU's profile
  GpuFromCpu,         // a GPU from a CPU's profile
  CpuFromGpu,         // a CPU from a GPU's profile
};
const char* prediction_kind_name(PredictionKind k);  // "this device, a model it did not measure"
// The kind of a prediction of a `to` device from a `from` profile (architectures "" if unknown).
PredictionKind prediction_kind(DeviceKind from, const std::string& from_architecture, DeviceKind to,
                               const std::string& to_architecture, bool own);
// A GPU profile's or device's architecture, from the shipped catalog's entry of the same model
// (by the model number in `name`: "NVIDIA H200" is the catalog's "NVIDIA H200 SXM 141GB"); "" for
// a CPU, or a GPU the catalog has no architecture for.
std::string architecture_of(DeviceKind kind, const std::string& name);

// One device's predictions against its measurements (the profile's `measured` steps).
struct ValidationRow {
  std::string device, name;  // the measured device (a profile id) and its name
  std::string from;          // the profile the predictions came from
  bool own = false;
  Holdout holdout = Holdout::None;
  PredictionKind kind = PredictionKind::Own;  // of its predictions (in-sample when holdout None)
  DeviceKind from_kind = DeviceKind::Cpu;     // the source profile's device
  std::string from_architecture;              // and its architecture (a GPU's; architecture_of)
  std::string how;  // "own profile" / "from X's profile, scaled by probed peaks"
  struct Entry {
    std::string model;
    double predicted_ms = 0, measured_ms = 0;
    // Kernels the source profile had no sample of their kind for (their roofline instead): a
    // model class the profile cannot speak for (left out, the LSTM is the only one of its kind).
    int unprofiled = 0;
    double error() const { return predicted_ms / measured_ms - 1; }  // signed fraction
  };
  std::vector<Entry> entries;
  std::string unmeasured;  // why there are no entries (no kernel profile of that device)
  double median_abs = 0, worst_abs = 0;
  // How much the measurements themselves moved between runs: the largest slowest / fastest - 1
  // of the device's measured steps (0: not recorded). No prediction is steadier than this.
  double spread = 0;
};

// The validation over `profiles`: every device with measured steps, predicted from its own profile
// (where it has kernel samples), from its own profile with each model left out in turn (the
// samples that only that model's shapes gave removed, so that its prediction is made as a new
// model's would be: from neighbouring shapes), and from each other profile with kernel samples
// (leave one device out). Models are the built-in specs the measurements name. No figure of a
// prediction is fitted to the measured steps: they are only compared with.
std::vector<ValidationRow> validate_profiles(const std::vector<DeviceProfile>& profiles);

// `profile` less the samples that only `spec` gives among `others` and the profile grid
// (measure_grid_specs): what a profile would hold had `spec` never been measured on the device.
DeviceProfile without_model(const DeviceProfile& profile, const ModelSpec& spec,
                            const std::vector<ModelSpec>& others);

// What the validation table shows for one kind of prediction: its median and worst |error| over
// held-out rows of that kind, and the rows it read ("nvidia-h100-80gb-hbm3, own profile").
struct ExpectedError {
  double median = 0, worst = 0;
  double spread = 0;  // the measurements' own spread in those rows (ValidationRow::spread)
  std::string rows;
  PredictionKind kind = PredictionKind::Own;  // whose rows these are
  // Not validated: no held-out row is of the prediction's kind (a GPU of an architecture no GPU
  // profile was measured on, fused trials); these are the nearest kind's rows (`kind`), and the
  // error is at least theirs.
  bool at_least = false;
};
// The expected error of a prediction of `kind` from the profile `from`: the median of the medians
// and the largest worst of the held-out rows of that kind (leave one model out, models never
// profiled, other devices; never a row whose models' kernels were in the profile) from that
// profile, else from any profile of its device kind and architecture. Where no row is of that kind,
// the nearest kind's (a GPU of another architecture: the same architecture's, then the profile's
// own) marked `at_least`; none without any.
std::optional<ExpectedError> expected_error(const std::vector<ValidationRow>& rows,
                                            const DeviceProfile& from, PredictionKind kind);

// Calibration of the stated errors against the held-out rows, by kind: each held-out entry (a
// model predicted on a device) against the error `expected_error` states for its prediction with
// that model left out of every row (its own measurement cannot widen its own error bar).
struct CalibrationRow {
  PredictionKind kind = PredictionKind::Own;
  int entries = 0, covered = 0;  // entries within their stated worst
  double stated_median = 0;      // the median of the stated medians
  double measured_median = 0;    // the median |error| of the entries
  // The median over the entries of |error| / its stated median: 1 where the stated medians are
  // the typical errors (entries of devices with large and small errors pooled alike).
  double median_ratio = 0;
  double coverage() const { return entries ? static_cast<double>(covered) / entries : 0; }
  // At least 90% of the entries within their stated worst, and the stated medians within 1.5x of
  // the measured errors (median_ratio in [1 / 1.5, 1.5]).
  bool holds() const;
};
std::vector<CalibrationRow> calibrate(const std::vector<ValidationRow>& rows);

// Whether every kernel of `spec` at `batch` has a sample of its own shape in `profile` (a
// built-in model on a device that measured it), so that its own-profile row applies to it.
bool profile_has_model(const DeviceProfile& profile, const ModelSpec& spec, int64_t batch);

}  // namespace xo

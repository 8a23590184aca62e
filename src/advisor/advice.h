// The advisor's sections of a report: predictions for the catalog's devices, the cost of a run on
// each cloud instance and on owned hardware, break-even usage, and the short recommendation that
// `crossover advise` prints. Every figure is either measured here (a run) or a labelled prediction
// whose assumptions are listed with it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "advisor/catalog.h"
#include "advisor/cost.h"
#include "advisor/crossover_point.h"
#include "advisor/predict.h"
#include "advisor/profile_predict.h"
#include "measure/peaks.h"
#include "measure/run_record.h"

namespace xo {

struct AdviceOptions {
  OwnershipAssumptions ownership;
  double hours_per_month = 100;  // the use at which payback times are given
  // What a prediction assumes kernels reach of a catalog device's datasheet figures.
  double achievable_flops_fraction = 0.8;
  double achievable_bandwidth_fraction = 0.8;
  // A GPU step's fixed costs when no GPU was measured here: a CUDA Graph replay of the step, about
  // 2 us per kernel, 3 kernels per layer (forward, two backward matmuls with fused epilogues), and
  // the loss, optimizer and graph launch per step.
  double gpu_step_overhead_us = 10;
  double gpu_layer_overhead_us = 6;
  // The device profiles predictions start from (use_profiles: this machine's cached ones first,
  // then the shipped ones), which of them were measured here, and whether each prediction carries
  // its expected error from the shipped profiles' validation table (shipped_validation; what only
  // needs the seconds, a search's price, leaves it out). No profiles: the roofline of the probed
  // peaks.
  // Fused trials (train/trials.h): predictions are of this many trials of the model trained as
  // one group (predict_fused_with_profile); 0: of one run alone.
  int trials = 0;
  std::vector<DeviceProfile> profiles;
  std::vector<std::string> local_profiles;
  bool expected_errors = false;
};

// Fills o.profiles and o.local_profiles, and sets o.expected_errors: `local` (this machine's
// cached profiles) and the shipped ones (data/profiles/).
void use_profiles(AdviceOptions& o, const std::vector<DeviceProfile>& local);
// The shipped profiles' validation table (validate_profiles), computed once per process when first
// asked for.
const std::vector<ValidationRow>& shipped_validation();
// `o` with the device profiles predictions start from: this machine's cached ones (`crossover
// devices --profile`) and the shipped ones. Unchanged when it has some.
AdviceOptions with_profiles(const AdviceOptions& o);

// A step predicted from the profiles: the profile it came from, whether that is the device's own,
// and the validation table's median error for that kind of prediction.
struct ProfiledStep {
  StepPrediction step;
  const DeviceProfile* from = nullptr;
  // The device's own profile: measured on it, or on the same part (a catalog GPU whose model and
  // multiprocessors match a GPU profile's device), so nothing is scaled.
  bool own = false;
  // Of the two, this machine's CPU from a shipped profile of its kind, measured on another
  // machine (same_cpu_kind): its expected error is not validated here, at least the profile's own.
  bool kind_only = false;
  bool graph = false;  // a GPU's recorded step, from the profile's graph times
  // None: every kernel of the model is in the profile at its shape; Model: a model it did not
  // measure (its kernels from neighbouring shapes), validated as such (leave one model out).
  Holdout holdout = Holdout::None;
  PredictionKind kind = PredictionKind::Own;  // what its expected error must be validated by
  int unprofiled = 0;  // kernels of a kind the profile never measured: their roofline
  std::optional<ExpectedError> expected_error;
  int trials = 0;  // fused trials predicted (AdviceOptions::trials), in `groups` concurrent groups
  int groups = 1;
};
// `spec` at `batch` on `target` from the nearest profile in o (the device's own when one of
// o.local_profiles is that device; else the first of the target's kind with kernel samples; else
// any with them). None without profiles.
std::optional<ProfiledStep> profiled_step(const ModelSpec& spec, int64_t batch,
                                          const TargetDevice& target, const AdviceOptions& o);
// This machine's device as a prediction's target: its probed peaks, the engine's rules.
TargetDevice local_target(const DeviceInfo& d, const DevicePeaks& p, const AdviceOptions& o);
// A catalog device as a prediction's target: its datasheet rates times the achievable fractions,
// the fixed costs catalog_rates gives, the engine's rules for its threads.
TargetDevice catalog_target(const CatalogDevice& d, const std::vector<DevicePeaks>& peaks,
                            const AdviceOptions& o);

// One predicted (or, for local devices, measured and predicted) step time of a model.
struct DevicePrediction {
  std::string model;   // the model predicted
  std::string device;  // catalog id, or the local device id
  std::string name;
  DeviceKind kind = DeviceKind::Cpu;
  bool local = false;  // a device of this machine: measured, and predicted from its probe
  StepPrediction step;
  std::optional<double> measured_s;        // the median step measured on it
  std::optional<double> measured_epoch_s;  // an epoch measured on it (seconds_per_epoch)
  // A GPU predicted at its roofline (efficiency 1) with no GPU measured here to calibrate it:
  // the step takes at least this long.
  bool lower_bound = false;
  // Catalog devices that instances carry N at a time (with their link): the step predicted on one
  // device for its slice of the batch (ceil(batch / N) rows), by N.
  std::map<int, double> slice_seconds;
  std::string profile;                   // the profile it was predicted from ("" : roofline)
  std::optional<double> expected_error;  // the validation table's median |error| for its kind
  std::optional<double> expected_worst;  // and its worst
  bool expected_at_least = false;  // no row validates its kind: at least these (see ExpectedError)
  std::string expected_kind;       // whose held-out rows the figures are (prediction_kind_name)
  std::vector<std::string> assumptions;
  // A catalog CPU with a bf16 unit (AMX, AVX-512 BF16), weighed at bf16 where a profile timed at
  // bf16 predicts it faster, as a user would train on it: "bf16", and its step at f32 beside.
  // "" (f32) otherwise.
  std::string precision;
  std::optional<double> f32_step_s;
};

// Predictions of `focus` (a measured run) on this machine's devices (from their probed peaks,
// uncalibrated, next to the measurement) and on every catalog device (calibrated by the local
// device of the same kind where one was measured).
std::vector<DevicePrediction> predict_devices(const RunRecord& focus,
                                              const std::vector<RunRecord>& local_runs,
                                              const std::vector<DevicePeaks>& peaks,
                                              const Catalog& catalog, const AdviceOptions& o);

// "measured", "predicted", or "predicted, a lower bound": the kind of estimate `p` is.
const char* prediction_kind(const DevicePrediction& p);
// A step on the device `p` names: measured where it was, else predicted.
double step_seconds(const DevicePrediction& p);
// The device counts of the catalog's runs on `device` on several devices: all of an instance's
// devices where it carries several with their link given, and every device of 2 and 4 instances
// where their network is given; the data-parallel runs cost_table prices (price_table.cpp).
std::vector<int> scale_out_counts(const Catalog& catalog, const std::string& device);

// The full run (epochs x steps per epoch) on the device `p` names, by the one definition every
// per-run figure uses (the runs table, the sweep, the cost table, the advice and the verdict):
// where it was measured, its epoch time (seconds_per_epoch: an epoch's wall time, every step
// included, or the median step times the steps where no epoch completed); else the predicted
// step times the steps.
double run_seconds(const DevicePrediction& p, int64_t epochs, int64_t steps_per_epoch);

// The efficiency of `row` on its device, against that device's probed peaks (1 when unprobed).
double local_efficiency(const RunRecord& row, const std::vector<DevicePeaks>& peaks);

// The catalog GPU predicted against the sweeps when no GPU is here: the GPU of the cheapest
// single-GPU instance (what a user would rent first). Null when the catalog has none.
const CatalogDevice* reference_gpu(const Catalog& catalog);
// Why a chart plots `gpu` (the verdict's, chart_gpu in verdict.h, or the reference GPU), and
// what kind of estimate its
// predicted line is, for the chart's note.
std::string chart_gpu_note(const Catalog& catalog, const AdviceOptions& o,
                           const CatalogDevice& gpu);
// A catalog device's rates as predictions use them (achievable fractions of its datasheet).
DeviceRates catalog_rates(const CatalogDevice& d, const std::vector<DevicePeaks>& peaks,
                          const AdviceOptions& o);

// Cost of `epochs` epochs of `steps_per_epoch` steps on every instance and owned device, and
// break-even usage, from the predictions (measured times where the device is local).
// `parameters` (the model's) sizes the gradients a data-parallel run on a multi-device instance
// sums every step.
CostTable cost_table(const std::string& model, int64_t parameters, int64_t epochs,
                     int64_t steps_per_epoch, const std::vector<DevicePrediction>& p,
                     const Catalog& catalog, const AdviceOptions& o);

// Under this much time saved a run, setting up elsewhere (starting an instance and copying the
// data to it, or buying a card) takes longer than it saves: the verdict's threshold, and the one
// below which the advice leaves scaling out unsaid.
inline constexpr double kMinSavingSeconds = 600;
// Step times within this fraction of each other are a tie (every prediction's error is larger):
// the cheaper device or instance takes it.
inline constexpr double kTieFraction = 0.02;

// The recommendation under the verdict: fastest here (measured); the fastest device in the catalog
// that is faster than here (predicted; ties to the cheapest to rent), or that none is; scaling out
// on one instance or across several, only where it saves at least `min_saving_seconds` a run or
// costs no more than one device; the cheapest cloud run; the crossover sentence (verdict.h); when
// buying pays off against renting, for `verdict_device` only (the catalog GPU the verdict finds
// worth it; empty: none, and nothing about buying).
std::vector<std::string> advice_lines(const std::string& model,
                                      const std::vector<DevicePrediction>& p, const CostTable& cost,
                                      const std::string& crossover,
                                      const std::string& verdict_device,
                                      double min_saving_seconds = kMinSavingSeconds);

// The catalog GPU `gpu` (chart_gpu's) predicted at every point of the first device's runs, as a
// sweep series named "ID (predicted)"; none when a GPU was measured here or `gpu` is null.
std::optional<SweepSeries> predicted_gpu_series(const std::vector<RunRecord>& runs,
                                                const std::vector<DevicePeaks>& peaks,
                                                const AdviceOptions& o, const CatalogDevice* gpu);

}  // namespace xo

// A measured search predicted and priced elsewhere: each trial's steps on a catalog instance's
// device (the advisor's roofline, calibrated by the trial's own measured step here where the
// device is of the same kind), plus what its process spent outside the steps (start-up, data,
// evaluation) as measured; the trials then placed on 1, N and one-per-trial instances in the
// search's order, each on the first free device, and each instance billed until its last trial
// ends.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "model/work.h"
#include "tune/record.h"

namespace xo {

struct TrialCostInput {
  StepWork work;                      // one training step of the trial's model
  int64_t steps = 0;                  // steps it took
  double measured_step_s = 0;         // its median step here
  DeviceKind kind = DeviceKind::Cpu;  // where it was measured
  std::string device;                 // the local device id
  double process_seconds = 0;         // its processes' wall time here
  double train_seconds = 0;           // the part of it spent in training steps
  // The trial's spec and batch, for predictions from device profiles (AdviceOptions::profiles);
  // none: the roofline of `work`.
  std::optional<ModelSpec> spec;
  int64_t batch = 0;
  // The fused group it trained in here (tune --fuse; 1: a process of its own): elsewhere too it is
  // predicted as its share of a group of that many (its steps, process and training time here
  // are already its share of its group's).
  int fused = 1;
  // What its step's prediction from a profile depends on (the architecture, data, batch and
  // optimizer kind): trials of one key share one prediction per device. Empty: its own.
  std::string step_key;
};

// What a trial's step predicted from a device profile depends on: its fusion key
// (tune/space.h) with its optimizer's kind and state and whether it shuffles.
std::string step_key(const ModelSpec& spec);

// The profiled step predictions made so far, by device and step key: a search's trials differ in
// settings a step's prediction does not read, and are priced on every catalog device.
using StepMemo = std::map<std::string, std::optional<double>>;

// The whole search on every catalog instance, cheapest first, for 1, `instances` and one instance
// per trial; `note` says what the predictions assume.
std::vector<SearchCostLine> search_cost(const std::vector<TrialCostInput>& trials,
                                        const std::vector<DevicePeaks>& peaks,
                                        const Catalog& catalog, const AdviceOptions& o,
                                        int instances, std::string& note, StepMemo* memo = nullptr);

// One trial's predicted seconds on the device of `line` (what its dollars are priced at). `o` is
// copied for each call unless its expected_errors is off and its trials are the trial's group
// size (0 for a trial alone): what a caller of many prepares once.
double predicted_trial_seconds(const TrialCostInput& t, const CatalogDevice& device,
                               const std::vector<DevicePeaks>& peaks, const AdviceOptions& o,
                               bool& lower_bound, StepMemo* memo = nullptr);

// Wall time and billed instance-seconds of `jobs` (seconds each, in order) on `instances`
// instances of `per_instance` devices: each job to the device free first.
struct Placement {
  double wall_seconds = 0;
  double instance_seconds = 0;
};
Placement place_jobs(const std::vector<double>& jobs, int instances, int per_instance);

}  // namespace xo

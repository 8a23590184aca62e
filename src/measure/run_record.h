// One measured run of the measuring commands (run, sweep, advise, cost): the training result with
// what was measured around it (the step's work, the utilisation, the peak memory) and where it
// sits in a sweep. Produced by measure_run (measure/run.h); analysed against the device's peaks
// by the advisor (advisor/analysis.h); rendered by report/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "measure/sampler.h"
#include "model/work.h"
#include "train/trainer.h"

namespace xo {

struct RunRecord {
  TrainResult result;
  int64_t layers = 0;  // layers with parameters (weighted_layers)
  std::string axis;    // the swept axis ("depth", "batch", ...); empty outside sweeps
  double axis_value = 0;
  std::string spec_toml;  // the spec that ran, so that results can be re-costed later
  // What a replay compares bit for bit (core/hash.h digests): the data trained and tested on
  // (data_fingerprint) and the parameters and buffers training ended with (Model::parameter_hash).
  // Empty in files written before crossover 0.1.1.
  std::string data_hash;
  std::string params_hash;
  StepWork work;                           // FLOPs and bytes per layer of a full-batch step
  std::optional<Utilisation> utilisation;  // none when not sampled
  double peak_rss_mib = 0;                 // the process's peak resident memory after the run
};

// Per epoch: measured when epochs completed, else the median step times the steps per epoch (a
// sweep capped by --steps); `estimated` says which.
double seconds_per_epoch(const TrainResult& r, bool* estimated = nullptr);
double seconds_per_100_epochs(const TrainResult& r);

}  // namespace xo

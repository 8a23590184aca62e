// Results as files people and programs read: the JSON of one training run, and the sweep's
// results.json / results.csv (written atomically after every model, so an interrupted sweep keeps
// what it finished).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "advisor/predict.h"
#include "measure/peaks.h"
#include "train/trainer.h"

namespace xo {

inline constexpr const char* kTrainSchema = "crossover.train/1";
inline constexpr const char* kReportSchema = "crossover.report/1";

nlohmann::json to_json(const TrainResult& r);

// Number of layers with parameters (the "L" of disc-L: its Linear layers), for tables.
int64_t weighted_layers(const ModelSpec& spec);

// One measured (model, device) of a run, sweep or advice, with what the report shows about it.
struct SweepRow {
  TrainResult result;
  int64_t layers = 0;         // layers with parameters
  std::string axis;           // the swept axis ("depth", "batch", ...); empty outside sweeps
  double axis_value = 0;
  std::string spec_toml;      // the spec that ran, so that results can be re-costed later
  StepCost cost;              // FLOPs and bytes per layer of a full-batch step
  nlohmann::json utilisation; // Sampler::timeline_json(), or null
  double peak_rss_mib = 0;    // the process's peak resident memory after the run
};

// Per epoch: measured when epochs completed, else the median step times the steps per epoch (a
// sweep capped by --steps); `estimated` says which.
double seconds_per_epoch(const TrainResult& r, bool* estimated = nullptr);
double seconds_per_100_epochs(const TrainResult& r);

// The report's entry for one row: the training result (as to_json, with the epoch records under
// "epoch_log" and "epochs" their count) plus the axis, time per epoch, the fraction of the
// device's measured peak, the phase split, the per-layer profile (FLOP/s, fraction of peak and
// the bounding term) and the utilisation timeline. `peaks` may be null (no probe).
nlohmann::json run_json(const SweepRow& row, const DevicePeaks* peaks);

// Writes results.json (the report document), results.csv (one line per run) and report.html into
// out_dir, each atomically.
void write_report(const std::filesystem::path& out_dir, const nlohmann::json& report);
std::string runs_csv(const nlohmann::json& report);

}  // namespace xo

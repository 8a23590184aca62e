// Results as files people and programs read: the JSON of one training run, and the sweep's
// results.json / results.csv (written atomically after every model, so an interrupted sweep keeps
// what it finished).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/trainer.h"

namespace xo {

inline constexpr const char* kTrainSchema = "crossover.train/1";
inline constexpr const char* kRunSchema = "crossover.run/1";

nlohmann::json to_json(const TrainResult& r);

// Number of layers with parameters (the "L" of disc-L: its Linear layers), for tables.
int64_t weighted_layers(const ModelSpec& spec);

// One row of the sweep table: model, layers, parameters, device, s/100 epochs, ms/step, GFLOP/s,
// final training error.
struct SweepRow {
  TrainResult result;
  int64_t layers = 0;
};

double seconds_per_100_epochs(const TrainResult& r);

void write_sweep(const std::filesystem::path& out_dir, const std::vector<SweepRow>& rows,
                 const nlohmann::json& machine, bool complete);
std::string sweep_csv(const std::vector<SweepRow>& rows);

}  // namespace xo

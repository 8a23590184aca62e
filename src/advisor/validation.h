// `crossover validate`'s measurement: a device here profiled (or its cached profile read), the
// built-in models measured on it each in a process of its own, and every device with measured
// steps (this one and the shipped profiles) predicted from its own profile and from every other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "advisor/profile_predict.h"
#include "backend/backend.h"
#include "measure/profile.h"

namespace xo {

struct ValidationSettings {
  std::string device = "cpu";
  int threads = 0;
  int64_t steps = 200;              // training steps measured per model
  int repeat = 5;                   // runs per model, in rounds over the models
  std::vector<std::string> models;  // built-in names; all when empty
  bool reprofile = false;
};

// What the measurement needs from the layers above it.
struct ValidationHooks {
  std::string machine;  // this machine in words, for the profile
  // A measured model's step median and batch, from the `crossover train --json` file its process
  // wrote.
  std::function<std::pair<double, int64_t>(const std::filesystem::path& json)> read_train;
  std::function<void(double fraction, const std::string& text)> progress;
};

struct Validation {
  DeviceProfile here;  // this device's profile with its measured steps
  std::vector<ValidationRow> rows;
};

// Profiles the device, measures the models (`--repeat` rounds over all of them, the fastest of
// each model's run medians) and validates every profile. Nothing when a stop request came.
std::optional<Validation> validate_here(Backend& backend, const ValidationSettings& settings,
                                        const ValidationHooks& hooks);

}  // namespace xo

// What `run`, `sweep`, `advise` and `cost` share: the devices and their backends, each device's
// measured peaks (probed once, cached), training a spec with the utilisation sampler running and
// a per-layer profile, the progress bar, the catalog with the user's overrides, and the report
// document written after every model (so an interruption keeps what finished).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "cli/commands.h"
#include "measure/peaks.h"
#include "report/results.h"

namespace xo::cli {

struct MeasureOptions {
  std::vector<std::string> devices;  // empty: every device present
  std::optional<int64_t> epochs;
  int64_t max_steps = 0;             // 0: train every epoch
  int threads = 0;
  int profile_steps = 10;
  double sample_interval_s = 0.1;
  bool reprobe = false;              // measure the peaks again rather than use the cache
  std::string precision = "f32";     // GPUs' matmul arithmetic (the CPU always runs f32)
  bool record_step = true;           // replay each step as one CUDA Graph where the device can
  std::string out = "crossover-results";
};

// The cost options every advising command takes.
struct CostOptions {
  std::vector<std::string> catalogs;  // user catalog files merged over the shipped one
  std::vector<std::string> prices;    // ID=USD overrides
  AdviceOptions advice;
};

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps);
void add_cost_options(CLI::App* sub, CostOptions& o);
// --precision and --no-graph, shared by `train` and the measuring commands.
void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step);
Catalog load_user_catalog(const CostOptions& o);

class Session {
 public:
  explicit Session(const MeasureOptions& o);

  const std::vector<std::string>& devices() const { return devices_; }
  const std::vector<DevicePeaks>& peaks() const { return peaks_; }
  const nlohmann::json& machine() const { return machine_; }
  std::vector<SweepRow>& rows() { return rows_; }
  bool stopped() const { return stopped_; }

  // Trains `spec` on `device` (progress on the terminal, the sampler running) and appends the
  // row. `job` / `jobs` place it in the whole job for the progress bar.
  const SweepRow& measure(const ModelSpec& spec, const std::string& device, size_t job,
                          size_t jobs, const std::string& axis = "", double axis_value = 0);

  // The report document around the rows measured so far.
  nlohmann::json report(const std::string& kind, const std::string& title) const;

 private:
  Backend& backend(const std::string& device);

  MeasureOptions o_;
  std::vector<std::string> devices_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DevicePeaks> peaks_;
  nlohmann::json machine_;
  std::vector<SweepRow> rows_;
  Progress progress_;
  bool stopped_ = false;
  double started_ = 0;
};

// Sweep series (one per device, x = the axis) of the rows, by seconds per 100 epochs.
std::vector<SweepSeries> sweep_series(const std::vector<SweepRow>& rows);
nlohmann::json sweep_json(const std::string& axis, const std::vector<SweepSeries>& series,
                          const std::vector<Crossover>& crossovers,
                          const std::vector<std::string>& predicted_devices);

// The catalog's reference GPU (see reference_gpu) predicted at every point of the first device's
// rows, as a sweep series named "ID (predicted)"; none when a GPU was measured or the catalog has
// no GPU instance.
std::optional<SweepSeries> predicted_gpu_series(const std::vector<SweepRow>& rows,
                                                const std::vector<DevicePeaks>& peaks,
                                                const Catalog& catalog, const AdviceOptions& o);

// Adds predictions, cost and advice for `focus` to a report document, and a predicted series of
// the reference GPU to its sweep (when the sweep has no GPU of its own).
void add_advice(nlohmann::json& report, const SweepRow& focus, const std::vector<SweepRow>& rows,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::vector<Crossover>& crossovers,
                const std::string& axis, bool crossover_predicted);

}  // namespace xo::cli

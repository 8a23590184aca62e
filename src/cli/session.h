// What `run`, `sweep`, `advise` and `cost` share: the devices and their backends, each device's
// measured peaks (probed once, cached), training a spec with the utilisation sampler running and
// a per-layer profile, the progress bar, the catalog with the user's overrides, and the report
// document written after every model (so an interruption keeps what finished).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "advisor/catalog.h"
#include "cli/commands.h"
#include "measure/peaks.h"
#include "measure/run.h"
#include "report/document.h"
#include "report/machine.h"

namespace xo::cli {

struct MeasureOptions {
  std::vector<std::string> devices;  // empty: every device present
  std::optional<int64_t> epochs;
  int64_t max_steps = 0;  // 0: train every epoch
  int threads = 0;
  int profile_steps = 10;
  double sample_interval_s = 0.1;
  bool reprobe = false;           // measure the peaks again rather than use the cache
  std::string precision = "f32";  // GPUs' matmul arithmetic (the CPU always runs f32)
  bool record_step = true;        // replay each step as one CUDA Graph where the device can
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
  const std::vector<RunRecord>& runs() const { return runs_; }
  bool stopped() const { return stopped_; }

  // Trains `spec` on `device` (progress on the terminal, the sampler running) and appends the
  // run. `job` / `jobs` place it in the whole job for the progress bar.
  const RunRecord& measure(const ModelSpec& spec, const std::string& device, size_t job,
                           size_t jobs, const std::string& axis = "", double axis_value = 0);

  // The report document around the runs measured so far, each analysed against its peaks.
  Report report(const std::string& kind, const std::string& title) const;

 private:
  Backend& backend(const std::string& device);

  MeasureOptions o_;
  std::vector<std::string> devices_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<DevicePeaks> peaks_;
  MachineInfo machine_;
  std::vector<RunRecord> runs_;
  Progress progress_;
  bool stopped_ = false;
  double started_ = 0;
};

// The manifest of a job measured with `o` on `devices` (resolved ids): this build, its
// libraries and those of the devices `runs` used, the command line and the settings
// (cli/manifest.cpp).
Manifest job_manifest(const MeasureOptions& o, const std::vector<std::string>& devices,
                      const std::vector<RunRecord>& runs);
// The measuring options that repeat a job recorded with `settings` (`crossover replay`).
MeasureOptions measure_options(const ExecutionSettings& settings);

// Adds predictions, cost and advice for `focus` to a report document.
void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o, const std::vector<Crossover>& crossovers,
                const std::string& axis, bool crossover_predicted);

}  // namespace xo::cli

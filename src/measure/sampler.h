// A sampler that runs beside training on its own thread: CPU utilisation per core from the
// kernel's counters (/proc/stat), the process's resident memory (/proc/self/statm) and, where an
// NVIDIA driver is present, GPU utilisation, memory, power and SM clock through NVML. Where NVML
// is missing the GPU fields stay empty ("n/a" in reports), never an error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "measure/nvml.h"

namespace xo {

struct UtilisationSample {
  double t_s = 0;                    // since start()
  std::vector<double> core_percent;  // busy share of each logical CPU over the last interval
  double cpu_percent = 0;            // their mean
  double rss_mib = 0;                // the process's resident memory
  // Cores kept busy by everything but this process over the last interval, on the CPUs this
  // process may run on (none where the counters are unreadable).
  std::optional<double> other_cores;
  GpuReading gpu;  // empty without NVML or without a GPU to watch
};

// What the report shows of a run's utilisation: a summary and a timeline thinned to at most a few
// hundred points. The GPU series are empty when no sample had a GPU reading (no NVML, no GPU);
// otherwise each sample's reading, empty where NVML gave none.
struct Utilisation {
  double interval_s = 0;
  int64_t samples = 0;  // taken, before thinning
  std::vector<double> t_s, cpu_percent, rss_mib;
  std::vector<std::vector<double>> cpu_core_percent;
  std::vector<std::optional<double>> gpu_percent, gpu_memory_mib, gpu_power_w, gpu_sm_clock_mhz;
  std::optional<double> mean_cpu_percent;  // over every sample; none without samples
  std::optional<double> mean_gpu_percent;  // over the samples with a GPU reading
  // Other processes' load on this process's CPUs, in cores, averaged over the samples: a run's
  // timings are contaminated from kContaminatingCores on (timings_contaminated).
  std::optional<double> mean_other_cores;
  double max_rss_mib = 0;
};

// A quarter of a core busy elsewhere, on average over the run, makes its timings untrustworthy:
// on a 2-core machine one other spinning process made the mean step far slower and read well above
// this, while a quiet machine read well below it (bench/contention.py; docs/benchmarks.md, "A busy
// machine").
inline constexpr double kContaminatingCores = 0.25;
inline bool timings_contaminated(const Utilisation& u) {
  return u.mean_other_cores && *u.mean_other_cores >= kContaminatingCores;
}
// The warning a contaminated run prints and its reports show ("other processes kept 1.0 cores
// busy ..."); empty when the run was not contaminated. `cpu_threads`, for a CPU run, adds the
// thread count that leaves the busy cores alone: on a busy core, OpenMP's spinning threads wait
// for the one that was descheduled, and one thread fewer keeps near the quiet step
// (bench/contention.py; docs/benchmarks.md, "A busy machine").
std::string contamination_warning(const Utilisation& u, const std::string& what,
                                  int cpu_threads = 0);

// Busy and total jiffies of each logical CPU ("cpuN" lines of /proc/stat); empty when unreadable.
// `mine` says which of them this process may run on (its affinity mask): a container's /proc/stat
// lists the host's CPUs.
struct CpuTimes {
  std::vector<uint64_t> busy, total;
  std::vector<bool> mine;
  uint64_t process = 0;  // this process's user + system jiffies (/proc/self/stat)
  bool process_known = false;
};
CpuTimes read_cpu_times();
// Per-core busy percent between two readings (0 where a core did not advance).
std::vector<double> core_utilisation(const CpuTimes& before, const CpuTimes& after);
// Cores kept busy by other processes between two readings, on this process's CPUs: their busy
// jiffies less this process's, over the interval's jiffies per core. None where unreadable.
std::optional<double> other_cores(const CpuTimes& before, const CpuTimes& after);
// The cores other processes kept busy since `before` (other_cores up to now) when they are
// kContaminatingCores or more: a measurement taken meanwhile is not to be cached. None on a quiet
// machine, or where the counters are unreadable.
std::optional<double> contaminating_load_since(const CpuTimes& before,
                                               double limit = kContaminatingCores);
// Resident memory of this process in MiB (0 when unreadable), and its peak so far (VmHWM).
double resident_mib();
double peak_resident_mib();
// Resets the peak (VmHWM) to the current resident size, so that the next peak_resident_mib() is
// one run's peak (writes "5" to /proc/self/clear_refs). False where the kernel refuses.
bool reset_peak_resident();

class Sampler {
 public:
  // gpu_index < 0: no GPU to watch.
  explicit Sampler(double interval_s = 0.1, int gpu_index = -1);
  ~Sampler();
  void start();
  // Stops the thread after one last sample; the samples stay readable.
  void stop();
  std::vector<UtilisationSample> samples() const;

  // The summary over every sample and a timeline of at most `max_points` of them (evenly thinned).
  Utilisation timeline(size_t max_points = 300) const;

 private:
  void take(double t_s);
  void loop();

  double interval_s_;
  int gpu_index_;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool running_ = false;
  CpuTimes last_;
  std::chrono::steady_clock::time_point start_;
  std::vector<UtilisationSample> samples_;
};

}  // namespace xo

#include "measure/sampler.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

namespace xo {

CpuTimes read_cpu_times() {
  CpuTimes t;
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    // "cpuN user nice system idle iowait irq softirq steal ..." (the aggregate "cpu " is skipped)
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] == ' ') continue;
    std::istringstream fields(line.substr(line.find(' ')));
    uint64_t v = 0, total = 0, idle = 0;
    for (int i = 0; fields >> v; ++i) {
      if (i >= 8) break;  // guest times are already inside user and nice
      total += v;
      if (i == 3 || i == 4) idle += v;  // idle and iowait
    }
    t.busy.push_back(total - idle);
    t.total.push_back(total);
  }
  return t;
}

std::vector<double> core_utilisation(const CpuTimes& before, const CpuTimes& after) {
  std::vector<double> percent(after.total.size(), 0.0);
  if (before.total.size() != after.total.size()) return percent;
  for (size_t i = 0; i < percent.size(); ++i) {
    if (after.total[i] <= before.total[i]) continue;
    const double busy = static_cast<double>(after.busy[i] - before.busy[i]);
    percent[i] = 100.0 * busy / static_cast<double>(after.total[i] - before.total[i]);
  }
  return percent;
}

double resident_mib() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

double peak_resident_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // in kB
  }
  return 0;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

Sampler::Sampler(double interval_s, int gpu_index)
    : interval_s_(interval_s), gpu_index_(gpu_index) {}

Sampler::~Sampler() { stop(); }

void Sampler::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return;
  samples_.clear();
  running_ = true;
  start_ = std::chrono::steady_clock::now();
  last_ = read_cpu_times();
  thread_ = std::thread([this] { loop(); });
}

void Sampler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_) return;
    running_ = false;
  }
  wake_.notify_all();
  thread_.join();
}

void Sampler::take(double t_s) {
  UtilisationSample s;
  s.t_s = t_s;
  const CpuTimes now = read_cpu_times();
  s.core_percent = core_utilisation(last_, now);
  last_ = now;
  double sum = 0;
  for (double p : s.core_percent) sum += p;
  s.cpu_percent = s.core_percent.empty() ? 0 : sum / static_cast<double>(s.core_percent.size());
  s.rss_mib = resident_mib();
  if (gpu_index_ >= 0 && Nvml::get().available()) s.gpu = Nvml::get().read(gpu_index_);
  samples_.push_back(std::move(s));
}

void Sampler::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = std::chrono::duration<double>(interval_s_);
  auto next = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
  while (true) {
    const bool stopping = wake_.wait_until(lock, next, [this] { return !running_; });
    const auto now = std::chrono::steady_clock::now();
    take(std::chrono::duration<double>(now - start_).count());
    if (stopping) return;
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    if (next < now) next = now;  // fell behind (a stalled machine): do not burst
  }
}

std::vector<UtilisationSample> Sampler::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

Utilisation Sampler::timeline(size_t max_points) const {
  const std::vector<UtilisationSample> all = samples();
  Utilisation u;
  u.interval_s = interval_s_;
  u.samples = static_cast<int64_t>(all.size());
  const size_t stride = all.size() > max_points ? (all.size() + max_points - 1) / max_points : 1;
  bool any_gpu = false;
  double cpu_sum = 0, gpu_sum = 0;
  size_t gpu_n = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const UtilisationSample& s = all[i];
    cpu_sum += s.cpu_percent;
    u.max_rss_mib = std::max(u.max_rss_mib, s.rss_mib);
    if (s.gpu.utilisation_percent) {
      gpu_sum += *s.gpu.utilisation_percent;
      ++gpu_n;
      any_gpu = true;
    }
    if (i % stride != 0) continue;
    // Rounded as the report prints them: ms and a tenth of a percent or MiB.
    u.t_s.push_back(std::round(s.t_s * 1000) / 1000);
    u.cpu_percent.push_back(std::round(s.cpu_percent * 10) / 10);
    u.rss_mib.push_back(std::round(s.rss_mib * 10) / 10);
    u.cpu_core_percent.push_back(s.core_percent);
    u.gpu_percent.push_back(s.gpu.utilisation_percent);
    u.gpu_memory_mib.push_back(s.gpu.memory_used_mib);
    u.gpu_power_w.push_back(s.gpu.power_w);
    u.gpu_sm_clock_mhz.push_back(s.gpu.sm_clock_mhz);
  }
  if (!any_gpu) {
    u.gpu_percent.clear();
    u.gpu_memory_mib.clear();
    u.gpu_power_w.clear();
    u.gpu_sm_clock_mhz.clear();
  }
  if (!all.empty()) u.mean_cpu_percent = cpu_sum / static_cast<double>(all.size());
  if (gpu_n) u.mean_gpu_percent = gpu_sum / static_cast<double>(gpu_n);
  return u;
}

}  // namespace xo

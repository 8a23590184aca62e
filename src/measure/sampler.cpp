#include "measure/sampler.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace xo {

namespace {

// User + system jiffies of this process: fields 14 and 15 of /proc/self/stat, counted after the
// command name's closing parenthesis (a name may hold spaces or parentheses itself).
std::optional<uint64_t> process_jiffies() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  if (!fields) return std::nullopt;
  return utime + stime;
}

}  // namespace

CpuTimes read_cpu_times() {
  CpuTimes t;
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  const bool have_affinity = sched_getaffinity(0, sizeof(affinity), &affinity) == 0;
  if (const auto p = process_jiffies()) {
    t.process = *p;
    t.process_known = true;
  }
  std::ifstream in("/proc/stat");
  std::string line;
  while (std::getline(in, line)) {
    // "cpuN user nice system idle iowait irq softirq steal ..." (the aggregate "cpu " is skipped)
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] == ' ') continue;
    const int cpu = std::atoi(line.c_str() + 3);
    t.mine.push_back(!have_affinity ||
                     (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &affinity)));
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

std::optional<double> other_cores(const CpuTimes& before, const CpuTimes& after) {
  if (!before.process_known || !after.process_known || after.process < before.process ||
      before.total.size() != after.total.size() || after.mine.size() != after.total.size()) {
    return std::nullopt;
  }
  double busy = 0, total = 0;
  int cores = 0;
  for (size_t i = 0; i < after.total.size(); ++i) {
    if (!after.mine[i] || after.total[i] <= before.total[i]) continue;
    busy += static_cast<double>(after.busy[i] - before.busy[i]);
    total += static_cast<double>(after.total[i] - before.total[i]);
    ++cores;
  }
  if (cores == 0 || total <= 0) return std::nullopt;
  const double per_core = total / cores;  // the interval, in jiffies
  const double mine = static_cast<double>(after.process - before.process);
  return std::max(0.0, busy - mine) / per_core;
}

std::optional<double> contaminating_load_since(const CpuTimes& before, double limit) {
  const std::optional<double> busy = other_cores(before, read_cpu_times());
  if (busy && *busy >= limit) return busy;
  return std::nullopt;
}

std::string contamination_warning(const Utilisation& u, const std::string& what, int cpu_threads) {
  if (!timings_contaminated(u)) return "";
  const int busy = static_cast<int>(std::ceil(*u.mean_other_cores - kContaminatingCores));
  const int free_threads = std::max(1, cpu_threads - std::max(1, busy));
  const std::string remedy = cpu_threads > 1
                                 ? fmt::format(
                                       "measure again on a quiet machine, or with --threads {} to "
                                       "leave the busy cores alone",
                                       free_threads)
                                 : std::string("measure again on a quiet machine");
  return fmt::format(
      "other processes kept {:.1f} cores busy on average during {}: its timings are contaminated "
      "({})",
      *u.mean_other_cores, what, remedy);
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
  s.other_cores = other_cores(last_, now);
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
  double cpu_sum = 0, gpu_sum = 0, other_sum = 0;
  size_t gpu_n = 0, other_n = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const UtilisationSample& s = all[i];
    cpu_sum += s.cpu_percent;
    if (s.other_cores) {
      other_sum += *s.other_cores;
      ++other_n;
    }
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
  if (other_n) u.mean_other_cores = other_sum / static_cast<double>(other_n);
  return u;
}

}  // namespace xo

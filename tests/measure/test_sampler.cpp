// The utilisation sampler on the CPU (a busy thread shows up in the kernel's counters; resident
// memory follows an allocation), NVML's absence reported without an error, and the peaks cache.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "core/file.h"
#include "measure/nvml.h"
#include "measure/peaks.h"
#include "measure/sampler.h"

namespace xo {
namespace {

TEST(Sampler, CoreUtilisationFromTwoReadings) {
  CpuTimes a{{100, 50}, {1000, 1000}}, b{{150, 50}, {1100, 1000}};
  const auto p = core_utilisation(a, b);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_DOUBLE_EQ(p[0], 50.0);  // 50 busy jiffies of 100
  EXPECT_DOUBLE_EQ(p[1], 0.0);   // no time passed on that core
  EXPECT_EQ(core_utilisation(CpuTimes{}, b), std::vector<double>(2, 0.0));  // mismatched
  const CpuTimes now = read_cpu_times();
  EXPECT_GE(now.total.size(), 1u);  // the machine has at least one cpuN line
}

TEST(Sampler, SeesABusyCoreAndResidentMemory) {
  Sampler sampler(0.02);
  sampler.start();
  std::atomic<bool> stop{false};
  std::thread spin([&] {
    volatile double x = 0;
    while (!stop) x = x + 1;
  });
  // 64 MiB touched: the resident size must grow by about that much. Mapped and unmapped directly,
  // so that what the kernel counts follows the test (an allocator may keep freed memory: ASan's
  // quarantine does).
  const double before = resident_mib();
  constexpr size_t kBlock = size_t{64} << 20;
  void* block = mmap(nullptr, kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(block, MAP_FAILED);
  std::memset(block, 1, kBlock);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  spin.join();
  sampler.stop();
  const auto samples = sampler.samples();
  ASSERT_GE(samples.size(), 5u);
  double busiest = 0;
  for (const auto& s : samples) {
    for (double p : s.core_percent) busiest = std::max(busiest, p);
    EXPECT_FALSE(s.gpu.utilisation_percent.has_value());  // no GPU watched
  }
  EXPECT_GT(busiest, 50.0);  // the spinning thread kept one core busy
  EXPECT_GT(samples.back().rss_mib, before + 48);
  EXPECT_GE(peak_resident_mib(), samples.back().rss_mib - 1);
  // After the block is freed and the peak reset, the peak is no longer the block's.
  const double with_block = peak_resident_mib();
  munmap(block, kBlock);
  if (reset_peak_resident()) {
    EXPECT_LT(peak_resident_mib(), with_block - 32);
  }
  EXPECT_GT(samples.back().t_s, samples.front().t_s);
  const Utilisation u = sampler.timeline(3);
  EXPECT_LE(u.t_s.size(), 3u);
  EXPECT_EQ(static_cast<size_t>(u.samples), samples.size());
  EXPECT_TRUE(u.gpu_percent.empty());
  EXPECT_GT(u.max_rss_mib, 48);
}

TEST(Sampler, WithoutNvmlTheGpuColumnsAreEmptyNotAnError) {
  Nvml& nvml = Nvml::get();
  if (nvml.available()) GTEST_SKIP() << "an NVIDIA driver is present";
  EXPECT_FALSE(nvml.why().empty());
  EXPECT_EQ(nvml.driver_version(), "n/a");
  EXPECT_EQ(nvml.device_name(0), "n/a");
  const GpuReading r = nvml.read(0);
  EXPECT_FALSE(r.utilisation_percent || r.memory_used_mib || r.power_w || r.sm_clock_mhz);
  Sampler sampler(0.01, 0);  // asked to watch GPU 0: still no error
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  sampler.stop();
  EXPECT_TRUE(sampler.timeline().gpu_percent.empty());
}

// A child process that spins for `ms` milliseconds and exits: other load, as this process sees it.
pid_t spinning_child(int ms) {
  const pid_t child = fork();
  if (child == 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < end) x = x + 1;
    _exit(0);
  }
  return child;
}

TEST(Peaks, ProbedOnceThenCachedAndADamagedCacheIsReplaced) {
  auto be = make_backend(parse_device("cpu", 1));
  const auto dir = std::filesystem::path(::testing::TempDir()) / "peaks_cache";
  std::filesystem::remove_all(dir);
  const auto file = dir / "peaks.json";
  // Other tests may run beside this one: no load keeps a probe out of this cache.
  const double never_busy = std::numeric_limits<double>::infinity();
  const DevicePeaks first = device_peaks(*be, false, file, never_busy);
  EXPECT_FALSE(first.cached);
  EXPECT_GT(first.matmul_gflops, 0.5);
  EXPECT_GT(first.bandwidth_gbs, 0.1);
  EXPECT_GE(first.step_overhead_us, 0);
  const DevicePeaks second = device_peaks(*be, false, file, never_busy);
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.matmul_gflops, first.matmul_gflops);
  EXPECT_EQ(second.probed, first.probed);
  // --reprobe measures again.
  EXPECT_FALSE(device_peaks(*be, true, file, never_busy).cached);
  // A damaged file is probed over and rewritten.
  write_file_atomic(file, "{ not json");
  EXPECT_FALSE(device_peaks(*be, false, file, never_busy).cached);
  EXPECT_TRUE(device_peaks(*be, false, file, never_busy).cached);
}

TEST(Peaks, AProbeOnABusyMachineIsUsedButNotCached) {
  auto be = make_backend(parse_device("cpu", 1));
  const auto dir = std::filesystem::path(::testing::TempDir()) / "peaks_cache_busy";
  std::filesystem::remove_all(dir);
  const auto file = dir / "peaks.json";
  // A limit below any load: every probe counts as taken on a busy machine.
  const DevicePeaks first = device_peaks(*be, false, file, -1.0);
  EXPECT_GT(first.matmul_gflops, 0.5);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(device_peaks(*be, false, file, -1.0).cached);  // probed again
}

// Processes spinning on every core this one may use are the load that keeps a measurement out of
// the caches.
TEST(Sampler, ALoadBesideAMeasurementIsSeen) {
  const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  const CpuTimes before = read_cpu_times();
  std::vector<pid_t> children;
  for (int i = 0; i < cores; ++i) {
    const pid_t child = spinning_child(500);
    ASSERT_GT(child, 0);
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
  }
  const std::optional<double> busy = contaminating_load_since(before);
  ASSERT_TRUE(busy.has_value());
  EXPECT_GT(*busy, 0.5);
  // With a limit above any machine's cores, nothing is too busy.
  EXPECT_FALSE(contaminating_load_since(before, 1e9).has_value());
}

// The other processes' load from two readings: the CPUs' busy jiffies less this process's, over
// the interval, on the CPUs this process may use only.
TEST(OtherLoad, IsTheBusyTimeThatIsNotThisProcesssOnItsOwnCpus) {
  CpuTimes before{{100, 200, 300}, {1000, 1000, 1000}, {true, true, false}, 50, true};
  // 100 jiffies pass on each CPU; the first two were busy 80 and 90 of them, 60 of those ours;
  // the third (not ours: another container's) was busy throughout and does not count.
  CpuTimes after{{180, 290, 400}, {1100, 1100, 1100}, {true, true, false}, 110, true};
  const std::optional<double> other = other_cores(before, after);
  ASSERT_TRUE(other.has_value());
  EXPECT_DOUBLE_EQ(*other, (80 + 90 - 60) / 100.0);
  after.process_known = false;
  EXPECT_FALSE(other_cores(before, after).has_value());
}

// A child process spinning beside the sampler: most of a core of other load (this process idles).
TEST(OtherLoad, ASpinningProcessIsSeen) {
  const pid_t child = spinning_child(900);
  ASSERT_GT(child, 0);
  Sampler sampler(0.05);
  sampler.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  sampler.stop();
  int status = 0;
  waitpid(child, &status, 0);
  const Utilisation u = sampler.timeline(10);
  ASSERT_TRUE(u.mean_other_cores.has_value());
  EXPECT_GT(*u.mean_other_cores, 0.5);
  EXPECT_TRUE(timings_contaminated(u));
}

}  // namespace
}  // namespace xo

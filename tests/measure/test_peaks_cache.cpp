// The peaks cache's JSON: a damaged file and a mistyped entry are refused with a clear error (so
// that device_peaks probes again), and an entry reads back what was written.
#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"
#include "measure/peaks.h"
#include "support/expect_error.h"
#include "support/gpu.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

TEST(PeaksCache, AnEntryReadsBackWhatWasWritten) {
  DevicePeaks p;
  p.device = "cpu";
  p.name = "a CPU";
  p.threads = 2;
  p.matmul_gflops = 95.5;
  p.matmul_n = 2048;
  p.bandwidth_gbs = 12.25;
  p.step_overhead_us = 20.5;
  p.layer_overhead_us = 3.25;
  p.probed = "2026-11-23T10:00:00Z";
  const nlohmann::json cache =
      parse_peaks_cache(nlohmann::json{{"key", to_json(p)}}.dump(2), "peaks.json");
  const DevicePeaks q = peaks_from_json(cache.at("key"), "peaks.json");
  EXPECT_EQ(q.threads, 2);
  EXPECT_EQ(q.matmul_n, 2048);
  EXPECT_EQ(q.bandwidth_gbs, 12.25);
  EXPECT_EQ(q.probed, p.probed);
}

TEST(PeaksCache, DamagedFilesAreUserErrorsNamingTheFile) {
  testing::expect_user_error([] { parse_peaks_cache("{\"a\": 1", "cache/peaks.json"); },
                             {"cache/peaks.json: not valid JSON"});
  testing::expect_user_error([] { parse_peaks_cache("[1, 2]", "cache/peaks.json"); },
                             {"cache/peaks.json: not a JSON object"});
  // nlohmann-json dumps (and copies) recursively: the cache, written back after a probe, once
  // overflowed the stack on a deeply nested value.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  testing::expect_user_error(
      [&] { parse_peaks_cache("{\"k\": " + deep + "}", "cache/peaks.json"); },
      {"cache/peaks.json: JSON nested too deep"});
}

TEST(PeaksCache, IntegersOutOfRangeAreRefusedNotCast) {
  DevicePeaks peaks;
  peaks.matmul_gflops = 100;
  peaks.bandwidth_gbs = 10;
  nlohmann::json entry = to_json(peaks);
  entry["threads"] = 1e300;  // get<int> would be a float-to-int cast: undefined behaviour
  testing::expect_user_error([&] { peaks_from_json(entry, "peaks.json"); },
                             {"peaks.json: threads: expected an integer, found a number (1e+300)"});
  entry["threads"] = int64_t{1} << 40;
  testing::expect_user_error([&] { peaks_from_json(entry, "peaks.json"); }, {"threads"});
  entry["threads"] = 4;
  entry["matmul_n"] = UINT64_MAX;
  testing::expect_user_error([&] { peaks_from_json(entry, "peaks.json"); }, {"matmul_n"});
}

// A rate of zero would make every prediction from it infinite: refused like a wrong type (the
// cache is then probed again), and the same list reads a profile's and a report's peaks.
TEST(PeaksCache, RatesMustBePositiveAndCachedMayBeAbsent) {
  DevicePeaks peaks;
  peaks.matmul_gflops = 100;
  peaks.bandwidth_gbs = 10;
  nlohmann::json entry = to_json(peaks);
  entry.erase("cached");
  EXPECT_FALSE(peaks_from_json(entry, "peaks.json").cached);
  entry["bandwidth_gbs"] = 0;
  testing::expect_user_error(
      [&] { peaks_from_json(entry, "peaks.json"); },
      {"peaks.json: bandwidth_gbs: expected a number >= 1e-09, found a number (0)"});
  entry["bandwidth_gbs"] = 10;
  entry["step_overhead_us"] = -1;
  testing::expect_user_error([&] { peaks_from_json(entry, "peaks.json"); },
                             {"step_overhead_us: expected a number >= 0, found a number (-1)"});
}

// A device at another precision than f32 (the CPU at bf16, a GPU at tf32 or bf16) is probed in it
// and cached under a key of its own; f32's key is as before precisions, and an entry without a
// precision (a file from before them) reads as f32.
TEST(PeaksCache, APrecisionOtherThanF32HasItsOwnKeyAndReadsBack) {
  DeviceInfo d{.id = "cpu", .name = "a CPU", .threads = 2, .library = "oneDNN"};
  const std::string f32_key = peaks_cache_key(d);
  EXPECT_EQ(f32_key.find("f32"), std::string::npos) << f32_key;
  d.id = kCpuBf16;
  d.precision = "bf16";
  EXPECT_NE(peaks_cache_key(d), f32_key);
  EXPECT_NE(peaks_cache_key(d).find("|bf16|"), std::string::npos) << peaks_cache_key(d);
  DevicePeaks p;
  p.device = kCpuBf16;
  p.name = "a CPU";
  p.precision = "bf16";
  p.matmul_gflops = 400;
  p.bandwidth_gbs = 20;
  p.probed = "2026-12-04T10:00:00Z";
  EXPECT_EQ(peaks_from_json(to_json(p), "peaks.json").precision, "bf16");
  nlohmann::json old = to_json(p);
  old.erase("precision");
  EXPECT_EQ(peaks_from_json(old, "peaks.json").precision, "");
}

// On a GPU at bf16 the matmul probe runs at bf16 and says so (the peaks a `--precision bf16` run's
// % of peak is against).
TEST(PeaksCache, AGpuAtBf16IsProbedAtBf16) {
  std::string why;
  if (!testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  const testing::TempDir dir("gpu_peaks");
  auto be = make_backend(parse_device("cuda", 0, "bf16"));
  const DevicePeaks p = device_peaks(*be, true, dir.path() / "peaks.json");
  EXPECT_EQ(p.precision, "bf16");
  EXPECT_GT(p.matmul_gflops, 0);
}

}  // namespace
}  // namespace xo

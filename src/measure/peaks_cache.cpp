// The peaks cache's JSON: an entry to and from DevicePeaks, and the cache file's text to its
// entries. Apart from peaks.cpp, which probes through a backend, so that the fuzz target links no
// backend.
#include <fmt/format.h>

#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/json_depth.h"
#include "measure/peaks.h"

namespace xo {
namespace {

// nlohmann's get<int> of a number outside int's range is a float-to-int or narrowing cast
// (undefined behaviour for a float), so an integer field is checked before it is converted.
template <typename Int>
Int integer_field(const nlohmann::json& entry, const char* key) {
  const nlohmann::json& v = entry.at(key);
  const bool fits =
      v.is_number_unsigned()
          ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max())
          : v.is_number_integer() && v.get<int64_t>() >= std::numeric_limits<Int>::min() &&
                v.get<int64_t>() <= std::numeric_limits<Int>::max();
  if (!fits) {
    throw UserError(fmt::format("peaks cache entry: {}: expected an integer from {} to {}", key,
                                std::numeric_limits<Int>::min(), std::numeric_limits<Int>::max()));
  }
  return static_cast<Int>(v.get<int64_t>());
}

}  // namespace

nlohmann::json to_json(const DevicePeaks& p) {
  return {{"device", p.device},
          {"name", p.name},
          {"threads", p.threads},
          {"matmul_gflops", p.matmul_gflops},
          {"matmul_n", p.matmul_n},
          {"bandwidth_gbs", p.bandwidth_gbs},
          {"step_overhead_us", p.step_overhead_us},
          {"layer_overhead_us", p.layer_overhead_us},
          {"probed", p.probed},
          {"cached", p.cached}};
}

DevicePeaks peaks_from_json(const nlohmann::json& e) {
  DevicePeaks p;
  p.device = e.at("device").get<std::string>();
  p.name = e.at("name").get<std::string>();
  p.threads = integer_field<int>(e, "threads");
  p.matmul_gflops = e.at("matmul_gflops").get<double>();
  p.matmul_n = integer_field<int64_t>(e, "matmul_n");
  p.bandwidth_gbs = e.at("bandwidth_gbs").get<double>();
  p.step_overhead_us = e.at("step_overhead_us").get<double>();
  p.layer_overhead_us = e.at("layer_overhead_us").get<double>();
  p.probed = e.at("probed").get<std::string>();
  p.cached = e.value("cached", false);
  return p;
}

nlohmann::json parse_peaks_cache(const std::string& text, const std::string& origin) {
  check_json_depth(text, origin);
  nlohmann::json cache = nlohmann::json::parse(text, nullptr, false);
  if (cache.is_discarded()) throw UserError(fmt::format("{}: not valid JSON", origin));
  if (!cache.is_object()) {
    throw UserError(fmt::format("{}: not a JSON object (expected one entry per device)", origin));
  }
  return cache;
}

}  // namespace xo

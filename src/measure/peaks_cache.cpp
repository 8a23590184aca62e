// The peaks cache's JSON: an entry to and from DevicePeaks, and the cache file's text to its
// entries. Apart from peaks.cpp, which probes through a backend, so that the fuzz target links no
// backend.
#include <fmt/format.h>

#include "core/error.h"
#include "core/json_depth.h"
#include "measure/peaks.h"

namespace xo {

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
  p.threads = e.at("threads").get<int>();
  p.matmul_gflops = e.at("matmul_gflops").get<double>();
  p.matmul_n = e.at("matmul_n").get<int64_t>();
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

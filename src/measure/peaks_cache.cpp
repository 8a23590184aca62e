// The peaks cache's JSON: an entry to and from DevicePeaks, and the cache file's text to its
// entries. Apart from peaks.cpp, which probes through a backend, so that the fuzz target links no
// backend.
#include <fmt/format.h>

#include "core/error.h"
#include "core/json_depth.h"
#include "measure/peaks.h"

namespace xo {

nlohmann::json to_json(const DevicePeaks& p) {
  return fields_json(p, [](auto& io, auto& r) { peaks_fields(io, r, true); });
}

DevicePeaks peaks_from_json(const nlohmann::json& j, const std::string& origin) {
  const JsonSource source{origin, ReadMode::Strict};
  return read_fields<DevicePeaks>(JsonIn(j, "", source),
                                  [](auto& io, auto& r) { peaks_fields(io, r, true); });
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

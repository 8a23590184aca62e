// Where device profiles live: the ones crossover ships (data/profiles/, built into the binary) and
// this machine's, cached beside the peaks under the same key.
#include <fmt/format.h>
#include <unistd.h>

#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "core/json_depth.h"
#include "measure/profile.h"

namespace xo {

// Generated from data/profiles/ by crossover_pack_profiles (src/tools/pack_profiles.cpp), which
// read and checked each file when crossover was built.
std::vector<std::pair<std::string_view, std::string_view>> shipped_profile_packs();

std::vector<DeviceProfile> shipped_profiles() {
  // Built into the binary: unpacked once per process.
  static const std::vector<DeviceProfile> unpacked = [] {
    std::vector<DeviceProfile> out;
    for (const auto& [name, bytes] : shipped_profile_packs())
      out.push_back(unpack_profile(bytes, fmt::format("data/profiles/{}", name)));
    return out;
  }();
  return unpacked;
}

std::filesystem::path default_profile_cache() { return default_cache_dir() / "profiles.json"; }

namespace {

nlohmann::json read_cache(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return nlohmann::json::object();
  try {
    const std::string text = read_file(file);
    check_json_depth(text, file.string());
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object()) return j;
  } catch (const UserError&) {
  }
  return nlohmann::json::object();  // damaged: replaced by the next profile stored
}

}  // namespace

std::optional<DeviceProfile> cached_profile(const DeviceInfo& device,
                                            const std::filesystem::path& cache_file) {
  const nlohmann::json cache = read_cache(cache_file);
  const std::string key = peaks_cache_key(device);
  if (!cache.contains(key)) return std::nullopt;
  try {
    return profile_from_json(cache.at(key), cache_file.string());
  } catch (const UserError&) {
    return std::nullopt;  // an entry of an older layout: measured again when asked
  }
}

std::vector<DeviceProfile> cached_profiles_here(const std::filesystem::path& cache_file) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string prefix = std::string(host) + "|";
  const std::string suffix = std::string("|crossover ") + CROSSOVER_VERSION;
  std::vector<DeviceProfile> out;
  const nlohmann::json cache = read_cache(cache_file);
  for (const auto& [key, entry] : cache.items()) {
    if (key.rfind(prefix, 0) != 0 || key.size() < suffix.size() ||
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    try {
      out.push_back(profile_from_json(entry, cache_file.string()));
    } catch (const UserError&) {
      // an entry of an older layout: measured again when asked
    }
  }
  return out;
}

void store_profile(const DeviceInfo& device, const DeviceProfile& p,
                   const std::filesystem::path& cache_file) {
  nlohmann::json cache = read_cache(cache_file);
  cache[peaks_cache_key(device)] = to_json(p);
  replace_file_atomic(cache_file, cache.dump(1) + "\n");
}

}  // namespace xo

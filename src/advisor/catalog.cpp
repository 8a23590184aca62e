// Reading, validating, merging and overriding the hardware catalog (data/catalog.toml). It is read
// through io/toml.h, so every error names the file, the line and the dotted key of the field
// ("device.h100-sxm.price_usd") and says what was expected.
#include "advisor/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/file.h"
#include "io/toml.h"

namespace xo {
namespace {

constexpr std::string_view kSchema = "crossover.catalog/1";
constexpr std::string_view kSpotSuffix = ".spot";
constexpr size_t kSuggestions = 5;  // ids listed when an override names an unknown one
// Counts (cores, threads, GPUs, vCPUs) are ints: a larger value was cast to a wrong one
// (4294967296 GPUs read as 0).
constexpr int64_t kMaxCount = std::numeric_limits<int>::max();

// The kinds in the order of DeviceKind's values.
constexpr DeviceKind kKindValues[] = {DeviceKind::Gpu, DeviceKind::Cpu};
// NVIDIA's GPU architectures by name (compute capability 7.0, 7.5, 8.0/8.6, 8.9, 9.0, 10.0/12.0).
const std::vector<std::string_view> kArchitectures = {"volta", "turing", "ampere",
                                                      "ada",   "hopper", "blackwell"};
// A CPU's bf16 unit, as lscpu names its flag (AMX's amx_bf16 as "amx").
const std::vector<std::string_view> kBf16Units = {"amx", "avx512_bf16", "none", "unknown"};
const std::vector<std::string_view> kKinds = {device_kind_name(DeviceKind::Gpu),
                                              device_kind_name(DeviceKind::Cpu)};
const std::vector<std::string_view> kTopKeys = {"schema", "extends", "device", "instance"};
const std::vector<std::string_view> kDeviceKeys = {"id",
                                                   "kind",
                                                   "name",
                                                   "f32_tflops",
                                                   "tf32_tflops",
                                                   "bf16_tflops",
                                                   "memory_bandwidth_gbs",
                                                   "memory_gib",
                                                   "power_w",
                                                   "price_usd",
                                                   "cores",
                                                   "threads",
                                                   "sm_count",
                                                   "boost_clock_mhz",
                                                   "architecture",
                                                   "bf16_unit",
                                                   "source",
                                                   "date"};
const std::vector<std::string_view> kInstanceKeys = {"id",
                                                     "provider",
                                                     "name",
                                                     "device",
                                                     "device_count",
                                                     "interconnect",
                                                     "interconnect_gbs",
                                                     "network",
                                                     "network_gbit",
                                                     "vcpus",
                                                     "memory_gib",
                                                     "on_demand_usd_per_hour",
                                                     "spot_usd_per_hour",
                                                     "region",
                                                     "source",
                                                     "date"};

// The [[device]] or [[instance]] tables of the root, in file order (empty when absent). Each is
// named by its id where it has one ("device.h100-sxm", 'instance."aws-g5.xlarge"'), so that errors
// about keys read before the id name it too; by its index otherwise ("device[2]").
std::vector<TomlTable> entries(const TomlTable& root, std::string_view key) {
  std::vector<TomlTable> out;
  const TomlValue list = root.get(key);
  if (!list) return out;
  for (const TomlValue& item : list.list(fmt::format("[[{}]] tables (an array of tables)", key))) {
    const TomlTable t = item.table(fmt::format("a [[{}]] table", key));
    const TomlValue id = t.get("id");
    if (id.is_string() && !id.string().empty()) {
      out.push_back(t.renamed(toml_path(key, id.string())));
    } else {
      out.push_back(t);
    }
  }
  return out;
}

// Rejects a second entry with an id already seen in the same table; `seen` maps ids to lines.
void check_unique(const TomlTable& t, const std::string& id, std::string_view table,
                  std::map<std::string, int>& seen) {
  const TomlValue key = t.get("id");
  const auto [it, inserted] = seen.emplace(id, key.line());
  if (!inserted) {
    key.fail(fmt::format("\"{}\" is already the id of the {} on line {}", id, table, it->second));
  }
}

// A CPU's bf16 unit and its rate go together: a unit without a rate, or a rate of "none" or
// "unknown", is refused. An entry without bf16_unit is "unknown" (its rate is then not used).
void read_bf16_unit(const TomlTable& t, CatalogDevice& d) {
  const TomlValue unit = t.get("bf16_unit");
  if (d.kind != DeviceKind::Cpu) {
    if (unit)
      unit.fail("for CPUs only (amx, avx512_bf16, none or unknown); leave it out for a GPU");
    return;
  }
  if (!unit) {
    d.bf16_unit = "unknown";
    return;
  }
  d.bf16_unit = std::string(kBf16Units[unit.choice("bf16 unit", kBf16Units)]);
  const bool has_unit = d.bf16_unit == "amx" || d.bf16_unit == "avx512_bf16";
  if (has_unit && d.bf16_tflops <= 0) {
    unit.fail(
        fmt::format("\"{}\" needs bf16_tflops too (the unit's dense bf16 peak, > 0)", d.bf16_unit));
  }
  if (!has_unit && d.bf16_tflops > 0) {
    t.get("bf16_tflops")
        .fail(fmt::format("{} TFLOP/s with bf16_unit = \"{}\": a bf16 rate needs its unit (amx or "
                          "avx512_bf16); set it to 0 or name the unit",
                          d.bf16_tflops, d.bf16_unit));
  }
}

CatalogDevice read_device(const TomlTable& t) {
  t.only_keys(kDeviceKeys);
  CatalogDevice d;
  d.id = t.get("id").non_empty_string();
  d.kind = kKindValues[t.get("kind").choice("kind", kKinds)];
  const bool cpu = d.kind == DeviceKind::Cpu;
  d.name = t.get("name").non_empty_string();
  d.f32_tflops = t.get("f32_tflops").number(kPositive);
  if (const TomlValue v = t.get("tf32_tflops")) d.tf32_tflops = v.number(kNonNegative);
  if (const TomlValue v = t.get("bf16_tflops")) d.bf16_tflops = v.number(kNonNegative);
  d.memory_bandwidth_gbs = t.get("memory_bandwidth_gbs").number(kPositive);
  d.memory_gib = t.get("memory_gib").number(kNonNegative);
  d.power_w = t.get("power_w").number(kPositive);
  d.price_usd = t.get("price_usd").number(kNonNegative);
  // Cores and threads describe CPUs only: a GPU's would be read as a CPU's by the advisor.
  const TomlValue cores = t.get("cores");
  const TomlValue threads = t.get("threads");
  if (cpu) {
    d.cores = static_cast<int>(cores.integer_in(1, kMaxCount));
    const int64_t n = threads.integer();
    if (n < d.cores) threads.fail(fmt::format("{} must be >= cores ({})", n, d.cores));
    d.threads = static_cast<int>(threads.integer_in(d.cores, kMaxCount));
  } else if (cores) {
    cores.fail("for CPUs only (physical cores); leave it out for a GPU");
  } else if (threads) {
    threads.fail("for CPUs only; leave it out for a GPU");
  }
  const TomlValue sms = t.get("sm_count");
  const TomlValue clock = t.get("boost_clock_mhz");
  if (cpu && (sms || clock)) {
    (sms ? sms : clock)
        .fail("for GPUs only (multiprocessors and boost clock); leave it out for a CPU");
  }
  if (sms) d.sm_count = static_cast<int>(sms.integer_in(1, kMaxCount));
  if (clock) d.boost_clock_mhz = clock.number(kPositive);
  if (const TomlValue arch = t.get("architecture")) {
    if (cpu) arch.fail("for GPUs only (volta, turing, ampere, ada, hopper, blackwell)");
    d.architecture = std::string(kArchitectures[arch.choice("architecture", kArchitectures)]);
  }
  read_bf16_unit(t, d);
  d.source = t.get("source").non_empty_string();
  d.date = t.get("date").date();
  return d;
}

// A link's name (`key`) and its rate (`key`_gbs or _gbit), which go together.
void read_link(const TomlTable& t, const std::string& key, std::string& name, double& rate,
               std::string_view rate_is, std::string_view example) {
  const std::string rate_key = key + (key == "network" ? "_gbit" : "_gbs");
  if (const TomlValue v = t.get(key)) name = v.non_empty_string();
  if (const TomlValue v = t.get(rate_key)) rate = v.number(kPositive);
  if (!name.empty() && rate == 0) {
    t.get(key).fail(fmt::format("needs {} too ({})", rate_key, rate_is));
  }
  if (name.empty() && rate > 0) {
    t.get(rate_key).fail(fmt::format("needs {} too (the link's name: {})", key, example));
  }
}

CatalogInstance read_instance(const TomlTable& t) {
  t.only_keys(kInstanceKeys);
  CatalogInstance in;
  in.id = t.get("id").non_empty_string();
  in.provider = t.get("provider").non_empty_string();
  in.name = t.get("name").non_empty_string();
  in.device = t.get("device").non_empty_string();
  in.device_count = static_cast<int>(t.get("device_count").integer_in(1, kMaxCount));
  read_link(t, "interconnect", in.interconnect, in.interconnect_gbs,
            "its GB/s per device and direction", "\"NVLink 4\"");
  read_link(t, "network", in.network, in.network_gbit,
            "its Gbit/s per direction, the whole instance's", "\"EFA\"");
  in.vcpus = static_cast<int>(t.get("vcpus").integer_in(1, kMaxCount));
  in.memory_gib = t.get("memory_gib").number(kPositive);
  in.on_demand_usd_per_hour = t.get("on_demand_usd_per_hour").number(kPositive);
  if (const TomlValue v = t.get("spot_usd_per_hour")) in.spot_usd_per_hour = v.number(kPositive);
  in.region = t.get("region").non_empty_string();
  in.source = t.get("source").non_empty_string();
  in.date = t.get("date").date();
  return in;
}

// "\"gpu-z\" is not a device in the catalog (known devices: ...)": what an instance whose device
// is missing is told.
std::string missing_device(const Catalog& catalog, const CatalogInstance& in) {
  std::vector<std::string> ids;
  for (const CatalogDevice& d : catalog.devices) ids.push_back(d.id);
  return fmt::format("\"{}\" is not a device in the catalog (known devices: {})", in.device,
                     fmt::join(ids, ", "));
}

// Edit distance, to suggest the ids closest to a mistyped one.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_ids(const Catalog& catalog, std::string_view key) {
  std::vector<std::pair<size_t, std::string>> ranked;
  for (const auto& d : catalog.devices) ranked.emplace_back(edit_distance(key, d.id), d.id);
  for (const auto& in : catalog.instances) ranked.emplace_back(edit_distance(key, in.id), in.id);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> ids;
  for (size_t i = 0; i < ranked.size() && i < kSuggestions; ++i) ids.push_back(ranked[i].second);
  return fmt::format("{}", fmt::join(ids, ", "));
}

}  // namespace

bool runs_bf16(const CatalogDevice& d) {
  return d.kind == DeviceKind::Cpu && (d.bf16_unit == "amx" || d.bf16_unit == "avx512_bf16") &&
         d.bf16_tflops > 0;
}

const CatalogDevice* Catalog::find_device(const std::string& id) const {
  for (const CatalogDevice& d : devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

const CatalogInstance* Catalog::find_instance(const std::string& id) const {
  for (const CatalogInstance& in : instances) {
    if (in.id == id) return &in;
  }
  return nullptr;
}

Catalog load_catalog(const std::filesystem::path& file) {
  const std::string origin = file.string();
  std::string text;
  try {
    text = read_file(file);
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("{}: cannot read the hardware catalog ({}; expected a catalog TOML file like "
                    "data/catalog.toml)",
                    origin, e.what()));
  }
  return parse_catalog(text, origin);
}

Catalog parse_catalog(const std::string& text, const std::string& origin) {
  const TomlDocument doc(text, origin);
  const TomlTable root = doc.root();
  root.only_keys(kTopKeys);
  const TomlValue schema = root.get("schema");
  if (!schema.is_string() || schema.string() != kSchema) schema.expected(toml_string(kSchema));
  bool extends = false;
  if (const TomlValue v = root.get("extends")) extends = v.boolean();

  Catalog catalog;
  catalog.origins.push_back(origin);
  std::map<std::string, int> seen;
  for (const TomlTable& t : entries(root, "device")) {
    catalog.devices.push_back(read_device(t));
    check_unique(t, catalog.devices.back().id, "device", seen);
  }
  seen.clear();
  for (const TomlTable& t : entries(root, "instance")) {
    catalog.instances.push_back(read_instance(t));
    const CatalogInstance& in = catalog.instances.back();
    check_unique(t, in.id, "instance", seen);
    // An overlay (extends = true) may name the devices of the catalog it extends: merge_catalogs
    // checks its references instead.
    if (!extends && !catalog.find_device(in.device)) {
      t.get("device").fail(
          missing_device(catalog, in) +
          "; a file that adds to another catalog says `extends = true` at the top");
    }
  }
  return catalog;
}

Catalog merge_catalogs(Catalog base, const Catalog& overlay) {
  // from_overlay[i]: instance i came from the overlay, so an error about it blames that file.
  std::vector<bool> from_overlay(base.instances.size(), false);
  auto merge = [](auto& into, const auto& from, std::vector<bool>* replaced) {
    for (const auto& item : from) {
      auto it = std::find_if(into.begin(), into.end(),
                             [&](const auto& existing) { return existing.id == item.id; });
      if (it != into.end()) {
        *it = item;
        if (replaced) (*replaced)[static_cast<size_t>(it - into.begin())] = true;
      } else {
        into.push_back(item);
        if (replaced) replaced->push_back(true);
      }
    }
  };
  merge(base.devices, overlay.devices, nullptr);
  merge(base.instances, overlay.instances, &from_overlay);
  const std::vector<std::string> base_origins = base.origins;
  base.origins.insert(base.origins.end(), overlay.origins.begin(), overlay.origins.end());
  for (size_t i = 0; i < base.instances.size(); ++i) {
    const CatalogInstance& in = base.instances[i];
    if (!base.find_device(in.device)) {
      // The entry's line is not kept once read: the message names its file(s) and key.
      fail_at(fmt::format("{}", fmt::join(from_overlay[i] ? overlay.origins : base_origins, ", ")),
              kNoLine, toml_path(toml_path("instance", in.id), "device"), missing_device(base, in));
    }
  }
  return base;
}

void apply_price_override(Catalog& catalog, const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw UserError(
        fmt::format("--price '{}': expected ID=USD (an instance's on-demand hourly price or a "
                    "device's purchase "
                    "price) or ID.spot=USD (an instance's spot hourly price)",
                    text));
  }
  std::string id = text.substr(0, eq);
  const std::string number = text.substr(eq + 1);
  double usd = 0;
  const char* first = number.data();
  const char* last = first + number.size();
  const auto [end, ec] = std::from_chars(first, last, usd);
  if (number.empty() || ec != std::errc() || end != last || !std::isfinite(usd)) {
    throw UserError(fmt::format("--price '{}': '{}' is not a number of US dollars", text, number));
  }
  if (usd < 0) {
    throw UserError(fmt::format("--price '{}': a price must be >= 0, got {}", text, usd));
  }

  const bool spot = id.size() > kSpotSuffix.size() && id.ends_with(kSpotSuffix);
  if (spot) id.resize(id.size() - kSpotSuffix.size());
  CatalogInstance* instance = nullptr;
  for (auto& in : catalog.instances) {
    if (in.id == id) instance = &in;
  }
  CatalogDevice* device = nullptr;
  for (auto& d : catalog.devices) {
    if (d.id == id) device = &d;
  }
  if (spot && !instance) {
    throw UserError(fmt::format("--price '{}': '{}' is not an instance id (closest: {})", text, id,
                                closest_ids(catalog, id)));
  }
  if (!instance && !device) {
    throw UserError(fmt::format("--price '{}': '{}' is not a device or instance id (closest: {})",
                                text, id, closest_ids(catalog, id)));
  }
  if (instance && device && !spot) {
    throw UserError(fmt::format(
        "--price '{}': '{}' is both a device and an instance id; rename one in your catalog", text,
        id));
  }
  if (instance) {
    // Hourly prices of 0 would make renting free: the catalog itself requires them > 0.
    if (!(usd > 0)) {
      throw UserError(fmt::format("--price '{}': an hourly price must be > 0, got {}", text, usd));
    }
    if (spot) {
      instance->spot_usd_per_hour = usd;
    } else {
      instance->on_demand_usd_per_hour = usd;
    }
  } else {
    device->price_usd = usd;  // 0 is allowed: "not sold separately"
  }
}

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool same_model(const CatalogDevice& d, const DeviceInfo& local) {
  if (d.kind != local.kind) return false;
  const std::string name = lower(d.name), here = lower(local.name);
  size_t start = 0;
  while (start < name.size()) {
    const size_t end = std::min(name.find(' ', start), name.size());
    const std::string word = name.substr(start, end - start);
    if (word.find_first_of("0123456789") != std::string::npos) {
      // As a whole word of the local name.
      for (size_t at = here.find(word); at != std::string::npos; at = here.find(word, at + 1)) {
        const bool left = at == 0 || here[at - 1] == ' ';
        const bool right = at + word.size() == here.size() || here[at + word.size()] == ' ';
        if (left && right) return true;
      }
      return false;
    }
    start = end + 1;
  }
  return false;
}

}  // namespace xo

// Reading, validating, merging and overriding the hardware catalog (data/catalog.toml). Every error
// names the file, the entry (table, id and index) and the field, and says what was expected.
#include "advisor/catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace xo {
namespace {

constexpr std::string_view kSchema = "crossover.catalog/1";
constexpr std::string_view kSpotSuffix = ".spot";
constexpr size_t kSuggestions = 5;  // ids listed when an override names an unknown one

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
                                                   "source",
                                                   "date"};
const std::vector<std::string_view> kInstanceKeys = {"id",
                                                     "provider",
                                                     "name",
                                                     "device",
                                                     "device_count",
                                                     "vcpus",
                                                     "memory_gib",
                                                     "on_demand_usd_per_hour",
                                                     "spot_usd_per_hour",
                                                     "region",
                                                     "source",
                                                     "date"};

// One [[device]] or [[instance]] table being read: everything an error message needs to name it.
class Entry {
 public:
  // The id, when it is a string, names the entry in every message, even those about keys read
  // before it.
  Entry(std::string origin, std::string_view table, size_t index, const toml::table& t)
      : origin_(std::move(origin)), table_(table), index_(index), t_(t) {
    if (const auto* id = t.get_as<std::string>("id")) id_ = id->get();
  }

  // `device "h100-sxm" (entry 3)`, or `device entry 3` before the id is known.
  std::string label() const {
    if (id_.empty()) return fmt::format("{} entry {}", table_, index_);
    return fmt::format("{} \"{}\" (entry {})", table_, id_, index_);
  }

  // "FILE: device "h100-sxm" (entry 3): field 'price_usd' must be >= 0, got -5 (line 12)"
  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    const toml::node* n = t_.get(key);
    const auto line = n ? n->source().begin.line : t_.source().begin.line;
    throw UserError(
        fmt::format("{}: {}: field '{}' {} (line {})", origin_, label(), key, what, line));
  }

  void only_keys(const std::vector<std::string_view>& allowed) const {
    const toml::key* first =
        nullptr;  // toml++ iterates alphabetically; report the first in the file
    for (auto&& [key, value] : t_) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      if (!first || key.source().begin < first->source().begin) first = &key;
    }
    if (first)
      fail(first->str(),
           fmt::format("is not a known key (expected one of: {})", fmt::join(allowed, ", ")));
  }

  std::string string(std::string_view key) const {
    const toml::node* n = t_.get(key);
    if (!n) fail(key, "is missing (expected a non-empty string)");
    const auto* s = n->as_string();
    if (!s) fail(key, fmt::format("must be a string, got {}", describe(*n)));
    if (s->get().empty()) fail(key, "must not be empty");
    return s->get();
  }

  std::string id() {
    id_ = string("id");
    return id_;
  }

  // A float field; integers are accepted ("price_usd = 1599"). Absent optional fields read as
  // nullopt.
  std::optional<double> number(std::string_view key, bool required) const {
    const toml::node* n = t_.get(key);
    if (!n) {
      if (required) fail(key, "is missing (expected a number)");
      return std::nullopt;
    }
    double v = 0;
    if (const auto* i = n->as_integer()) {
      v = static_cast<double>(i->get());
    } else if (const auto* f = n->as_floating_point()) {
      v = f->get();
    } else {
      fail(key, fmt::format("must be a number, got {}", describe(*n)));
    }
    if (!std::isfinite(v)) fail(key, fmt::format("must be a finite number, got {}", v));
    return v;
  }

  double positive(std::string_view key) const {
    const double v = *number(key, true);
    if (!(v > 0)) fail(key, fmt::format("must be > 0, got {}", v));
    return v;
  }

  double non_negative(std::string_view key, bool required) const {
    const double v = number(key, required).value_or(0);
    if (v < 0) fail(key, fmt::format("must be >= 0, got {}", v));
    return v;
  }

  std::optional<int64_t> integer(std::string_view key, bool required) const {
    const toml::node* n = t_.get(key);
    if (!n) {
      if (required) fail(key, "is missing (expected an integer)");
      return std::nullopt;
    }
    const auto* i = n->as_integer();
    if (!i) fail(key, fmt::format("must be an integer, got {}", describe(*n)));
    return i->get();
  }

  // YYYY-MM-DD, written as a string or as a bare TOML date.
  std::string date(std::string_view key) const {
    const toml::node* n = t_.get(key);
    if (n && n->is_date()) {
      const toml::date d = n->as_date()->get();
      return fmt::format("{:04}-{:02}-{:02}", d.year, d.month, d.day);
    }
    const std::string text = string(key);
    if (!valid_date(text)) {
      fail(key,
           fmt::format("must be a date YYYY-MM-DD with a valid month and day, got \"{}\"", text));
    }
    return text;
  }

  const toml::table& table() const { return t_; }

 private:
  static std::string describe(const toml::node& n) {
    switch (n.type()) {
      case toml::node_type::table:
        return "a table";
      case toml::node_type::array:
        return "an array";
      case toml::node_type::string:
        return fmt::format("the string \"{}\"", n.as_string()->get());
      case toml::node_type::integer:
        return fmt::format("the integer {}", n.as_integer()->get());
      case toml::node_type::floating_point:
        return fmt::format("the number {}", n.as_floating_point()->get());
      case toml::node_type::boolean:
        return n.as_boolean()->get() ? "true" : "false";
      default:
        return "a date or time";
    }
  }

  static bool valid_date(std::string_view s) {
    constexpr size_t kLength = 10;  // YYYY-MM-DD
    if (s.size() != kLength || s[4] != '-' || s[7] != '-') return false;
    auto digits = [&](size_t from, size_t count, int& out) {
      const char* first = s.data() + from;
      const auto [end, ec] = std::from_chars(first, first + count, out);
      return ec == std::errc() && end == first + count &&
             std::all_of(first, first + count, [](char c) { return c >= '0' && c <= '9'; });
    };
    int year = 0, month = 0, day = 0;
    if (!digits(0, 4, year) || !digits(5, 2, month) || !digits(8, 2, day)) return false;
    constexpr int kMonths = 12;
    if (month < 1 || month > kMonths) return false;
    constexpr int kDays[kMonths] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    const int last = kDays[month - 1] + (month == 2 && leap ? 1 : 0);
    return day >= 1 && day <= last;
  }

  std::string origin_;
  std::string_view table_;
  size_t index_;  // 1-based, in file order
  const toml::table& t_;
  std::string id_;
};

CatalogDevice read_device(Entry& e) {
  e.only_keys(kDeviceKeys);
  CatalogDevice d;
  d.id = e.id();
  d.kind = e.string("kind");
  if (d.kind != "gpu" && d.kind != "cpu") {
    e.fail("kind", fmt::format("must be \"gpu\" or \"cpu\", got \"{}\"", d.kind));
  }
  d.name = e.string("name");
  d.f32_tflops = e.positive("f32_tflops");
  d.tf32_tflops = e.non_negative("tf32_tflops", false);
  d.bf16_tflops = e.non_negative("bf16_tflops", false);
  d.memory_bandwidth_gbs = e.positive("memory_bandwidth_gbs");
  d.memory_gib = e.non_negative("memory_gib", true);
  d.power_w = e.positive("power_w");
  d.price_usd = e.non_negative("price_usd", true);
  const auto cores = e.integer("cores", d.kind == "cpu");
  if (d.kind == "cpu" && *cores < 1) e.fail("cores", fmt::format("must be >= 1, got {}", *cores));
  if (d.kind == "gpu" && cores) {
    e.fail("cores", "is for CPUs only (physical cores); leave it out for a GPU");
  }
  d.cores = static_cast<int>(cores.value_or(0));
  const auto threads = e.integer("threads", d.kind == "cpu");
  if (d.kind == "cpu" && *threads < *cores) {
    e.fail("threads", fmt::format("must be >= cores ({}), got {}", *cores, *threads));
  }
  if (d.kind == "gpu" && threads) e.fail("threads", "is for CPUs only; leave it out for a GPU");
  d.threads = static_cast<int>(threads.value_or(0));
  d.source = e.string("source");
  d.date = e.date("date");
  return d;
}

CatalogInstance read_instance(Entry& e) {
  e.only_keys(kInstanceKeys);
  CatalogInstance in;
  in.id = e.id();
  in.provider = e.string("provider");
  in.name = e.string("name");
  in.device = e.string("device");
  const int64_t count = *e.integer("device_count", true);
  if (count < 1) e.fail("device_count", fmt::format("must be >= 1, got {}", count));
  in.device_count = static_cast<int>(count);
  const int64_t vcpus = *e.integer("vcpus", true);
  if (vcpus < 1) e.fail("vcpus", fmt::format("must be >= 1, got {}", vcpus));
  in.vcpus = static_cast<int>(vcpus);
  in.memory_gib = e.positive("memory_gib");
  in.on_demand_usd_per_hour = e.positive("on_demand_usd_per_hour");
  if (e.number("spot_usd_per_hour", false)) in.spot_usd_per_hour = e.positive("spot_usd_per_hour");
  in.region = e.string("region");
  in.source = e.string("source");
  in.date = e.date("date");
  return in;
}

// The [[device]] or [[instance]] tables of the root, in file order (empty when absent).
std::vector<const toml::table*> entries(const toml::table& root, std::string_view key,
                                        const std::string& origin) {
  std::vector<const toml::table*> out;
  const toml::node* n = root.get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) {
    throw UserError(fmt::format("{}:{}: '{}' must be written as [[{}]] tables (an array of tables)",
                                origin, n->source().begin.line, key, key));
  }
  for (const toml::node& item : *a) {
    const toml::table* t = item.as_table();
    if (!t) {
      throw UserError(fmt::format("{}:{}: every '{}' entry must be a table ([[{}]])", origin,
                                  item.source().begin.line, key, key));
    }
    out.push_back(t);
  }
  return out;
}

// Rejects a second entry with an id already seen in the same table.
template <typename T>
void check_unique(const std::vector<T>& items, std::string_view table, const std::string& origin) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto [it, inserted] = seen.emplace(items[i].id, i + 1);
    if (!inserted) {
      throw UserError(fmt::format("{}: {} \"{}\" (entry {}): field 'id' duplicates entry {}",
                                  origin, table, items[i].id, i + 1, it->second));
    }
  }
}

// An instance whose device is not in `catalog`; `blamed` names the file(s) it came from.
// `hint` ends the message (empty or starting with a space).
[[noreturn]] void missing_device(const Catalog& catalog, const CatalogInstance& in,
                                 const std::vector<std::string>& blamed, std::string_view hint) {
  std::vector<std::string> ids;
  for (const CatalogDevice& d : catalog.devices) ids.push_back(d.id);
  throw UserError(fmt::format(
      "{}: instance \"{}\": field 'device' names \"{}\", which is not a device in the catalog "
      "(known devices: {}){}",
      fmt::join(blamed, ", "), in.id, in.device, fmt::join(ids, ", "), hint));
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

std::filesystem::path default_catalog_path() {
  if (const char* env = std::getenv("CROSSOVER_CATALOG"); env && *env) return env;
#if defined(CROSSOVER_DATA_DIR)
  return std::filesystem::path(CROSSOVER_DATA_DIR) / "catalog.toml";
#elif defined(CROSSOVER_SOURCE_ROOT)
  return std::filesystem::path(CROSSOVER_SOURCE_ROOT) / "data" / "catalog.toml";
#else
  return std::filesystem::path("data") / "catalog.toml";
#endif
}

Catalog load_catalog(const std::filesystem::path& file) {
  const std::string origin = file.string();
  std::ifstream stream(file, std::ios::binary);
  if (!stream) {
    throw UserError(fmt::format(
        "{}: cannot read the hardware catalog (no such file, or not readable); pass --catalog "
        "FILE or set CROSSOVER_CATALOG",
        origin));
  }
  std::ostringstream text;
  text << stream.rdbuf();

  toml::table root;
  try {
    root = toml::parse(text.str(), origin);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("{}:{}:{}: TOML syntax error: {}", origin, e.source().begin.line,
                                e.source().begin.column, e.description()));
  }

  for (auto&& [key, value] : root) {
    if (std::find(kTopKeys.begin(), kTopKeys.end(), key.str()) == kTopKeys.end()) {
      throw UserError(fmt::format("{}:{}: unknown top-level key '{}' (expected one of: {})", origin,
                                  key.source().begin.line, key.str(), fmt::join(kTopKeys, ", ")));
    }
  }
  const toml::node* schema = root.get("schema");
  if (!schema || !schema->is_string() || schema->as_string()->get() != kSchema) {
    throw UserError(fmt::format("{}: top-level 'schema' must be \"{}\", got {}", origin, kSchema,
                                !schema ? std::string("nothing (the key is missing)")
                                : schema->is_string()
                                    ? fmt::format("\"{}\"", schema->as_string()->get())
                                    : std::string("a value that is not a string")));
  }
  bool extends = false;
  if (const toml::node* n = root.get("extends")) {
    if (!n->is_boolean()) {
      throw UserError(fmt::format("{}:{}: top-level 'extends' must be true or false", origin,
                                  n->source().begin.line));
    }
    extends = n->as_boolean()->get();
  }

  Catalog catalog;
  catalog.origins.push_back(origin);
  const auto devices = entries(root, "device", origin);
  for (size_t i = 0; i < devices.size(); ++i) {
    Entry e(origin, "device", i + 1, *devices[i]);
    catalog.devices.push_back(read_device(e));
  }
  const auto instances = entries(root, "instance", origin);
  for (size_t i = 0; i < instances.size(); ++i) {
    Entry e(origin, "instance", i + 1, *instances[i]);
    catalog.instances.push_back(read_instance(e));
  }
  check_unique(catalog.devices, "device", origin);
  check_unique(catalog.instances, "instance", origin);
  if (!extends) {
    for (const CatalogInstance& in : catalog.instances) {
      if (!catalog.find_device(in.device)) {
        missing_device(catalog, in, catalog.origins,
                       "; a file that adds to another catalog says `extends = true` at the top");
      }
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
    if (!base.find_device(base.instances[i].device)) {
      missing_device(base, base.instances[i], from_overlay[i] ? overlay.origins : base_origins, "");
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

}  // namespace xo

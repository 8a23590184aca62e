// The hardware catalog: the shipped file loads and is complete, every kind of bad entry is named
// (file, entry, field, expectation), overlays merge by id, and --price overrides apply or say why
// not.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "advisor/catalog.h"
#include "core/error.h"
#include "core/file.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using testing::expect_user_error;

const fs::path kShipped = fs::path(CROSSOVER_SOURCE_DIR) / "data" / "catalog.toml";

// A catalog file in a temporary folder of its own, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& text) { std::ofstream(path_) << text; }
  const fs::path& path() const { return path_; }
  std::string name() const { return path_.string(); }

 private:
  const testing::TempDir dir_{"xo_catalog"};
  const fs::path path_ = dir_ / "catalog.toml";
};

const std::string kHeader = "schema = \"crossover.catalog/1\"\n";

// One valid [[device]]; `replace` swaps the line starting with its key (or drops it when the
// replacement is empty), `extra` adds lines.
std::string device(const std::string& id,
                   const std::vector<std::pair<std::string, std::string>>& replace = {},
                   const std::string& extra = "") {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"id", "\"" + id + "\""}, {"kind", "\"gpu\""},       {"name", "\"Test GPU\""},
      {"f32_tflops", "10"},     {"tf32_tflops", "40.5"},   {"memory_bandwidth_gbs", "500"},
      {"memory_gib", "16"},     {"power_w", "250"},        {"price_usd", "1000"},
      {"source", "\"a test\""}, {"date", "\"2024-01-31\""}};
  std::string out = "[[device]]\n";
  for (auto& [key, value] : fields) {
    for (const auto& [rkey, rvalue] : replace) {
      if (rkey == key) value = rvalue;
    }
    if (!value.empty()) out += key + " = " + value + "\n";
  }
  return out + extra;
}

std::string instance(const std::string& id, const std::string& device_id,
                     const std::vector<std::pair<std::string, std::string>>& replace = {}) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"id", "\"" + id + "\""},  {"provider", "\"Cloud\""},
      {"name", "\"box.small\""}, {"device", "\"" + device_id + "\""},
      {"device_count", "1"},     {"vcpus", "4"},
      {"memory_gib", "16"},      {"on_demand_usd_per_hour", "1.25"},
      {"region", "\"north-1\""}, {"source", "\"a test\""},
      {"date", "\"2024-02-29\""}};  // a leap day: valid
  std::string out = "[[instance]]\n";
  for (auto& [key, value] : fields) {
    for (const auto& [rkey, rvalue] : replace) {
      if (rkey == key) value = rvalue;
    }
    if (!value.empty()) out += key + " = " + value + "\n";
  }
  // Optional keys the defaults leave out.
  for (const auto& [rkey, rvalue] : replace) {
    bool known = false;
    for (const auto& [key, value] : fields) known |= key == rkey;
    if (!known) out += rkey + " = " + rvalue + "\n";
  }
  return out;
}

// --- The shipped catalog -------------------------------------------------------------------------

TEST(CatalogShipped, LoadsAndCoversGpusCpusAndInstances) {
  const Catalog c = load_catalog(kShipped);
  int gpus = 0, cpus = 0;
  for (const CatalogDevice& d : c.devices) {
    (d.kind == DeviceKind::Gpu ? gpus : cpus) += 1;
    EXPECT_FALSE(d.source.empty()) << d.id;
    EXPECT_EQ(d.date.size(), 10u) << d.id;
    if (d.kind == DeviceKind::Cpu) {
      EXPECT_GE(d.cores, 1) << d.id;
      // Every shipped CPU says which bf16 unit it has (none included), not "unknown".
      EXPECT_NE(d.bf16_unit, "unknown") << d.id;
      EXPECT_EQ(runs_bf16(d), d.bf16_tflops > 0) << d.id;
    } else {
      EXPECT_EQ(d.bf16_unit, "") << d.id;
    }
    // Datasheets print tensor rates "with sparsity", twice the dense rate; the catalog holds dense
    // rates. The densest dense ratio shipped is the A100's 312 / 19.5 = 16, so a sparse figure
    // (32x on A100, ~30x on H100) would fail this.
    EXPECT_LE(d.bf16_tflops, 16 * d.f32_tflops) << d.id << ": a sparsity figure?";
    // Every GPU carries what moves a profile's latency-bound kernels to it.
    if (d.kind == DeviceKind::Gpu) {
      EXPECT_GT(d.sm_count, 0) << d.id;
      EXPECT_GT(d.boost_clock_mhz, 500) << d.id;
      EXPECT_FALSE(d.architecture.empty()) << d.id << ": whose validation rows may it quote?";
    }
  }
  EXPECT_GE(gpus, 10);
  EXPECT_GE(cpus, 4);
  EXPECT_GE(c.instances.size(), 12u);
  for (const CatalogInstance& in : c.instances) {
    EXPECT_NE(c.find_device(in.device), nullptr) << in.id << " -> " << in.device;
    EXPECT_FALSE(in.source.empty()) << in.id;
    EXPECT_EQ(in.date.size(), 10u) << in.id;
    EXPECT_GT(in.on_demand_usd_per_hour, 0) << in.id;
  }
  ASSERT_EQ(c.origins.size(), 1u);
  EXPECT_EQ(c.origins[0], kShipped.string());
}

TEST(CatalogShipped, HasTheEntriesTheAdvisorNames) {
  const Catalog c = load_catalog(kShipped);
  for (const char* id : {"h100-sxm", "a100-sxm4-40gb", "rtx-4090", "epyc-9654", "t4", "l4"}) {
    EXPECT_NE(c.find_device(id), nullptr) << id;
  }
  for (const char* id :
       {"aws-g5.xlarge", "aws-p5.48xlarge", "gcp-g2-standard-4", "aws-c7i.large"}) {
    EXPECT_NE(c.find_instance(id), nullptr) << id;
  }
  EXPECT_EQ(c.find_device("aws-g5.xlarge"), nullptr);  // instances and devices are apart
  const CatalogInstance* p5 = c.find_instance("aws-p5.48xlarge");
  ASSERT_NE(p5, nullptr);
  EXPECT_EQ(p5->device_count, 8);
}

// The environment variable for the scope of a test, restored after.
class CatalogVariable {
 public:
  explicit CatalogVariable(const std::string& value) {
    if (const char* old = std::getenv("CROSSOVER_CATALOG")) saved_ = old;
    ::setenv("CROSSOVER_CATALOG", value.c_str(), 1);
  }
  ~CatalogVariable() {
    if (saved_) {
      ::setenv("CROSSOVER_CATALOG", saved_->c_str(), 1);
    } else {
      ::unsetenv("CROSSOVER_CATALOG");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(ShippedCatalog, TheBinaryCarriesTheFileItWasBuiltFrom) {
  EXPECT_EQ(std::string(shipped_catalog_text()), xo::read_file(kShipped));
  const CatalogVariable unset("");  // empty counts as unset
  const Catalog built_in = shipped_catalog();
  const Catalog from_file = load_catalog(kShipped);
  EXPECT_EQ(built_in.devices.size(), from_file.devices.size());
  EXPECT_EQ(built_in.instances.size(), from_file.instances.size());
  ASSERT_EQ(built_in.origins.size(), 1u);
  EXPECT_EQ(built_in.origins[0], kShippedCatalogOrigin);
}

TEST(ShippedCatalog, TheEnvironmentNamesAFileThatReplacesIt) {
  const testing::TempDir dir("catalog-env");
  const fs::path file = dir / "mine.toml";
  std::ofstream(file) << xo::read_file(kShipped);
  {
    const CatalogVariable set(file.string());
    const Catalog c = shipped_catalog();
    ASSERT_EQ(c.origins.size(), 1u);
    EXPECT_EQ(c.origins[0], file.string());
  }
  const CatalogVariable missing((dir / "absent.toml").string());
  testing::expect_user_error(
      [] { shipped_catalog(); },
      {"CROSSOVER_CATALOG=", "absent.toml: no such file", "unset it to use the built-in catalog"});
}

// --- Good files ----------------------------------------------------------------------------------

TEST(CatalogLoad, ReadsEveryField) {
  TempFile f(kHeader + device("gpu-a") +
             device("cpu-a", {{"kind", "\"cpu\""}, {"tf32_tflops", ""}, {"date", "2023-12-01"}},
                    "cores = 16\nthreads = 32\n") +
             instance("cloud-a", "gpu-a", {{"on_demand_usd_per_hour", "2"}}) +
             "spot_usd_per_hour = 0.75\n");
  const Catalog c = load_catalog(f.path());
  ASSERT_EQ(c.devices.size(), 2u);
  const CatalogDevice& g = c.devices[0];
  EXPECT_EQ(g.id, "gpu-a");
  EXPECT_EQ(g.kind, DeviceKind::Gpu);
  EXPECT_EQ(g.name, "Test GPU");
  EXPECT_DOUBLE_EQ(g.f32_tflops, 10);  // an integer where a float is expected
  EXPECT_DOUBLE_EQ(g.tf32_tflops, 40.5);
  EXPECT_DOUBLE_EQ(g.bf16_tflops, 0);  // absent
  EXPECT_DOUBLE_EQ(g.memory_bandwidth_gbs, 500);
  EXPECT_DOUBLE_EQ(g.memory_gib, 16);
  EXPECT_DOUBLE_EQ(g.power_w, 250);
  EXPECT_DOUBLE_EQ(g.price_usd, 1000);
  EXPECT_EQ(g.cores, 0);
  EXPECT_EQ(g.source, "a test");
  EXPECT_EQ(g.date, "2024-01-31");
  const CatalogDevice& cpu = c.devices[1];
  EXPECT_EQ(cpu.kind, DeviceKind::Cpu);
  EXPECT_EQ(cpu.cores, 16);
  EXPECT_EQ(cpu.threads, 32);
  EXPECT_DOUBLE_EQ(cpu.tf32_tflops, 0);
  EXPECT_EQ(cpu.date, "2023-12-01");    // a bare TOML date reads as text
  EXPECT_EQ(cpu.bf16_unit, "unknown");  // absent: not guessed
  EXPECT_FALSE(runs_bf16(cpu));
  ASSERT_EQ(c.instances.size(), 1u);
  const CatalogInstance& in = c.instances[0];
  EXPECT_EQ(in.id, "cloud-a");
  EXPECT_EQ(in.provider, "Cloud");
  EXPECT_EQ(in.name, "box.small");
  EXPECT_EQ(in.device, "gpu-a");
  EXPECT_EQ(in.device_count, 1);
  EXPECT_EQ(in.vcpus, 4);
  EXPECT_DOUBLE_EQ(in.memory_gib, 16);
  EXPECT_DOUBLE_EQ(in.on_demand_usd_per_hour, 2);
  ASSERT_TRUE(in.spot_usd_per_hour.has_value());
  EXPECT_DOUBLE_EQ(*in.spot_usd_per_hour, 0.75);
  EXPECT_EQ(in.region, "north-1");
  EXPECT_EQ(in.date, "2024-02-29");
  EXPECT_EQ(c.find_instance("cloud-a"), &c.instances[0]);
  EXPECT_EQ(c.find_device("nope"), nullptr);
}

// --- Bad files -----------------------------------------------------------------------------------

struct ErrorCase {
  std::string name;
  std::string toml;
  std::vector<std::string> expected;  // substrings of the message, besides the file name
};

std::ostream& operator<<(std::ostream& out, const ErrorCase& c) { return out << c.name; }

std::vector<ErrorCase> error_cases() {
  const std::string a = "device.gpu-a";
  return {
      {"missing_field", kHeader + device("gpu-a", {{"name", ""}}), {a + ".name: missing"}},
      {"missing_id_names_the_index",
       kHeader + device("gpu-a") + device("x", {{"id", ""}}),
       {"device[1].id: missing"}},
      {"empty_string",
       kHeader + device("gpu-a", {{"source", "\"\""}}),
       {a + ".source", "expected a non-empty string"}},
      {"negative_price",
       kHeader + device("gpu-a", {{"price_usd", "-5"}}),
       {a + ".price_usd: -5.0 must be >= 0"}},
      {"zero_f32_rate",
       kHeader + device("gpu-a", {{"f32_tflops", "0"}}),
       {a + ".f32_tflops: 0.0 must be > 0"}},
      {"zero_bandwidth",
       kHeader + device("gpu-a", {{"memory_bandwidth_gbs", "0.0"}}),
       {a + ".memory_bandwidth_gbs", "> 0"}},
      {"negative_power", kHeader + device("gpu-a", {{"power_w", "-1"}}), {a + ".power_w", "> 0"}},
      {"negative_bf16",
       kHeader + device("gpu-a", {}, "bf16_tflops = -2\n"),
       {a + ".bf16_tflops", ">= 0"}},
      {"infinite_rate",
       kHeader + device("gpu-a", {{"f32_tflops", "inf"}}),
       {a + ".f32_tflops", "finite"}},
      {"string_for_number",
       kHeader + device("gpu-a", {{"f32_tflops", "\"10\""}}),
       {a + ".f32_tflops", "expected a finite number", "string"}},
      {"unknown_kind",
       kHeader + device("gpu-a", {{"kind", "\"tpu\""}}),
       {a + ".kind", "unknown kind 'tpu'", "gpu, cpu"}},
      {"unknown_key",
       kHeader + device("gpu-a", {}, "pirce_usd = 3\n"),
       {a + ".pirce_usd", "unknown key", "price_usd"}},
      {"cpu_without_cores",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}),
       {"device.cpu-a.cores: missing"}},
      {"cpu_with_zero_cores",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 0\n"),
       {"device.cpu-a.cores", "must be a positive integer"}},
      {"cpu_without_threads",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4\n"),
       {"device.cpu-a.threads: missing"}},
      {"cpu_with_fewer_threads_than_cores",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4\nthreads = 2\n"),
       {"device.cpu-a.threads", ">= cores (4)"}},
      {"gpu_with_threads",
       kHeader + device("gpu-a", {}, "threads = 8\n"),
       {a + ".threads", "CPUs only"}},
      {"gpu_with_cores", kHeader + device("gpu-a", {}, "cores = 8\n"), {a + ".cores", "CPUs only"}},
      {"cpu_with_sm_count",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4\nthreads = 8\nsm_count = 2\n"),
       {"device.cpu-a.sm_count", "GPUs only"}},
      {"zero_sm_count", kHeader + device("gpu-a", {}, "sm_count = 0\n"), {a + ".sm_count"}},
      // A CPU's bf16 unit: one of four names, a CPU's alone, and never without its rate or a
      // rate without it.
      {"gpu_with_bf16_unit",
       kHeader + device("gpu-a", {}, "bf16_unit = \"amx\"\n"),
       {a + ".bf16_unit", "CPUs only"}},
      {"unknown_bf16_unit",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}},
                        "cores = 4\nthreads = 8\nbf16_unit = \"avx512\"\n"),
       {"device.cpu-a.bf16_unit", "amx", "avx512_bf16", "none", "unknown"}},
      {"bf16_unit_without_rate",
       kHeader +
           device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4\nthreads = 8\nbf16_unit = \"amx\"\n"),
       {"device.cpu-a.bf16_unit", "needs bf16_tflops"}},
      {"bf16_rate_of_no_unit",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}},
                        "cores = 4\nthreads = 8\nbf16_tflops = 3\nbf16_unit = \"none\"\n"),
       {"device.cpu-a.bf16_tflops", "needs its unit"}},
      {"zero_clock",
       kHeader + device("gpu-a", {}, "boost_clock_mhz = 0\n"),
       {a + ".boost_clock_mhz", "> 0"}},
      {"unknown_architecture",
       kHeader + device("gpu-a", {}, "architecture = \"pascal\"\n"),
       {a + ".architecture", "hopper"}},
      {"cpu_with_architecture",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}},
                        "cores = 4\nthreads = 8\narchitecture = \"zen4\"\n"),
       {"device.cpu-a.architecture", "GPUs only"}},
      {"fractional_cores",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 2.5\n"),
       {"device.cpu-a.cores", "expected an integer"}},
      {"duplicate_device_id",
       kHeader + device("gpu-a") + device("gpu-b") + device("gpu-a"),
       {":27: device.gpu-a.id", "already the id of the device on line 3"}},
      {"duplicate_instance_id",
       kHeader + device("gpu-a") + instance("i-1", "gpu-a") + instance("i-1", "gpu-a"),
       {"instance.i-1.id", "already the id of the instance on line 15"}},
      {"impossible_day",
       kHeader + device("gpu-a", {{"date", "\"2023-02-29\""}}),
       {a + ".date", "YYYY-MM-DD", "2023-02-29"}},
      {"month_13",
       kHeader + device("gpu-a", {{"date", "\"2024-13-01\""}}),
       {a + ".date", "2024-13-01"}},
      {"short_year",
       kHeader + device("gpu-a", {{"date", "\"24-01-01\""}}),
       {a + ".date", "24-01-01"}},
      {"slashes", kHeader + device("gpu-a", {{"date", "\"2024/01/01\""}}), {a + ".date"}},
      {"instance_unknown_device",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-z"),
       {"instance.cloud-a.device", "\"gpu-z\"", "not a device", "gpu-a"}},
      {"instance_link_without_rate",
       kHeader + device("gpu-a") +
           instance("cloud-a", "gpu-a", {{"device_count", "8"}, {"interconnect", "\"NVLink 4\""}}),
       {"instance.cloud-a.interconnect", "needs interconnect_gbs too"}},
      {"instance_rate_without_link",
       kHeader + device("gpu-a") +
           instance("cloud-a", "gpu-a", {{"device_count", "8"}, {"interconnect_gbs", "450"}}),
       {"instance.cloud-a.interconnect_gbs", "needs interconnect too"}},
      {"instance_negative_link_rate",
       kHeader + device("gpu-a") +
           instance("cloud-a", "gpu-a",
                    {{"interconnect", "\"NVLink 4\""}, {"interconnect_gbs", "-1"}}),
       {"instance.cloud-a.interconnect_gbs", "-1.0 must be > 0"}},
      {"instance_network_without_rate",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"network", "\"EFA\""}}),
       {"instance.cloud-a.network", "needs network_gbit too", "Gbit/s"}},
      {"instance_network_rate_without_network",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"network_gbit", "100"}}),
       {"instance.cloud-a.network_gbit", "needs network too"}},
      {"instance_zero_network_rate",
       kHeader + device("gpu-a") +
           instance("cloud-a", "gpu-a", {{"network", "\"EFA\""}, {"network_gbit", "0"}}),
       {"instance.cloud-a.network_gbit", "must be > 0"}},
      {"instance_zero_devices",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"device_count", "0"}}),
       {"instance.cloud-a.device_count", "must be a positive integer"}},
      // Counts are ints: 2^32 was cast to 0 devices, and the cost divided by it.
      {"instance_devices_beyond_int",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"device_count", "4294967296"}}),
       {"instance.cloud-a.device_count", "4294967296 is too large",
        "expected an integer <= 2147483647"}},
      {"instance_vcpus_beyond_int",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"vcpus", "2147483648"}}),
       {"instance.cloud-a.vcpus", "2147483648 is too large"}},
      {"cpu_cores_beyond_int",
       kHeader +
           device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4294967297\nthreads = 4294967297\n"),
       {"device.cpu-a.cores", "4294967297 is too large"}},
      {"cpu_threads_beyond_int",
       kHeader + device("cpu-a", {{"kind", "\"cpu\""}}, "cores = 4\nthreads = 4294967300\n"),
       {"device.cpu-a.threads", "4294967300 is too large"}},
      {"instance_missing_price",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"on_demand_usd_per_hour", ""}}),
       {"instance.cloud-a.on_demand_usd_per_hour: missing"}},
      {"instance_zero_price",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a", {{"on_demand_usd_per_hour", "0"}}),
       {"instance.cloud-a.on_demand_usd_per_hour", "> 0"}},
      {"instance_zero_spot",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a") + "spot_usd_per_hour = 0\n",
       {"instance.cloud-a.spot_usd_per_hour", "> 0"}},
      {"dotted_id_is_quoted",
       kHeader + device("gpu-a") + instance("box.large", "gpu-a", {{"vcpus", "0"}}),
       {"instance.\"box.large\".vcpus", "must be a positive integer"}},
      {"instance_unknown_key",
       kHeader + device("gpu-a") + instance("cloud-a", "gpu-a") + "gpu = \"gpu-a\"\n",
       {"instance.cloud-a.gpu", "unknown key"}},
      {"schema_other",
       "schema = \"crossover.catalog/2\"\n" + device("gpu-a"),
       {"schema:", "crossover.catalog/1", "crossover.catalog/2"}},
      {"schema_missing", device("gpu-a"), {"schema: missing", "crossover.catalog/1"}},
      {"unknown_top_level_key",
       kHeader + "devices = []\n" + device("gpu-a"),
       {":2: devices: unknown key"}},
      {"device_as_single_table", kHeader + "[device]\nid = \"gpu-a\"\n", {"[[device]]"}},
      {"extends_not_boolean", kHeader + "extends = \"yes\"\n", {"extends:", "true or false"}},
      {"syntax_error_line",
       kHeader + "[[device]]\nid = \"gpu-a\"\nkind = \n",
       {":4:", "TOML syntax error"}},
  };
}

class CatalogErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(CatalogErrorTest, NamesFileEntryAndField) {
  const ErrorCase& c = GetParam();
  TempFile f(c.toml);
  std::vector<std::string> expected = c.expected;
  expected.insert(expected.begin(), f.name());
  expect_user_error([&] { load_catalog(f.path()); }, expected);
}

INSTANTIATE_TEST_SUITE_P(CatalogErrors, CatalogErrorTest, ::testing::ValuesIn(error_cases()),
                         [](const auto& test) { return test.param.name; });

TEST(CatalogLoad, MissingFileSaysCannotRead) {
  const testing::TempDir dir("xo_catalog");
  const fs::path missing = dir / "does_not_exist.toml";
  expect_user_error([&] { load_catalog(missing); }, {missing.string(), "cannot read"});
}

TEST(CatalogLoad, ErrorsCarryTheLine) {
  TempFile f(kHeader + "\n" + device("gpu-a", {{"price_usd", "-5"}}));
  // Line 1 schema, 2 blank, 3 [[device]], then id, kind, name, f32, tf32, bandwidth, memory,
  // power: price_usd is on line 12.
  expect_user_error([&] { load_catalog(f.path()); }, {f.name() + ":12: device.gpu-a.price_usd"});
}

// --- Merging -------------------------------------------------------------------------------------

TEST(CatalogMerge, ReplacesByIdInPlaceAndAppendsNewEntries) {
  TempFile base_file(kHeader + device("gpu-a") + device("gpu-b") + instance("cloud-a", "gpu-a") +
                     instance("cloud-b", "gpu-b"));
  TempFile overlay_file(kHeader + "extends = true\n" +
                        device("gpu-a", {{"price_usd", "1234"}, {"name", "\"Replaced\""}}) +
                        device("gpu-c") + instance("cloud-a", "gpu-c") +
                        instance("cloud-c", "gpu-b"));
  const Catalog merged =
      merge_catalogs(load_catalog(base_file.path()), load_catalog(overlay_file.path()));
  ASSERT_EQ(merged.devices.size(), 3u);
  EXPECT_EQ(merged.devices[0].id, "gpu-a");  // kept in base's position
  EXPECT_EQ(merged.devices[0].name, "Replaced");
  EXPECT_DOUBLE_EQ(merged.devices[0].price_usd, 1234);
  EXPECT_EQ(merged.devices[1].id, "gpu-b");
  EXPECT_EQ(merged.devices[2].id, "gpu-c");
  ASSERT_EQ(merged.instances.size(), 3u);
  EXPECT_EQ(merged.instances[0].id, "cloud-a");
  EXPECT_EQ(merged.instances[0].device, "gpu-c");
  EXPECT_EQ(merged.instances[1].id, "cloud-b");
  EXPECT_EQ(merged.instances[2].id, "cloud-c");
  EXPECT_EQ(merged.origins, (std::vector<std::string>{base_file.name(), overlay_file.name()}));
}

TEST(CatalogMerge, OverlayOnTheShippedCatalog) {
  TempFile overlay_file(kHeader + "extends = true\n" +
                        instance("my-box", "rtx-4090", {{"on_demand_usd_per_hour", "0.4"}}));
  const Catalog shipped = load_catalog(kShipped);
  const Catalog merged = merge_catalogs(shipped, load_catalog(overlay_file.path()));
  EXPECT_EQ(merged.devices.size(), shipped.devices.size());
  EXPECT_EQ(merged.instances.size(), shipped.instances.size() + 1);
  ASSERT_NE(merged.find_instance("my-box"), nullptr);
  EXPECT_EQ(merged.find_instance("my-box")->device, "rtx-4090");
}

TEST(CatalogMerge, OverlayReferencesAreCheckedAfterTheMerge) {
  TempFile base_file(kHeader + device("gpu-a"));
  TempFile overlay_file(kHeader + "extends = true\n" + instance("cloud-x", "gpu-missing"));
  const Catalog overlay = load_catalog(overlay_file.path());  // deferred: extends = true
  expect_user_error([&] { merge_catalogs(load_catalog(base_file.path()), overlay); },
                    {overlay_file.name(), "instance.cloud-x.device", "\"gpu-missing\"", "gpu-a"});
}

TEST(CatalogMerge, WithoutExtendsAFileMustResolveItsOwnReferences) {
  TempFile overlay_file(kHeader + instance("cloud-x", "gpu-a"));
  expect_user_error([&] { load_catalog(overlay_file.path()); },
                    {overlay_file.name(), "instance.cloud-x.device", "\"gpu-a\"", "extends"});
}

// --- Price overrides -----------------------------------------------------------------------------

Catalog small_catalog() {
  Catalog c;
  c.devices.push_back({"gpu-a", DeviceKind::Gpu, "Test GPU", 10, 0, 0, 500, 16, 250, 1000, 0, 0,
                       "t", "2024-01-01"});
  CatalogInstance in;
  in.id = "cloud.a";  // ids may hold dots, as AWS names do
  in.device = "gpu-a";
  in.on_demand_usd_per_hour = 1.25;
  c.instances.push_back(in);
  return c;
}

TEST(CatalogPriceOverride, SetsOnDemandSpotAndPurchasePrices) {
  Catalog c = small_catalog();
  apply_price_override(c, "cloud.a=2.5");
  EXPECT_DOUBLE_EQ(c.instances[0].on_demand_usd_per_hour, 2.5);
  EXPECT_FALSE(c.instances[0].spot_usd_per_hour.has_value());
  apply_price_override(c, "cloud.a.spot=0.8");
  ASSERT_TRUE(c.instances[0].spot_usd_per_hour.has_value());
  EXPECT_DOUBLE_EQ(*c.instances[0].spot_usd_per_hour, 0.8);
  EXPECT_DOUBLE_EQ(c.instances[0].on_demand_usd_per_hour, 2.5);
  apply_price_override(c, "gpu-a=1599");
  EXPECT_DOUBLE_EQ(c.devices[0].price_usd, 1599);
  apply_price_override(c, "gpu-a=0");  // "not sold separately" is a valid price for a device
  EXPECT_DOUBLE_EQ(c.devices[0].price_usd, 0);
}

struct OverrideErrorCase {
  std::string name;
  std::string text;
  std::vector<std::string> expected;
};

std::ostream& operator<<(std::ostream& out, const OverrideErrorCase& c) { return out << c.name; }

class CatalogPriceOverrideError : public ::testing::TestWithParam<OverrideErrorCase> {};

TEST_P(CatalogPriceOverrideError, NamesTheTextAndWhatWasExpected) {
  const OverrideErrorCase& c = GetParam();
  Catalog catalog = small_catalog();
  const Catalog before = catalog;
  std::vector<std::string> expected = c.expected;
  expected.insert(expected.begin(), "'" + c.text + "'");
  expect_user_error([&] { apply_price_override(catalog, c.text); }, expected);
  EXPECT_DOUBLE_EQ(catalog.instances[0].on_demand_usd_per_hour,
                   before.instances[0].on_demand_usd_per_hour);  // nothing half-applied
  EXPECT_DOUBLE_EQ(catalog.devices[0].price_usd, before.devices[0].price_usd);
}

INSTANTIATE_TEST_SUITE_P(
    CatalogPriceOverrideErrors, CatalogPriceOverrideError,
    ::testing::ValuesIn(std::vector<OverrideErrorCase>{
        {"missing_equals", "cloud.a", {"ID=USD"}},
        {"not_a_number", "cloud.a=cheap", {"'cheap' is not a number"}},
        {"trailing_text", "cloud.a=2usd", {"not a number"}},
        {"empty_price", "cloud.a=", {"not a number"}},
        {"nan", "gpu-a=nan", {"not a number"}},
        {"negative", "gpu-a=-3", {">= 0", "-3"}},
        {"zero_hourly", "cloud.a=0", {"hourly price must be > 0"}},
        {"zero_spot", "cloud.a.spot=0", {"hourly price must be > 0"}},
        {"unknown_id", "cloud.b=1", {"'cloud.b' is not a device or instance id", "cloud.a"}},
        {"spot_of_a_device", "gpu-a.spot=1", {"'gpu-a' is not an instance id", "gpu-a"}},
    }),
    [](const auto& test) { return test.param.name; });

TEST(CatalogPriceOverride, UnknownIdListsTheClosestShippedIds) {
  Catalog c = load_catalog(kShipped);
  expect_user_error([&] { apply_price_override(c, "aws-g5.xlarg=1"); }, {"aws-g5.xlarge"});
}

}  // namespace
}  // namespace xo

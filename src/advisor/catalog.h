// The hardware catalog: GPUs and CPUs with their peak rates, bandwidth, power and purchase price,
// and cloud instances with their devices and hourly prices. Shipped as data (data/catalog.toml),
// never as code; a user catalog file adds entries or replaces shipped ones by id, and single
// prices can be overridden from the command line. Every entry names its source and date.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"

namespace xo {

// A device one can buy (or that an instance carries).
struct CatalogDevice {
  std::string id;  // unique across devices, e.g. "h100-sxm", "epyc-9654"
  DeviceKind kind = DeviceKind::Gpu;
  std::string name;        // e.g. "NVIDIA H100 SXM5 80GB"
  double f32_tflops = 0;   // dense peak rates, TFLOP/s (> 0)
  double tf32_tflops = 0;  // 0 where the device has no such mode (CPUs)
  double bf16_tflops = 0;
  double memory_bandwidth_gbs = 0;  // GB/s (> 0)
  double memory_gib = 0;
  double power_w = 0;    // board power (GPU) or TDP (CPU), > 0
  double price_usd = 0;  // purchase price; 0 = not sold separately (then no ownership figures)
  int cores = 0;         // CPUs: physical cores; GPUs: 0
  int threads = 0;       // CPUs: hardware threads (a cloud vCPU is one); GPUs: 0
  std::string source;    // where the figures come from
  std::string date;      // YYYY-MM-DD: when the figures (prices above all) were read
  // GPUs, optional (0: not given): streaming multiprocessors and boost clock, what a chain of
  // small kernels is bound by (a node of a recorded step, a latency-bound kernel) where the FLOP
  // rate and the bandwidth bind only kernels that fill the chip.
  int sm_count = 0;
  double boost_clock_mhz = 0;
  // GPUs, optional ("": not given): the architecture ("turing", "ampere", "ada", "hopper", ...),
  // which says whose validation rows a prediction of it may quote (advisor/profile_predict.h).
  std::string architecture;
  // CPUs: the unit that runs bf16 products ("amx", "avx512_bf16", as lscpu names the flags;
  // "none"; "unknown" where the entry does not say), which bf16_tflops is the rate of. GPUs: "".
  std::string bf16_unit;
};

// Whether a catalog CPU has a unit for bf16 products (AMX or AVX-512 BF16) with its rate.
bool runs_bf16(const CatalogDevice& d);

// A cloud instance: `device_count` of `device` (a CatalogDevice id), hourly prices in USD.
struct CatalogInstance {
  std::string id;        // unique across instances, e.g. "aws-g5.xlarge"
  std::string provider;  // "AWS", "GCP", "Azure", "Lambda", ...
  std::string name;      // the provider's name, e.g. "g5.xlarge"
  std::string device;    // CatalogDevice id of its accelerator (or of its CPU for CPU instances)
  int device_count = 1;
  int vcpus = 0;
  double memory_gib = 0;
  double on_demand_usd_per_hour = 0;        // > 0
  std::optional<double> spot_usd_per_hour;  // absent where the provider has no spot price
  std::string region;
  std::string source;
  std::string date;
  // Multi-device instances: the link between its devices that collectives run over (NVLink via
  // NVSwitch, PCIe), and its bandwidth per device and direction, GB/s; "" and 0 where not given
  // (then no data-parallel run on all its devices is predicted).
  std::string interconnect;
  double interconnect_gbs = 0;
  // The instance's network to other instances of its kind (EFA, GPUDirect-TCPX), and its rated
  // rate per direction for the whole instance, Gbit/s; "" and 0 where not given (then no run
  // across several instances is priced).
  std::string network;
  double network_gbit = 0;
};

struct Catalog {
  std::vector<CatalogDevice> devices;
  std::vector<CatalogInstance> instances;
  std::vector<std::string> origins;  // the files it was read from, in order

  const CatalogDevice* find_device(const std::string& id) const;      // null when absent
  const CatalogInstance* find_instance(const std::string& id) const;  // null when absent
};

// A catalog device stands for a local one (a DeviceInfo, a profile's device) when its model
// number (the first word of its name with a digit in it, e.g. "H100", "9654", "i9-14900K")
// appears in the local device's name as a whole word.
bool same_model(const CatalogDevice& d, const DeviceInfo& local);

// The catalog shipped with crossover: data/catalog.toml as it was when the binary was built, which
// the binary carries (cmake/embed.cmake), so that it runs wherever it is moved or installed. A
// file named by the environment variable CROSSOVER_CATALOG replaces it (--catalog files merge over
// either).
Catalog shipped_catalog();
// data/catalog.toml's bytes, as built in (generated from the file by the build).
std::string_view shipped_catalog_text();
// The origin the built-in catalog's errors and records name.
inline constexpr char kShippedCatalogOrigin[] = "data/catalog.toml (built in)";

// Reads and validates a catalog file. Errors (UserError) read "FILE:LINE: KEY: what was expected",
// the key naming the entry by its id (or by its index where the id is missing) and the field, as in
// "device.h100-sxm.price_usd" or "device[2].id": a missing
// or mistyped field, a negative or zero rate or price, an unknown kind, a duplicate id, an instance
// whose device is not in the catalog, a date not in YYYY-MM-DD form, an unknown key.
//
// Instance -> device references are checked against the file's own devices, unless the file says
// `extends = true` at the top: such a file is an overlay meant to be merged onto another catalog
// (it may name the shipped catalog's devices), and merge_catalogs checks its references instead.
Catalog load_catalog(const std::filesystem::path& file);
// The same from a catalog's text; `origin` names it in errors.
Catalog parse_catalog(const std::string& text, const std::string& origin);

// `base` with `overlay`'s entries added; an entry whose id exists in base replaces it (keeping
// base's position), new ones are appended, origins are concatenated. Instances' device references
// are checked again after the merge; an error names the instance, the missing device and the file.
Catalog merge_catalogs(Catalog base, const Catalog& overlay);

// Applies one command-line override "ID=USD": an instance id sets its on-demand hourly price, a
// device id its purchase price; "ID.spot=USD" sets an instance's spot price. Errors name the text.
void apply_price_override(Catalog& catalog, const std::string& text);

}  // namespace xo

// A device's measured limits, from a short probe through the backend itself (so they are what
// crossover's kernels can reach there): the f32 matmul rate, the memory bandwidth of a streaming
// add, and the fixed cost of a training step and of each layer in it (tiny MLPs, where no FLOP or
// byte counts). Probed once per machine and device, then cached.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/json_fields.h"
#include "measure/sampler.h"
#include "model/model.h"

namespace xo {

struct DevicePeaks {
  std::string device;  // DeviceInfo::id
  std::string name;
  int threads = 0;
  // The arithmetic the matmul ran in: "bf16" for a backend at --precision bf16 (on the CPU its
  // bf16 copies of the operands included); empty for f32 (and in files from before bf16).
  std::string precision;
  double matmul_gflops = 0;  // best of 9 timed n x n x n matmuls (forward Linear kernel)
  int64_t matmul_n = 0;
  double bandwidth_gbs = 0;      // best of 7 dst += src over buffers far larger than the caches
  double step_overhead_us = 0;   // a training step's fixed cost (medians of tiny steps)
  double layer_overhead_us = 0;  // each further Linear + ReLU layer's fixed cost
  std::string probed;            // UTC time of the probe
  bool cached = false;           // read from the cache rather than measured now
};

// The peaks of `device` in `peaks`, or null.
const DevicePeaks* find_peaks(const std::vector<DevicePeaks>& peaks, const std::string& device);

// The fields of a device's peaks, listed once (io/json_fields.h) for the peaks cache, a device
// profile and results.json. `cached` (whether they came from the cache) is left out of a profile.
template <class Io, class P>
void peaks_fields(Io& io, P& p, bool with_cached) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  io.text("device", p.device);
  io.text("name", p.name);
  io.integer("threads", p.threads, Between{0, kMaxInt});
  io.text_unless_empty("precision", p.precision);
  io.number("matmul_gflops", p.matmul_gflops, AtLeast{1e-9});
  io.integer("matmul_n", p.matmul_n, Between{0, kMaxInt});
  io.number("bandwidth_gbs", p.bandwidth_gbs, AtLeast{1e-9});
  io.number("step_overhead_us", p.step_overhead_us, AtLeast{0});
  io.number("layer_overhead_us", p.layer_overhead_us, AtLeast{0});
  io.text("probed", p.probed);
  if (with_cached) io.flag_or_absent("cached", p.cached);
}

nlohmann::json to_json(const DevicePeaks& p);
// The inverse of to_json: throws UserError naming `origin` and the field that is missing, of the
// wrong type or out of its range.
DevicePeaks peaks_from_json(const nlohmann::json& j, const std::string& origin);

// The entries of a peaks cache file's text (`origin` names it). Throws UserError when the text is
// not JSON, nests too deep (core/json_depth.h) or is not an object; an entry is not checked here.
nlohmann::json parse_peaks_cache(const std::string& text, const std::string& origin);

// A Linear+ReLU MLP, `layers` deep and 4 wide, batch 1, plain SGD: a training step where nothing
// but fixed costs counts (the peaks' step and layer overheads, the profile's step cost).
ModelSpec tiny_step_spec(int layers);
class TinyStep {
 public:
  TinyStep(Backend& backend, int layers);
  void run();  // one training step (forward, loss, backward, optimizer), queued on the backend

 private:
  Model model_;
  Network net_;
  std::unique_ptr<OptimizerKernel> optimizer_;
  DeviceBuffer x_, y_, stats_;
};
// Its median step time, after a warm-up.
double tiny_step_seconds(Backend& backend, int layers);

// Measures the peaks now (about a second on a CPU).
DevicePeaks probe_peaks(Backend& backend);

// The cache key of a device: what must match for a cached probe to stand for this one (machine,
// device name, threads, library, crossover version).
std::string peaks_cache_key(const DeviceInfo& device);

// From `cache_file` when it holds an entry for this device (and !reprobe), else probed and stored
// there (written atomically; a damaged cache is replaced, an unwritable one only warned about). A
// probe during which other processes kept `busy_limit` cores or more busy
// (contaminating_load_since) is used with a warning but not stored: the next run probes again.
DevicePeaks device_peaks(Backend& backend, bool reprobe, const std::filesystem::path& cache_file,
                         double busy_limit = kContaminatingCores);
std::filesystem::path default_peaks_cache();

}  // namespace xo

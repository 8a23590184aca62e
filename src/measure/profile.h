// A device profile: what a prediction of a training step needs, measured on the device through
// the engine's own kernels. Every node kind of a model (Linear, Conv2d, LSTM, pools, ...) is timed
// forward and backward at the shapes the built-in models use and over a grid around them, run as
// the engine runs it (the whole device, or as concurrent batch shards on one thread each); the
// loss, the optimizer's pass and the shards' merge over sizes; and the fixed costs of a step.
// Stored per device in the cache, and committed under data/profiles/ for every device the project
// measured, with the machine and the date, and the step times measured there for the validation.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "measure/peaks.h"
#include "model/model.h"

namespace xo {

inline constexpr char kProfileSchema[] = "crossover.profile/1";

// One timed kernel (or a node's kernels): what it is, where it ran, its work, and its medians.
struct KernelSample {
  std::string op;       // "linear", "conv2d", ..., "loss", "optimizer", "accumulate"
  std::string variant;  // what must match for a time to carry over (activation, input gradient,
                        // kernel/stride/padding, loss or optimizer type)
  int64_t batch = 0;    // samples per shard (the whole batch when shards is 1)
  int shards = 1;       // run concurrently, each on one thread, when > 1
  double in_size = 0, out_size = 0;  // elements per sample (params for the optimizer)
  double flops = 0, bytes = 0;       // per shard, forward and backward together (model/cost)
  // The FLOPs of the kernel's typical matmul call (a Linear's, a convolution's, an LSTM step's
  // recurrent one): what decides whether the CPU backend runs it on one thread. 0: no matmul.
  double matmul_flops = 0;
  // "trials_linear": a Linear of this many fused trials (model/fused_network.h) on each shard, the
  // kernel a fused group runs for a Linear of all its trials (batch: rows per trial; the work is
  // the trials' together). 0 for every other op.
  int trials = 0;
  // A CPU: each call timed on its own. A GPU: what one more call adds to a step that queues
  // every kernel without waiting (forward_us, backward_us: `--no-graph`) and to a recorded step
  // (graph_*: the default, one CUDA Graph per step). 0: not measured (a CPU, an older profile).
  double forward_us = 0, backward_us = 0;
  double graph_forward_us = 0, graph_backward_us = 0;
  double total_us() const { return forward_us + backward_us; }
  double graph_total_us() const { return graph_forward_us + graph_backward_us; }
};

// A step's measured time on the device, for the validation (leave-one-out) table.
struct MeasuredStep {
  std::string model;
  int64_t batch = 0;
  double step_ms = 0;  // median (the fastest process's, where several were measured)
  std::string source;  // how it was measured (command, file)
  // A model that is not built in (a spec of bench/unseen/, measured on the device): its spec, so
  // that the validation can predict it. Empty for a built-in model.
  std::string spec_toml;
  // The slowest process's median where several were measured (0: not recorded): how much the
  // measurement itself moves from run to run, which no prediction can be steadier than.
  double slowest_ms = 0;
};

struct DeviceProfile {
  std::string id;      // e.g. "amd-epyc-2t": the file's stem under data/profiles/
  std::string device;  // DeviceInfo::id
  DeviceKind kind = DeviceKind::Cpu;
  std::string name;
  int threads = 0;
  std::string machine;  // CPU model, cores, memory, OS: where it was measured
  std::string date;     // UTC, of the measurement
  std::string library;
  // A CPU profile timed at bf16: the unit that ran its products, in the catalog's words ("amx",
  // "avx512_bf16"); empty otherwise. A catalog CPU at bf16 takes the ratio of its own unit's.
  std::string bf16_unit;
  DevicePeaks peaks;
  ExecutionPolicy policy;
  double step_fixed_us = 0;  // a step's cost besides its kernels (loop, clock, batch pointer)
  double shard_fork_us = 0;  // one parallel region of the shards
  // A GPU's recorded step (0: not measured): its cost besides its nodes, and the least a node of
  // it costs (a kernel that does next to nothing), the floor of a chain of small kernels.
  double graph_step_fixed_us = 0, graph_node_us = 0;
  // A GPU's multiprocessors and boost clock (0: not known), what carries its small kernels and
  // its nodes' floor to another GPU.
  int sm_count = 0;
  double clock_mhz = 0;
  bool has_graph_times() const { return graph_node_us > 0; }
  std::vector<KernelSample> samples;  // empty: a profile of peaks only (not measured per kernel)
  std::vector<MeasuredStep> measured;
  std::string note;  // what the profile holds and lacks, for a profile of peaks only
  bool has_kernels() const { return !samples.empty(); }
};

// The kernel sample of one node of `layout` at `batch` samples per shard in `shards` shards,
// without its times (what a lookup matches against).
KernelSample node_sample(const ModelLayout& layout, size_t node, int64_t batch, int shards);

// The fused trials' Linear (op "trials_linear") of node `node` of `layout`: `trials` trials of
// `batch` rows each on every one of `shards` workers at once, without its times.
KernelSample trials_linear_sample(const ModelLayout& layout, size_t node, int64_t batch, int trials,
                                  int shards);
// The trials per worker a CPU profile times the fused Linear at; a GPU's one group, to tune's
// largest automatic group (64: scaled from 32, the wider Linears of 64 fused trials were predicted
// far too fast on an H200: docs/benchmarks.md, "Fused trials on an H200").
inline constexpr int kProfiledTrials[] = {1, 2, 8, 32};
inline constexpr int kProfiledGpuTrials[] = {1, 2, 8, 32, 64};

// Measures a profile of `backend`: every node of `specs` (the built-in models and the grid of
// measure_grid_specs), the losses and optimizers they use, the merge and the fixed costs.
// `progress(done, total)` is called between samples. Stops (UserError) on Ctrl-C.
DeviceProfile measure_profile(Backend& backend, const DevicePeaks& peaks,
                              const std::vector<ModelSpec>& specs, const std::string& machine,
                              const std::function<void(size_t, size_t)>& progress = {});
// The grid around the built-in models' shapes: MLPs over widths and batches.
std::vector<ModelSpec> measure_grid_specs();

nlohmann::json to_json(const DeviceProfile& p);
// Throws UserError naming `origin` and the field that is missing or wrong.
DeviceProfile profile_from_json(const nlohmann::json& j, const std::string& origin);
// A profile file's text (schema crossover.profile/1).
DeviceProfile parse_profile(const std::string& text, const std::string& origin);

// A profile as bytes (io/fields_pack.h), and back: how the shipped profiles, read and checked from
// their JSON when crossover is built (src/tools/pack_profiles.cpp), are carried in the binary.
// Throws UserError naming `origin` where the bytes are not a whole pack.
std::string pack_profile(const DeviceProfile& p);
DeviceProfile unpack_profile(std::string_view bytes, const std::string& origin);

// The profiles crossover ships (data/profiles/*.json, built into the binary), by id.
std::vector<DeviceProfile> shipped_profiles();

// The cached profile of this device (same key as the peaks cache), or none.
std::optional<DeviceProfile> cached_profile(const DeviceInfo& device,
                                            const std::filesystem::path& cache_file);
// Every cached profile of this machine (this host, this crossover version).
std::vector<DeviceProfile> cached_profiles_here(const std::filesystem::path& cache_file);
void store_profile(const DeviceInfo& device, const DeviceProfile& p,
                   const std::filesystem::path& cache_file);
std::filesystem::path default_profile_cache();

// What local_profile measures: `models` (built-in names; all when empty), `machine` in words (where
// it is measured, report/machine.h's machine_line).
struct LocalProfileOptions {
  bool reprofile = false;
  std::vector<std::string> models;
  std::string machine;
};
// This machine's device profile: the cached one, else measured now (`progress(fraction, text)`
// between samples) and cached, unless other processes kept the CPUs busy meanwhile (then a
// warning, not cached); its id is the device's name and threads ("amd-epyc-2t"). With `models`, a
// profile of those models' kernels and the grid, measured now and never cached (it is not the
// whole device's).
DeviceProfile local_profile(Backend& backend, const LocalProfileOptions& options,
                            const std::function<void(double, const std::string&)>& progress = {});

}  // namespace xo

#include "measure/peaks.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "model/model.h"
#include "train/stats.h"

namespace xo {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Seconds of `reps` timed calls after one warm-up: the best (a peak is what the device can do;
// other work on the machine only ever slows a call down), or the median for the fixed costs.
template <typename F>
std::vector<double> timed_seconds(int reps, Backend& be, F&& body) {
  // A stop is seen between calls: the longest wait is one call (under a second on this CPU's
  // largest probe).
  throw_if_stop_requested("probing the device's peaks");
  body();
  be.synchronize();
  std::vector<double> s;
  for (int i = 0; i < reps; ++i) {
    throw_if_stop_requested("probing the device's peaks");
    const auto t0 = Clock::now();
    body();
    be.synchronize();
    s.push_back(seconds_since(t0));
  }
  return s;
}

template <typename F>
double best_seconds(int reps, Backend& be, F&& body) {
  const std::vector<double> s = timed_seconds(reps, be, body);
  return *std::min_element(s.begin(), s.end());
}

template <typename F>
double median_seconds(int reps, Backend& be, F&& body) {
  return summarize(timed_seconds(reps, be, body)).median;
}

double probe_matmul(Backend& be, int64_t n) {
  LinearShape shape;
  shape.batch = shape.in_features = shape.out_features = n;
  shape.has_bias = false;
  shape.need_d_src = false;
  auto kernel = be.linear(shape);
  DeviceBuffer a = be.allocate(sizeof(float) * n * n), w = be.allocate(sizeof(float) * n * n),
               c = be.allocate(sizeof(float) * n * n);
  std::vector<float> host(static_cast<size_t>(n * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 7) * 0.125f - 0.375f;
  be.upload(a.as<float>(), host.data(), a.bytes());
  be.upload(w.as<float>(), host.data(), w.bytes());
  const double s = best_seconds(
      9, be, [&] { kernel->forward(a.as<float>(), w.as<float>(), nullptr, c.as<float>()); });
  return 2.0 * static_cast<double>(n) * n * n / s / 1e9;
}

double probe_bandwidth(Backend& be, int64_t floats) {
  // Hundreds of megabytes are touched before the timed calls, a few tenths of a second each step:
  // a stop is looked for between them.
  constexpr char kDoing[] = "probing the device's peaks";
  throw_if_stop_requested(kDoing);
  DeviceBuffer a = be.allocate(sizeof(float) * floats);  // zeroed: the CPU's 256 MiB take a while
  throw_if_stop_requested(kDoing);
  DeviceBuffer b = be.allocate(sizeof(float) * floats);
  throw_if_stop_requested(kDoing);
  // Written first: untouched pages of a fresh allocation may all map to one zero page in cache.
  const std::vector<float> ones(static_cast<size_t>(floats), 1.0f);
  throw_if_stop_requested(kDoing);
  be.upload(a.as<float>(), ones.data(), a.bytes());
  throw_if_stop_requested(kDoing);
  be.upload(b.as<float>(), ones.data(), b.bytes());
  const double s =
      best_seconds(7, be, [&] { be.accumulate(a.as<float>(), b.as<float>(), floats); });
  return 3.0 * sizeof(float) * static_cast<double>(floats) / s / 1e9;  // read a, b; write a
}

}  // namespace

ModelSpec tiny_step_spec(int layers) {
  ModelSpec spec;
  spec.name = fmt::format("overhead-probe-{}", layers);
  spec.origin = "built-in";
  spec.input = {4};
  spec.train.batch = 1;
  spec.train.shuffle = false;
  for (int l = 0; l < layers; ++l) {
    LayerSpec linear;
    linear.type = LayerType::Linear;
    linear.out = 4;
    spec.layers.push_back(linear);
    LayerSpec relu;
    relu.type = LayerType::ReLU;
    if (l + 1 < layers) spec.layers.push_back(relu);
  }
  return spec;
}

namespace {
Model& initialised(Model& m) {
  m.init(1);
  return m;
}
}  // namespace

TinyStep::TinyStep(Backend& be, int layers)
    : model_(tiny_step_spec(layers), be),
      net_(initialised(model_), {.batch = 1, .shards = 1}),
      optimizer_(be.optimizer(model_.spec().train.optimizer, model_.flat_size())),
      x_(be.allocate(sizeof(float) * 4)),
      y_(be.allocate(sizeof(int32_t))),
      stats_(be.allocate(sizeof(LossStats))) {
  const float one[4] = {0.5f, -0.25f, 0.125f, 1.0f};
  be.upload(x_.as<float>(), one, sizeof(one));
}

void TinyStep::run() {
  net_.train_step(x_.as<float>(), y_.as<int32_t>(), stats_.as<LossStats>());
  optimizer_->step(model_.params(), model_.grads());
}

double tiny_step_seconds(Backend& be, int layers) {
  TinyStep tiny(be, layers);
  for (int i = 0; i < 20; ++i) tiny.run();  // warm-up
  return median_seconds(200, be, [&] { tiny.run(); });
}

const DevicePeaks* find_peaks(const std::vector<DevicePeaks>& peaks, const std::string& device) {
  for (const DevicePeaks& p : peaks) {
    if (p.device == device) return &p;
  }
  return nullptr;
}

DevicePeaks probe_peaks(Backend& be) {
  const DeviceInfo& d = be.info();
  DevicePeaks p;
  p.device = d.id;
  p.name = d.name;
  p.threads = d.threads;
  if (d.precision != "f32") p.precision = d.precision;
  const bool gpu = d.kind == DeviceKind::Gpu;
  p.matmul_n = gpu ? 8192 : 2048;
  p.matmul_gflops = probe_matmul(be, p.matmul_n);
  p.bandwidth_gbs = probe_bandwidth(be, int64_t{1} << (gpu ? 28 : 26));  // 1 GiB / 256 MiB each
  const double one = tiny_step_seconds(be, 1), eight = tiny_step_seconds(be, 8);
  if (std::getenv("CROSSOVER_DEBUG_PROBE")) {
    fmt::print(stderr, "probe: 1-layer step {:.3f} us, 8-layer step {:.3f} us\n", one * 1e6,
               eight * 1e6);
  }
  p.layer_overhead_us = std::max(0.0, (eight - one) / 7 * 1e6);
  p.step_overhead_us = std::max(0.0, one * 1e6 - p.layer_overhead_us);
  p.probed = utc_now();
  return p;
}

std::string peaks_cache_key(const DeviceInfo& d) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  // A precision other than f32 keys its own entry (f32's key is as before bf16).
  return fmt::format("{}|{}|{}|{} threads{}|{}|crossover {}", host, d.id, d.name, d.threads,
                     d.precision == "f32" ? "" : "|" + d.precision, d.library, CROSSOVER_VERSION);
}

std::filesystem::path default_peaks_cache() { return default_cache_dir() / "peaks.json"; }

DevicePeaks device_peaks(Backend& be, bool reprobe, const std::filesystem::path& cache_file,
                         double busy_limit) {
  const std::string key = peaks_cache_key(be.info());
  nlohmann::json cache = nlohmann::json::object();
  std::error_code ec;
  if (std::filesystem::exists(cache_file, ec)) {
    try {
      cache = parse_peaks_cache(read_file(cache_file), cache_file.string());
    } catch (const UserError&) {
      cache = nlohmann::json::object();  // damaged: probe again and replace it
    }
  }
  if (!reprobe && cache.contains(key)) {
    try {
      DevicePeaks p = peaks_from_json(cache[key], fmt::format("{} ({})", cache_file.string(), key));
      p.cached = true;
      if (p.matmul_gflops > 0 && p.bandwidth_gbs > 0) return p;
    } catch (const std::exception&) {
      // an entry of an older layout: probe again
    }
  }
  const CpuTimes before = read_cpu_times();
  DevicePeaks p = probe_peaks(be);
  if (const auto busy = contaminating_load_since(before, busy_limit)) {
    fmt::print(
        stderr,
        "warning: {} peaks probed while other processes kept {:.1f} cores busy: too low, and not\n"
        "  cached (the next run probes again; a quiet machine gives the real ones)\n",
        p.device, *busy);
    return p;
  }
  nlohmann::json entry = to_json(p);
  entry.erase("cached");
  cache[key] = entry;
  try {
    replace_file_atomic(cache_file, cache.dump(2) + "\n");
  } catch (const UserError& e) {
    fmt::print(stderr, "warning: peaks not cached: {}\n", e.what());
  }
  return p;
}

}  // namespace xo

// This machine's device profile: the cached one, or measured now over the built-in models and the
// grid, named after the device and cached unless other processes kept the CPUs busy meanwhile.
#include <fmt/format.h>

#include <cctype>
#include <optional>

#include "core/error.h"
#include "measure/peaks.h"
#include "measure/profile.h"
#include "measure/sampler.h"
#include "model/spec.h"

namespace xo {
namespace {

// The device's name and threads as a file stem: "AMD EPYC" on 2 threads is "amd-epyc-2t"; a GPU
// has no threads.
std::string profile_id(const DeviceProfile& p) {
  std::string name = p.threads > 0 ? fmt::format("{}-{}t", p.name, p.threads) : p.name;
  // A CPU's kernels timed at bf16: a profile beside its f32 one ("amd-epyc-2t-bf16").
  if (p.kind == DeviceKind::Cpu && !p.peaks.precision.empty()) name += "-" + p.peaks.precision;
  std::string id;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      id += static_cast<char>(std::tolower(u));
    } else if (!id.empty() && id.back() != '-') {
      id += '-';
    }
  }
  return id;
}

std::vector<ModelSpec> specs_to_profile(const std::vector<std::string>& models) {
  std::vector<ModelSpec> specs;
  for (const std::string& name : models.empty() ? builtin_spec_names() : models) {
    const std::optional<ModelSpec> spec = builtin_spec(name);
    if (!spec) {
      throw UserError(
          fmt::format("--models: '{}' is not a built-in model (crossover models)", name));
    }
    specs.push_back(*spec);
  }
  for (ModelSpec& s : measure_grid_specs()) specs.push_back(std::move(s));
  return specs;
}

}  // namespace

DeviceProfile local_profile(Backend& be, const LocalProfileOptions& o,
                            const std::function<void(double, const std::string&)>& progress) {
  const DevicePeaks peaks = device_peaks(be, false, default_peaks_cache());
  const bool whole = o.models.empty();
  if (!o.reprofile && whole) {
    if (auto cached = cached_profile(be.info(), default_profile_cache())) return *cached;
  }
  const std::vector<ModelSpec> specs = specs_to_profile(o.models);
  const CpuTimes before = read_cpu_times();
  DeviceProfile p = measure_profile(be, peaks, specs, o.machine, [&](size_t done, size_t total) {
    if (progress) {
      progress(static_cast<double>(done) / static_cast<double>(total),
               fmt::format("profiling {}", be.info().id));
    }
  });
  p.id = profile_id(p);
  if (!whole) return p;  // a profile of some models only is not the device's: not cached
  if (const auto busy = contaminating_load_since(before)) {
    fmt::print(stderr,
               "warning: the {} profile was measured while other processes kept {:.1f} cores "
               "busy:\n  its kernels read slow, and it is not cached (measure again on a quiet "
               "machine)\n",
               p.id, *busy);
    return p;
  }
  try {
    store_profile(be.info(), p, default_profile_cache());
  } catch (const UserError& e) {
    fmt::print(stderr, "warning: profile not cached: {}\n", e.what());
  }
  return p;
}

}  // namespace xo

#include "advisor/validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "distributed/process.h"
#include "model/spec.h"

namespace xo {
namespace {

// A new folder under the system's temporary folder, removed with this object.
class TempDir {
 public:
  explicit TempDir(const std::string& stem) {
    std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
    if (!mkdtemp(pattern.data())) {
      throw UserError(
          fmt::format("could not create a temporary folder {}: {}", pattern, std::strerror(errno)));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The last line a failed child printed.
std::string last_line(std::string log) {
  while (!log.empty() && log.back() == '\n') log.pop_back();
  return log.substr(log.rfind('\n') == std::string::npos ? 0 : log.rfind('\n') + 1);
}

// Each model in a process of its own, as `crossover train` measures it, in `repeat` rounds over all
// the models: the fastest of its runs' median steps. A shared host's neighbours come and go in
// phases (of seconds to a minute) that slow memory-heavy steps markedly (docs/benchmarks.md,
// "Figures once quoted in code comments"); rounds spread each model's runs over the whole
// measurement, and the profile's samples likewise keep the faster of two passes, so both sides are
// the device without them. Nothing when a stop request came.
std::optional<std::vector<MeasuredStep>> measure_models(const ValidationSettings& o,
                                                        const std::vector<std::string>& models,
                                                        const ValidationHooks& hooks) {
  const TempDir work("crossover-validate");
  std::vector<std::vector<double>> medians(models.size());
  std::vector<int64_t> batches(models.size());
  for (int r = 0; r < o.repeat; ++r) {
    for (size_t i = 0; i < models.size(); ++i) {
      if (hooks.progress) {
        hooks.progress(static_cast<double>(r * models.size() + i) /
                           static_cast<double>(o.repeat * models.size()),
                       fmt::format("measuring {} (round {} of {})", models[i], r + 1, o.repeat));
      }
      const std::filesystem::path json = work.path() / fmt::format("{}-{}.json", models[i], r);
      const int code = run_child({"train", models[i], "--device", o.device, "--steps",
                                  std::to_string(o.steps), "--threads", std::to_string(o.threads),
                                  "--checkpoint-every", "off", "--json", json.string()},
                                 work.path() / "log.txt");
      if (stop_requested()) return std::nullopt;
      if (code != 0) {
        throw UserError(fmt::format("measuring {}: `crossover train` exited with {}: {}", models[i],
                                    code, last_line(read_file(work.path() / "log.txt"))));
      }
      const auto [median, batch] = hooks.read_train(json);
      medians[i].push_back(median);
      batches[i] = batch;
    }
  }
  std::vector<MeasuredStep> steps;
  for (size_t i = 0; i < models.size(); ++i) {
    const auto [fastest, slowest] = std::minmax_element(medians[i].begin(), medians[i].end());
    steps.push_back(
        {models[i], batches[i], *fastest,
         fmt::format("fastest median step of {} runs of crossover train {} --steps {}, in rounds "
                     "over the models (slowest {:.3g} ms; {})",
                     o.repeat, models[i], o.steps, *slowest, utc_now().substr(0, 10)),
         "", *slowest});
  }
  return steps;
}

}  // namespace

std::optional<Validation> validate_here(Backend& be, const ValidationSettings& o,
                                        const ValidationHooks& hooks) {
  Validation v;
  v.here = local_profile(be, {o.reprofile, o.models, hooks.machine}, hooks.progress);
  const std::vector<std::string> models = o.models.empty() ? builtin_spec_names() : o.models;
  std::optional<std::vector<MeasuredStep>> measured = measure_models(o, models, hooks);
  if (!measured) return std::nullopt;
  v.here.measured = std::move(*measured);
  std::vector<DeviceProfile> profiles;
  if (!o.models.empty()) v.here.id += "-subset";  // beside the shipped profile of this device
  for (DeviceProfile& p : shipped_profiles()) {
    if (p.id != v.here.id) profiles.push_back(std::move(p));
  }
  profiles.insert(profiles.begin(), v.here);
  v.rows = validate_profiles(profiles);
  if (!o.models.empty()) {
    // A profile of some models only stands for its own measurements, not for other devices.
    std::erase_if(v.rows, [&](const ValidationRow& r) { return r.from == v.here.id && !r.own; });
  }
  return v;
}

}  // namespace xo

#include "tune/parallel.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "distributed/process.h"
#include "model/model.h"
#include "train/trials.h"
#include "tune/trial_process.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

// `k` processes at once on `device`, `threads` each: their samples per second, each and summed.
ParallelOption measure(const ParallelSettings& s, const std::string& device, int k, int threads) {
  ParallelOption option{k, threads, 0, {}};
  own_folder(s.dir);
  const fs::path log = s.dir / "log.txt";
  remove_unless_regular(log);
  std::vector<pid_t> pids;
  std::vector<fs::path> results;
  for (int i = 0; i < k; ++i) {
    const fs::path json = s.dir / fmt::format("{}-k{}-{}.json", device, k, i);
    fs::remove(json);
    results.push_back(json);
    pids.push_back(spawn(probe_args(s.spec, device, threads, s.steps, json, s.precision), log));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (exit_status(status) != 0) {
      throw UserError(fmt::format("measuring {} trials at once on {}: {} (see {})", k, device,
                                  failure_text(log, exit_status(status)), log.string()));
    }
    const TrainResult r = s.read_result(read_file(results[i]), results[i].string());
    option.per_trial.push_back(r.samples_per_second);
    option.samples_per_second += r.samples_per_second;
  }
  return option;
}

// Every count from 1, doubling, up to the cores on a CPU and 4 on a GPU; the fastest taken. Each
// process trains `s.steps`, or fewer where the search is short (ParallelSettings::search_steps);
// where it is shorter than measuring it would be, the most at once, not measured.
ParallelChoice measure_choice(ParallelSettings s, const std::string& device) {
  const bool cpu = device_kind_of(device) == DeviceKind::Cpu;
  const int most = cpu ? s.cores : 4;
  int64_t processes = 0;
  for (int k = 1; k <= most; k *= 2) processes += k;
  if (s.search_steps > 0) {
    const auto share = static_cast<int64_t>(kFuseProbeShare * static_cast<double>(s.search_steps) /
                                            static_cast<double>(processes));
    if (share < kMinProbeSteps) {
      ParallelChoice c{device, std::max(1, std::min(most, s.trials)), false, {}};
      c.short_search = true;
      return c;
    }
    s.steps = static_cast<int>(std::min<int64_t>(s.steps, share));
  }
  ParallelChoice c{device, 1, true, {}};
  for (int k = 1; k <= most; k *= 2) {
    if (s.measuring) s.measuring(k, device);
    c.options.push_back(measure(s, device, k, cpu ? trial_threads(s.threads, s.cores, k) : 0));
  }
  const auto best = std::max_element(c.options.begin(), c.options.end(),
                                     [](const ParallelOption& a, const ParallelOption& b) {
                                       return a.samples_per_second < b.samples_per_second;
                                     });
  c.k = best->k;
  return c;
}

}  // namespace

namespace {

// A group timed: its median step, and the seconds the timing took from the first model built to
// the last step (what the probe pays for it).
struct GroupTiming {
  double step_s = 0;
  double wall_s = 0;
};

// `k` trials of `spec` (seeds apart) trained as one group for `steps` steps.
GroupTiming time_group(Backend& backend, const ModelSpec& spec, const DataSplit& data, int k,
                       int64_t steps) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Model>> models;
  std::vector<FusedTrial> trials;
  for (int t = 0; t < k; ++t) {
    ModelSpec s = spec;
    s.train.seed += static_cast<uint64_t>(t);
    models.push_back(std::make_unique<Model>(s, backend));
    models.back()->init(s.train.seed);
    trials.push_back({models.back().get(), s.train, {}});
  }
  FusedOptions o;
  o.max_steps = steps;
  const double step_s = train_fused(trials, data, o)[0].step_ms.median * 1e-3;
  return {step_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

}  // namespace

int measure_fuse_cap(Backend& backend, const ModelSpec& spec, const DataSplit& data, int cap,
                     const FuseProbe& probe, std::vector<ParallelOption>& options) {
  std::vector<int> sizes;
  for (int k = 4; k < cap; k *= 4) sizes.push_back(k);
  sizes.push_back(cap);
  if (sizes.size() < 2) return cap;  // nothing to choose between
  // One trial's step first: a group of k is taken to take k times as long, or the last group
  // timed times its share more where that is less (a group timed while the machine was busy is
  // not held against the next), and is timed over as many steps as the budget holds (at least
  // kMinProbeSteps; a group that cannot have them is not tried).
  // Twice: the first pays this process's one-time costs (OpenMP's threads started, pages first
  // touched), which a trial's set-up does not: measured, they made the first timing long enough
  // to hold a group of 16 disc-2 trials out of a budget it fits (docs/benchmarks.md, "Profiles
  // packed at build time, and what a search writes").
  const GroupTiming first = time_group(backend, spec, data, 1, kMinProbeSteps);
  GroupTiming one = time_group(backend, spec, data, 1, kMinProbeSteps);
  one.wall_s = std::min(one.wall_s, first.wall_s);
  const double one_s = one.step_s;
  // A timing cut short by a stop (Ctrl-C while the sizes are timed) measured nothing: no option
  // is recorded from it (a NaN written as null made the record unreadable to the same command).
  if (!(one_s > 0) || !std::isfinite(one_s)) return sizes.back();
  // What a trial's setting up costs the probe (its model, initial weights, its share of the
  // group's plan), paid again for each trial of every group timed: a search of a few milliseconds'
  // training is not held up by timings that would cost more than they could save.
  const double setup_s = std::max(0.0, one.wall_s - static_cast<double>(kMinProbeSteps) * one_s);
  const double budget_s =
      std::min(probe.budget_s, kFuseProbeShare * one_s * static_cast<double>(probe.search_steps));
  if (!can_compare_sizes(setup_s, budget_s, sizes)) return sizes.back();
  const int64_t batch = std::min(spec.train.batch, data.train.samples);
  double last_s = one_s;
  int last_k = 1;
  for (const int k : sizes) {
    const double predicted_s = std::min(one_s * k, last_s * k / last_k);
    const double fixed_s = setup_s * k;
    if (fixed_s + predicted_s * kMinProbeSteps > budget_s) break;
    if (options.empty() && probe.measuring) probe.measuring();
    const auto n = std::clamp<int64_t>(static_cast<int64_t>((budget_s - fixed_s) / predicted_s),
                                       kMinProbeSteps, std::max(probe.steps, kMinProbeSteps));
    const double step_s = time_group(backend, spec, data, k, n).step_s;
    if (!(step_s > 0) || !std::isfinite(step_s)) break;  // cut short by a stop
    last_s = step_s;
    last_k = k;
    options.push_back({k, 0, static_cast<double>(k * batch) / last_s, {}});
  }
  return choose_fuse_size(options, sizes);
}

int choose_fuse_size(const std::vector<ParallelOption>& options, const std::vector<int>& sizes) {
  if (options.empty()) return sizes.back();
  double best = 0;
  for (const ParallelOption& o : options) best = std::max(best, o.samples_per_second);
  int chosen = options.front().k;
  for (const ParallelOption& o : options) {
    if (o.samples_per_second >= 0.95 * best) chosen = std::max(chosen, o.k);
  }
  // Sizes the budget did not reach are taken as fast as the largest one timed: where that one is
  // chosen, the largest size is, one group where there would be several.
  if (chosen == options.back().k && options.size() < sizes.size()) return sizes.back();
  return chosen;
}

bool can_compare_sizes(double setup_s, double budget_s, const std::vector<int>& sizes) {
  return sizes.size() >= 2 && setup_s * sizes[1] <= budget_s;
}

int trial_threads(int threads, int cores, int k) {
  return threads > 0 ? threads : std::max(1, cores / k);
}

void choose_parallel(std::vector<ParallelChoice>& choices, const std::vector<std::string>& devices,
                     const ParallelSettings& s) {
  // Only this process's devices: a search stopped under MPI recorded its ranks' slots, which a
  // search going on without a launcher (or on other hosts) does not have.
  std::vector<ParallelChoice> chosen;
  for (const std::string& d : devices) {
    const std::string id = make_backend(parse_device(d, 0))->info().id;
    const auto known = std::find_if(choices.begin(), choices.end(),
                                    [&](const ParallelChoice& c) { return c.device == id; });
    const int fused = device_kind_of(id) == DeviceKind::Cpu ? s.fused_cpu : s.fused_gpu;
    if (s.parallel > 0) {
      chosen.push_back({id, s.parallel, false, {}, fused});
    } else if (fused > 0) {
      const bool probed = device_kind_of(id) == DeviceKind::Cpu && !s.fused_options.empty();
      chosen.push_back(
          {id, 1, probed, probed ? s.fused_options : std::vector<ParallelOption>{}, fused});
    } else if (known != choices.end() && known->measured) {
      chosen.push_back(*known);  // measured before a restart
    } else {
      chosen.push_back(measure_choice(s, id));
    }
  }
  choices = std::move(chosen);
}

}  // namespace xo

// The fused training loop against one trial's loop (train/trials.h): for each built-in model and
// each K, K trials (learning rates and seeds apart) trained as one fused group, in this process,
// against one trial trained alone by train_model as `crossover train` runs it. Reported: the
// trials x steps per second of each (the median step time of an epoch's full batches, the first
// step left out), and their ratio; and the fused step `advise --trials` predicts for this device
// (predict_fused_with_profile, from the profiles advise uses: this machine's cached one, else the
// shipped ones), against the measured one. No process start, no data loading: the loop alone.
// "rounds": the lowest and highest of the rounds' ratios (each round's fused group against its
// own trial alone). "at peak": the ratio a fused loop running at the matmul peak probed in the
// same run (at the device's precision: --device cpu:bf16 probes bf16) would reach (the peak over
// one trial's achieved FLOP/s alone): no kernel can go past it.
// --repeat N runs N rounds (alone, then each K) and reports the medians of the rounds' medians:
// this VM's speed moves from one process (and second) to the next.
//   build/bench/crossover_fused_trials [--models disc-2,disc-4,SPEC.toml] [--k 1,4,16,64]
//                                      [--steps 300] [--threads 2] [--device cpu|cuda:0]
//                                      [--repeat 5] [--json FILE]
//                                      [--stepping together|one-after-another|side-by-side]
// --stepping: how the fused groups step (model/fused_network.h), in place of fused_stepping's
// choice.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "advisor/advice.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "data/source.h"
#include "measure/peaks.h"
#include "model/fused_network.h"
#include "model/model.h"
#include "train/memory.h"
#include "train/trainer.h"
#include "train/trials.h"

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    parts.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

xo::ModelSpec trial(const xo::ModelSpec& base, int t) {
  xo::ModelSpec s = base;
  s.train.optimizer.lr *= 1.0 + 0.01 * t;
  s.train.seed += static_cast<uint64_t>(t);
  return s;
}

// One trial alone, as `crossover train` runs it (the backend's own shards and threads).
xo::TrainResult alone_step(const xo::ModelSpec& base, const xo::DataSplit& data, xo::Backend& be,
                           int64_t steps) {
  const xo::ModelSpec one = trial(base, 0);
  xo::Model model(one, be);
  model.init(one.train.seed);
  xo::ExecutionOptions exec;
  exec.max_steps = steps;
  return xo::train_model(model, data, one.train, {}, exec);
}

// K trials (learning rates and seeds apart) as one fused group; trial 1's result (the group's
// step times).
xo::TrainResult fused_step(const xo::ModelSpec& base, const xo::DataSplit& data, xo::Backend& be,
                           int k, int64_t steps, std::optional<xo::FusedStepping> stepping) {
  std::vector<xo::ModelSpec> specs;
  std::vector<std::unique_ptr<xo::Model>> models;
  std::vector<xo::FusedTrial> trials;
  for (int t = 0; t < k; ++t) specs.push_back(trial(base, t));
  for (int t = 0; t < k; ++t) {
    models.push_back(std::make_unique<xo::Model>(specs[t], be));
    models.back()->init(specs[t].train.seed);
    trials.push_back({models.back().get(), specs[t].train, {}});
  }
  xo::FusedOptions options;
  options.max_steps = steps;
  options.stepping = stepping;
  return xo::train_fused(trials, data, options)[0];
}

// `value` of `flag` as a whole number of at least `least`; else says what was expected and exits.
int64_t whole_number(const std::string& flag, const std::string& value, int64_t least) {
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || n < least) {
    std::fprintf(stderr, "%s %s: expected a whole number of at least %lld\n", flag.c_str(),
                 value.c_str(), static_cast<long long>(least));
    std::exit(2);
  }
  return n;
}

// --stepping's value: a FusedStepping's name with dashes for spaces; else exits.
xo::FusedStepping stepping_named(const std::string& value) {
  for (const xo::FusedStepping s : {xo::FusedStepping::Together, xo::FusedStepping::OneAfterAnother,
                                    xo::FusedStepping::SideBySide}) {
    std::string name = xo::fused_stepping_name(s);
    std::replace(name.begin(), name.end(), ' ', '-');
    if (name == value) return s;
  }
  std::fprintf(stderr, "--stepping %s: expected together, one-after-another or side-by-side\n",
               value.c_str());
  std::exit(2);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> models = {"disc-2", "disc-3", "disc-4",    "disc-5",   "disc-6",
                                     "disc-7", "disc-8", "mnist-mlp", "mnist-cnn"};
  std::vector<int> ks = {1, 4, 16, 64};
  int64_t steps = 300;  // per run: the step times' medians leave the first step out
  int threads = 0;
  std::string device = "cpu";
  std::string json_path;
  int repeat = 1;  // rounds; each figure the median of its rounds' medians
  std::optional<xo::FusedStepping> stepping;  // unset: fused_stepping's
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 == argc) {
      std::fprintf(stderr, "%s: expected a value after it\n", flag.c_str());
      return 2;
    }
    const std::string value = argv[i + 1];
    if (flag == "--models") {
      models = split(value);
    } else if (flag == "--k") {
      ks.clear();
      for (const std::string& k : split(value)) {
        ks.push_back(static_cast<int>(whole_number(flag, k, 1)));
      }
    } else if (flag == "--steps") {
      steps = whole_number(flag, value, 2);  // the first step is left out of the medians
    } else if (flag == "--threads") {
      threads = static_cast<int>(whole_number(flag, value, 0));
    } else if (flag == "--device") {
      device = value;
    } else if (flag == "--repeat") {
      repeat = static_cast<int>(whole_number(flag, value, 1));
    } else if (flag == "--json") {
      json_path = value;
    } else if (flag == "--stepping") {
      stepping = stepping_named(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  // Where the results go, checked before the runs: a missing folder would lose them at the end.
  if (const std::filesystem::path dir = std::filesystem::path(json_path).parent_path();
      !json_path.empty() && !dir.empty() && !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "--json %s: no folder %s to write it in\n", json_path.c_str(),
                 dir.c_str());
    return 2;
  }
  // Each model a built-in one or a spec file (a name ending in .toml), read before the runs.
  std::vector<xo::ModelSpec> specs;
  for (const std::string& name : models) {
    if (name.ends_with(".toml")) {
      try {
        specs.push_back(xo::load_spec_file(name));
      } catch (const xo::UserError& e) {
        std::fprintf(stderr, "--models: %s\n", e.what());
        return 2;
      }
    } else if (const auto spec = xo::builtin_spec(name)) {
      specs.push_back(*spec);
    } else {
      std::fprintf(stderr,
                   "--models: no built-in model '%s' (`crossover models` lists them) and not a "
                   "spec file (NAME.toml)\n",
                   name.c_str());
      return 2;
    }
  }
  auto be = xo::make_backend(xo::parse_device(device, threads));
  // The peak probed now, in this run: it moves from day to day on this VM.
  const xo::DevicePeaks peaks = xo::device_peaks(*be, true, xo::default_peaks_cache());
  fmt::print("{} ({}, {} threads), {} matmul peak {:.0f} GFLOP/s\n", be->info().name, be->info().id,
             be->info().threads, peaks.precision.empty() ? "f32" : peaks.precision,
             peaks.matmul_gflops);
  // What advise predicts here for K fused trials.
  xo::AdviceOptions advice = xo::with_profiles({});
  fmt::print("{:<10} {:>4} {:>12} {:>16} {:>16} {:>8} {:>11} {:>8} {:>10} {:>13} {:>7}\n", "model",
             "K", "step ms", "trial-steps/s", "alone steps/s", "ratio", "rounds", "at peak", "MiB",
             "predicted ms", "error");
  nlohmann::json rows = nlohmann::json::array();
  for (const xo::ModelSpec& base : specs) {
    const std::string& name = base.name;
    const xo::Model probe(base, *be);
    const xo::DataSplit data = xo::load_data(base.data, xo::data_request(base, probe.classes()));
    // Rounds: one trial alone, then each K fused, so that a round's runs see the same machine.
    std::vector<double> alone_ms;
    std::vector<std::vector<double>> fused_ms(ks.size());
    std::vector<xo::TrainResult> first_fused(ks.size());
    std::vector<std::string> refused(ks.size());
    for (int round = 0; round < repeat; ++round) {
      alone_ms.push_back(alone_step(base, data, *be, steps).step_ms.median);
      for (size_t i = 0; i < ks.size(); ++i) {
        if (!refused[i].empty()) continue;
        try {
          const xo::TrainResult fused = fused_step(base, data, *be, ks[i], steps, stepping);
          fused_ms[i].push_back(fused.step_ms.median);
          if (round == 0) first_fused[i] = fused;
        } catch (const xo::UserError& e) {  // more trials than the memory holds, say
          refused[i] = e.what();
        }
      }
    }
    const double alone_median = median(alone_ms);
    const double alone_rate = 1e3 / alone_median;
    for (size_t i = 0; i < ks.size(); ++i) {
      const int k = ks[i];
      if (!refused[i].empty()) {
        fmt::print("{:<10} {:>4} refused: {}\n", name, k, refused[i]);
        rows.push_back({{"model", name}, {"k", k}, {"refused", refused[i]}});
        continue;
      }
      const xo::TrainResult& fused = first_fused[i];
      const double step_ms = median(fused_ms[i]);
      const double rate = k * 1e3 / step_ms;
      // Each round's ratio (its fused group against its own trial alone): their spread.
      std::vector<double> round_ratios;
      for (size_t r = 0; r < fused_ms[i].size(); ++r)
        round_ratios.push_back(k * alone_ms[r] / fused_ms[i][r]);
      const auto [lo, hi] = std::minmax_element(round_ratios.begin(), round_ratios.end());
      // The ratio a fused loop at the probed peak would reach: beyond it no kernel can go.
      const double alone_gflops = fused.flops_per_step / (alone_median * 1e-3) / 1e9;
      const double ceiling = peaks.matmul_gflops / alone_gflops;
      advice.trials = k;
      const auto predicted =
          xo::profiled_step(base, fused.batch, xo::local_target(be->info(), peaks, advice), advice);
      const double predicted_ms = predicted ? predicted->step.seconds * 1e3 : 0;
      const xo::Model one(base, *be);
      const xo::MemoryEstimate memory = xo::fused_memory(one, data, base.train, k);
      fmt::print(
          "{:<10} {:>4} {:>12.4f} {:>16.0f} {:>16.0f} {:>7.2f}x {:>11} {:>7.1f}x {:>10.1f} "
          "{:>13.4f} {:>6.0f}%\n",
          name, k, step_ms, rate, alone_rate, rate / alone_rate,
          fmt::format("{:.1f}-{:.1f}x", *lo, *hi), ceiling, memory.total() / 1048576.0,
          predicted_ms, 100 * (predicted_ms / step_ms - 1));
      std::fflush(stdout);
      rows.push_back({{"model", name},
                      {"k", k},
                      {"fused_step_ms", step_ms},
                      {"fused_step_rounds_ms", fused_ms[i]},
                      {"fused_step_p10_ms", fused.step_ms.p10},
                      {"fused_step_p90_ms", fused.step_ms.p90},
                      {"trial_steps_per_second", rate},
                      {"alone_step_ms", alone_median},
                      {"alone_step_rounds_ms", alone_ms},
                      {"alone_steps_per_second", alone_rate},
                      {"alone_gflops", alone_gflops},
                      {"ratio", rate / alone_rate},
                      {"ratio_rounds", round_ratios},
                      {"ratio_at_peak", ceiling},
                      {"trial_flops_per_step", fused.flops_per_step},
                      {"estimated_bytes", memory.total()},
                      {"predicted_step_ms", predicted_ms},
                      {"predicted_from", predicted ? predicted->from->id : ""},
                      {"fused_gflops", k * fused.flops_per_step / (step_ms * 1e-3) / 1e9}});
    }
  }
  if (!json_path.empty()) {
    nlohmann::json doc{{"machine", be->info().name},
                       {"device", be->info().id},
                       {"threads", be->info().threads},
                       {"matmul_peak_gflops", peaks.matmul_gflops},
                       {"steps", steps},
                       {"repeat", repeat},
                       {"rows", rows}};
    xo::write_file_atomic(json_path, doc.dump(2) + "\n");
  }
  return 0;
}

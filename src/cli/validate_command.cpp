// `crossover validate`: predictions against measurements. A device here (the CPU by default) is
// profiled (or its cached profile read), the built-in models are measured on it, and every device
// with measured steps (this one and the profiles crossover ships, data/profiles/) is predicted
// from its own profile and from every other: the leave-one-out table, with the median and worst
// absolute error. `--write-profile` writes this device's profile and measurements as a
// data/profiles file.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "advisor/profile_predict.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "dist/process.h"
#include "measure/peaks.h"
#include "measure/profile.h"
#include "measure/sampler.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/terminal.h"
#include "train/stats.h"

namespace xo::cli {

std::string machine_line(const MachineInfo& m) {
  return fmt::format("{}, {} logical CPUs, {:.0f} GiB, {}", m.cpu,
                     m.logical_cpus ? std::to_string(*m.logical_cpus) : "?",
                     m.memory_gib.value_or(0.0), m.os);
}

DeviceProfile local_profile(Backend& be, bool reprofile, Progress* progress,
                            const std::vector<std::string>& models) {
  const DevicePeaks peaks = device_peaks(be, false, default_peaks_cache());
  const bool whole = models.empty();
  if (!reprofile && whole) {
    if (auto cached = cached_profile(be.info(), default_profile_cache())) return *cached;
  }
  std::vector<ModelSpec> specs;
  for (const std::string& name : whole ? builtin_spec_names() : models) {
    const std::optional<ModelSpec> spec = builtin_spec(name);
    if (!spec) {
      throw UserError(
          fmt::format("--models: '{}' is not a built-in model (crossover models)", name));
    }
    specs.push_back(*spec);
  }
  for (ModelSpec& s : measure_grid_specs()) specs.push_back(std::move(s));
  const CpuTimes before = read_cpu_times();
  DeviceProfile p = measure_profile(
      be, peaks, specs, machine_line(describe_machine()), [&](size_t done, size_t total) {
        if (progress) {
          progress->bar(static_cast<double>(done) / static_cast<double>(total),
                        fmt::format("profiling {}", be.info().id));
        }
      });
  if (progress) progress->clear();
  std::string id;
  const std::string name =
      p.threads > 0 ? fmt::format("{}-{}t", p.name, p.threads) : p.name;  // a GPU: no threads
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      id += static_cast<char>(std::tolower(u));
    } else if (!id.empty() && id.back() != '-') {
      id += '-';
    }
  }
  p.id = id;
  if (!whole) return p;  // a profile of some models only is not the device's: not cached
  if (const auto busy = contaminating_load_since(before)) {
    fmt::print(stderr,
               "warning: the {} profile was measured while other processes kept {:.1f} cores busy: "
               "its kernels read slow, and it is not cached (measure again on a quiet machine)\n",
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

std::string validation_markdown(const std::vector<ValidationRow>& rows) {
  std::string md =
      "| device | predicted from | model | predicted ms | measured ms | error |\n"
      "|---|---|---|---:|---:|---:|\n";
  for (const ValidationRow& r : rows) {
    if (r.entries.empty()) {
      md += fmt::format("| {} | {} | all | unmeasured | | {} |\n", r.device, r.how, r.unmeasured);
      continue;
    }
    for (const auto& e : r.entries) {
      md +=
          fmt::format("| {} | {} | {}{} | {:.4g} | {:.4g} | {:+.1f}% |\n", r.device, r.how, e.model,
                      e.unprofiled ? fmt::format(" ({} kernel(s) of a kind not in the profile: "
                                                 "their roofline)",
                                                 e.unprofiled)
                                   : "",
                      e.predicted_ms, e.measured_ms, 100 * e.error());
    }
    md += fmt::format(
        "| {} | {} | **median / worst** | | | **{:.1f}% / {:.1f}%**{} |\n", r.device, r.how,
        100 * r.median_abs, 100 * r.worst_abs,
        r.spread > 0 ? fmt::format(" (runs moved by up to {:.1f}%)", 100 * r.spread) : "");
  }
  return md;
}

namespace {

// A new folder under the system's temporary folder.
std::filesystem::path make_temp_dir(const std::string& stem) {
  std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data())) {
    throw UserError(
        fmt::format("could not create a temporary folder {}: {}", pattern, std::strerror(errno)));
  }
  return pattern;
}

struct ValidateOptions {
  std::string device = "cpu";
  int threads = 0;
  int64_t steps = 200;
  int repeat = 5;
  std::vector<std::string> models;
  bool reprofile = false;
  std::string write_profile, markdown, json;
  bool shipped_only = false;  // measure nothing: the table of the shipped profiles
};

// The validation table of `profiles` written as the options ask, printed with `header`.
void report_validation(const std::vector<ValidationRow>& rows, const ValidateOptions& o,
                       const std::string& header) {
  fmt::print("{}{}", header, validation_text(rows));
  if (!o.markdown.empty()) write_file_atomic(o.markdown, validation_markdown(rows));
  if (!o.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const ValidationRow& r : rows) j.push_back(validation_json(r));
    write_file_atomic(o.json, j.dump(1) + "\n");
  }
}

int run_validate(const ValidateOptions& o) {
  for (const std::string* path : {&o.write_profile, &o.markdown, &o.json}) {
    if (!path->empty()) check_writable_path(*path, "output file");
  }
  if (o.shipped_only) {
    if (!o.write_profile.empty() || !o.models.empty() || o.reprofile) {
      throw UserError(
          "--shipped-only measures nothing: it takes no --write-profile, --models or --reprofile");
    }
    report_validation(validate_profiles(shipped_profiles()), o,
                      "The shipped profiles (data/profiles/), nothing measured here.\n");
    return 0;
  }
  auto be = make_backend(parse_device(o.device, o.threads));
  Progress progress;
  DeviceProfile here = local_profile(*be, o.reprofile, &progress, o.models);
  const std::vector<std::string> models = o.models.empty() ? builtin_spec_names() : o.models;
  here.measured.clear();
  const std::filesystem::path work = make_temp_dir("crossover-validate");
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{work};
  // Each model in a process of its own, as `crossover train` measures it, in `--repeat` rounds
  // over all the models: the fastest of its runs' median steps. A shared host's neighbours come
  // and go in phases (of seconds to a minute here) that slow memory-heavy steps by up to half;
  // rounds spread each model's runs over the whole measurement, and the profile's samples
  // likewise keep the faster of two passes, so both sides are the device without them.
  std::vector<std::vector<double>> medians(models.size());
  std::vector<int64_t> batches(models.size());
  for (int r = 0; r < o.repeat; ++r) {
    for (size_t i = 0; i < models.size(); ++i) {
      progress.bar(static_cast<double>(r * models.size() + i) /
                       static_cast<double>(o.repeat * models.size()),
                   fmt::format("measuring {} (round {} of {})", models[i], r + 1, o.repeat));
      const std::filesystem::path json = work / fmt::format("{}-{}.json", models[i], r);
      const int code = run_child({"train", models[i], "--device", o.device, "--steps",
                                  std::to_string(o.steps), "--threads", std::to_string(o.threads),
                                  "--checkpoint-every", "off", "--json", json.string()},
                                 work / "log.txt");
      if (stop_requested()) return 130;
      if (code != 0) {
        std::string log = read_file(work / "log.txt");
        while (!log.empty() && log.back() == '\n') log.pop_back();
        log = log.substr(log.rfind('\n') == std::string::npos ? 0 : log.rfind('\n') + 1);
        throw UserError(fmt::format("measuring {}: `crossover train` exited with {}: {}", models[i],
                                    code, log));
      }
      const TrainResult result = read_train_result(read_file(json), json.string());
      medians[i].push_back(result.step_ms.median);
      batches[i] = result.batch;
    }
  }
  for (size_t i = 0; i < models.size(); ++i) {
    const auto [fastest, slowest] = std::minmax_element(medians[i].begin(), medians[i].end());
    here.measured.push_back(
        {models[i], batches[i], *fastest,
         fmt::format("fastest median step of {} runs of crossover train {} --steps {}, in rounds "
                     "over the models (slowest {:.3g} ms; {})",
                     o.repeat, models[i], o.steps, *slowest, utc_now().substr(0, 10)),
         "", *slowest});
  }
  progress.clear();
  std::vector<DeviceProfile> profiles;
  if (!o.models.empty()) here.id += "-subset";  // beside the shipped profile of this device
  for (DeviceProfile& p : shipped_profiles()) {
    if (p.id != here.id) profiles.push_back(std::move(p));
  }
  profiles.insert(profiles.begin(), here);
  std::vector<ValidationRow> rows = validate_profiles(profiles);
  if (!o.models.empty()) {
    // A profile of some models only stands for its own measurements, not for other devices.
    std::erase_if(rows, [&](const ValidationRow& r) { return r.from == here.id && !r.own; });
  }
  report_validation(rows, o, fmt::format("{} is this machine, measured now.\n", here.id));
  if (!o.write_profile.empty()) write_file_atomic(o.write_profile, to_json(here).dump(1) + "\n");
  return 0;
}

}  // namespace

Command add_validate(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand(
      "validate",
      "Predicted step times against measured ones: a device here profiled and the built-in "
      "models measured on it, and every shipped device profile, each predicted from its own "
      "profile and from the others");
  sub->add_option("--device", o->device, "The device to profile and measure (cpu, cuda:N)");
  sub->add_option("--threads", o->threads, "CPU threads (default: all)")
      ->check(CLI::Range(0, 4096));
  sub->add_option("--steps", o->steps, "Training steps measured per model")
      ->check(CLI::Range(int64_t{5}, int64_t{1'000'000}));
  sub->add_option("--repeat", o->repeat, "Runs per model (the fastest of their median steps)")
      ->check(CLI::Range(1, 100));
  sub->add_option("--models", o->models, "Built-in models to measure (default: all)")
      ->delimiter(',');
  sub->add_flag("--reprofile", o->reprofile,
                "Measure the profile again rather than read the cache");
  sub->add_option("--write-profile", o->write_profile,
                  "Write this machine's profile and measurements (a data/profiles/ file)");
  sub->add_option("--markdown", o->markdown, "Write the table, model by model, as Markdown");
  sub->add_option("--json", o->json, "Write the table as JSON");
  sub->add_flag("--shipped-only", o->shipped_only,
                "Measure nothing: the table of the profiles crossover ships (data/profiles/)");
  return {sub, [o] { return run_validate(*o); }};
}

}  // namespace xo::cli

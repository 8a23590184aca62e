// `crossover models` and `crossover devices`: what can be trained, and where.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/format.h"
#include "job/devices.h"
#include "measure/nvml.h"
#include "measure/peaks.h"
#include "measure/profile.h"
#include "model/model.h"
#include "model/work.h"
#include "report/machine.h"
#include "report/table.h"

namespace xo::cli {

namespace {

// `models --show NAME`: the spec as a TOML file holds it (a built-in's, or any spec or ONNX model
// the commands take), to copy and edit.
int show_model(const std::string& name) {
  const ModelSpec spec = resolve_spec(name);
  fmt::print("# {}: {} layers, {} parameters ({})\n{}", terminal_safe(spec.name),
             weighted_layers(spec), group_digits(parameter_count(spec)),
             spec.origin == "built-in" ? "built in; `crossover models --show NAME > my.toml` to "
                                         "edit a copy"
                                       : terminal_safe(spec.origin),
             to_toml(spec));
  return 0;
}

int run_models(const std::string& show) {
  if (!show.empty()) return show_model(show);
  Table table({"name", "layers", "params", "optimizer", "batch", "epochs", "data"});
  for (const auto& name : builtin_spec_names()) {
    const ModelSpec s = *builtin_spec(name);
    table.add_row(
        {name, std::to_string(weighted_layers(s)), std::to_string(parameter_count(s)),
         fmt::format("{} lr {}", optimizer_type_name(s.train.optimizer.type), s.train.optimizer.lr),
         std::to_string(s.train.batch), std::to_string(s.train.epochs), s.data.source});
  }
  fmt::print("{}", table.render());
  fmt::print(
      "`crossover models --show NAME` prints one as a spec file (they are in specs/); `crossover "
      "train FILE.toml` trains your own.\n");
  return 0;
}

struct DevicesOptions {
  bool no_probe = false, reprobe = false, profile = false, reprofile = false;
};

int run_devices(const DevicesOptions& o) {
  const DevicesOutcome found = devices_job(!o.no_probe, o.reprobe);
  for (const DeviceEntry& e : found.devices) {
    const DeviceInfo& d = e.info;
    fmt::print("{}: {}\n  threads: {}\n  library: {}\n", d.id, d.name, d.threads, d.library);
    for (const auto& [k, v] : d.details) fmt::print("  {}: {}\n", k, v);
    if (!e.peaks) continue;
    const DevicePeaks& p = *e.peaks;
    fmt::print(
        "  measured peak: {:.1f} GFLOP/s {} matmul ({}^3), {:.1f} GB/s memory, fixed costs "
        "{:.2f} us per step + {:.2f} us per layer ({} {}{})\n",
        p.matmul_gflops, p.precision.empty() ? "f32" : p.precision, p.matmul_n, p.bandwidth_gbs,
        p.step_overhead_us, p.layer_overhead_us, p.cached ? "cached from" : "probed", p.probed,
        p.cached ? "; --reprobe measures again" : "");
    if (e.bf16_peaks) {
      const DevicePeaks& b = *e.bf16_peaks;
      fmt::print(
          "  measured bf16 peak ({}): {:.1f} GFLOP/s bf16 matmul ({}^3, {:.2f}x f32; {} {})\n",
          cpu_bf16_unit(), b.matmul_gflops, b.matmul_n, b.matmul_gflops / p.matmul_gflops,
          b.cached ? "cached from" : "probed", b.probed);
    } else if (d.kind == DeviceKind::Cpu) {
      fmt::print("  bf16: no AMX or AVX-512 BF16 here (--precision bf16 is refused)\n");
    }
    if (!o.profile && !o.reprofile) continue;
    auto backend = make_backend(parse_device(d.id, 0));
    Progress progress;
    const DeviceProfile profile = local_profile(
        *backend, {o.reprofile, {}, machine_line(describe_machine())},
        [&](double fraction, const std::string& text) { progress.bar(fraction, text); });
    progress.clear();
    double shown = 0;
    for (const KernelSample& s : profile.samples) shown += s.total_us();
    fmt::print(
        "  profile {}: {} kernel samples ({:.1f} ms of kernels), step fixed cost {:.2f} us{}, "
        "measured {} ({}; --reprofile measures again)\n",
        profile.id, profile.samples.size(), shown / 1e3, profile.step_fixed_us,
        profile.policy.shard_threads > 1
            ? fmt::format(", {} shards' parallel region {:.2f} us", profile.policy.shard_threads,
                          profile.shard_fork_us)
            : "",
        profile.date, terminal_safe(default_profile_cache().string()));
  }
  const Nvml& nvml = Nvml::get();
  fmt::print("NVML: {}\n",
             nvml.available()
                 ? fmt::format("driver {}, {} GPU(s)", nvml.driver_version(), nvml.device_count())
                 : "n/a (" + nvml.why() + ")");
  for (const auto& why : found.unavailable) fmt::print("not available: {}\n", why);
  return 0;
}

}  // namespace

Command add_models(CLI::App& app) {
  auto show = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("models", "List the built-in model specs");
  sub->add_option("--show", *show,
                  "Print this model's spec (a built-in name, a TOML spec or an ONNX model) as a "
                  "TOML file");
  return {sub, [show] { return run_models(*show); }};
}

Command add_devices(CLI::App& app) {
  auto o = std::make_shared<DevicesOptions>();
  CLI::App* sub = app.add_subcommand(
      "devices", "List the devices this build can train on here, with their measured peaks");
  CLI::Option* no_probe =
      sub->add_flag("--no-probe", o->no_probe, "Do not measure (or read the cached) peaks");
  sub->add_flag("--reprobe", o->reprobe, "Measure the peaks again rather than read the cache");
  CLI::Option* profile =
      sub->add_flag("--profile", o->profile,
                    "Measure (or read the cached) device profile predictions start from: every "
                    "kernel of the built-in models and of a grid of MLPs, timed as the engine runs "
                    "them (about a minute and a half on a 2-core CPU)");
  CLI::Option* reprofile = sub->add_flag("--reprofile", o->reprofile,
                                         "Measure the profile again rather than read the cache");
  profile->excludes(no_probe);
  reprofile->excludes(no_probe);
  return {sub, [o] { return run_devices(*o); }};
}

}  // namespace xo::cli

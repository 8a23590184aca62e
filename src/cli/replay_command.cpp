// `crossover replay RESULTS.json`: the job a results.json recorded, run again here from its
// manifest (the settings) and its runs (each one's spec text, on the same device), then compared
// run by run and figure by figure: bit-identical, within a relative tolerance, or different, with
// what differs between the recorded build and machine and this one.
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "advisor/replay.h"
#include "cli/commands.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "report/files.h"
#include "report/manifest.h"
#include "report/replay_text.h"
#include "report/replayable.h"
#include "report/report_json.h"

namespace xo::cli {
namespace {

// Relative: well above the last bits of an f32 sum that a different order of additions moves
// (~1e-7 relative), well below any change a person would call a different result.
constexpr double kDefaultTolerance = 1e-5;

struct ReplayOptions {
  std::string file;
  double tolerance = kDefaultTolerance;
  std::string out;                   // empty: a fresh folder beside the results
  bool overwrite = false;            // replace a finished job in --out
  std::vector<std::string> devices;  // empty: every device the file has runs on
};

CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(v >= 0)) {
          return "expected a relative tolerance of 0 or more (e.g. 1e-5), got '" + text + "'";
        }
        return "";
      },
      "REL");
}

Report read_results(const std::string& file) {
  const nlohmann::json doc = parse_report_json(read_file(file), file);
  if (doc.is_discarded()) {
    throw UserError(fmt::format("{}: not a crossover results.json (not JSON; expected schema '{}')",
                                file, kReportSchema));
  }
  return read_report(doc, file);
}

// The first of <folder>/replay, replay-2, ... that did not exist, created here: a replay never
// overwrites the results it replays, nor an earlier replay, and two replays started at once get
// two folders (mkdir creates a name or fails, atomically).
std::filesystem::path fresh_replay_folder(const std::filesystem::path& folder) {
  for (int i = 1;; ++i) {
    const std::filesystem::path p = folder / (i == 1 ? "replay" : fmt::format("replay-{}", i));
    if (::mkdir(p.c_str(), 0777) == 0) return p;
    if (errno != EEXIST) {
      throw UserError(fmt::format("{}: cannot create the replay's folder: {}", p.string(),
                                  std::strerror(errno)));
    }
  }
}

std::filesystem::path output_folder(const ReplayOptions& o) {
  std::filesystem::path folder = std::filesystem::path(o.file).parent_path();
  if (folder.empty()) folder = ".";  // a file named without a folder is in the current one
  if (o.out.empty()) return fresh_replay_folder(folder);
  const auto canonical = [](const std::filesystem::path& p) {
    return std::filesystem::weakly_canonical(std::filesystem::absolute(p));
  };
  if (canonical(o.out) == canonical(folder)) {
    throw UserError(fmt::format(
        "--out {}: the folder of {}: the replay would overwrite the results it replays (leave "
        "--out out for a fresh folder beside them)",
        o.out, o.file));
  }
  return o.out;
}

// Why `device` cannot be used here: the reason list_devices gives for its kind, else that it is
// not on this machine.
std::string why_absent(const std::string& device, const DeviceList& here) {
  const std::string kind = device.substr(0, device.find(':'));
  for (const std::string& why : here.unavailable_reasons) {
    if (why.rfind(kind, 0) == 0) return why;
  }
  return fmt::format("{} is not on this machine (devices here: {})", device,
                     fmt::join(here.available, ", "));
}

std::string settings_text(const ExecutionSettings& m, bool threads_resolved) {
  return fmt::format(
      "settings: epochs {}, {}, threads {}{}, profile steps {}, precision {}, CUDA Graph {}\n",
      m.epochs ? fmt::format("{} (every spec)", *m.epochs) : std::string("as each spec says"),
      m.max_steps > 0 ? fmt::format("at most {} steps", m.max_steps) : std::string("every step"),
      m.threads, threads_resolved ? " (all the recording machine's cores, as recorded)" : "",
      m.profile_steps, m.precision, m.record_step ? "on" : "off");
}

// The recorded runs' devices, in the order their runs come.
std::vector<std::string> recorded_devices(const Report& recorded) {
  std::vector<std::string> devices;
  for (const ReportRun& run : recorded.runs) {
    const std::string& id = run.run.result.device.id;
    if (std::find(devices.begin(), devices.end(), id) == devices.end()) devices.push_back(id);
  }
  return devices;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The devices to replay on: the recorded runs', or those of --devices, where present here; and
// those that are not here, each with why.
struct ReplayDevices {
  std::vector<std::string> here;
  std::vector<std::pair<std::string, std::string>> absent;  // device, why
};

ReplayDevices replay_devices(const Report& recorded, const ReplayOptions& o) {
  const std::vector<std::string> recorded_on = recorded_devices(recorded);
  for (const std::string& d : o.devices) {
    if (!contains(recorded_on, d)) {
      throw UserError(fmt::format("--devices {}: {} has no run on it (its runs are on {})", d,
                                  o.file, fmt::join(recorded_on, ", ")));
    }
  }
  const DeviceList here = list_devices();
  ReplayDevices devices;
  for (const std::string& d : recorded_on) {
    if (!o.devices.empty() && !contains(o.devices, d)) continue;
    if (contains(here.available, d)) {
      devices.here.push_back(d);
    } else {
      devices.absent.emplace_back(d, why_absent(d, here));
    }
  }
  if (devices.here.empty()) {
    throw UserError(
        fmt::format("{}: none of its runs can be replayed here ({})", o.file,
                    devices.absent.empty() ? std::string("no device") : devices.absent[0].second));
  }
  return devices;
}

// The recorded settings. Threads recorded as "every core" replay on as many threads as the
// recording machine had: the thread count decides the batch shards and so the order of sums.
MeasureOptions replay_settings(const Manifest& manifest, const Report& recorded,
                               const std::vector<std::string>& devices, bool& threads_resolved) {
  MeasureOptions m = measure_options(manifest.settings);
  m.settings.devices = devices;
  threads_resolved = false;
  if (m.settings.threads != 0) return m;
  for (const ReportRun& run : recorded.runs) {
    if (run.run.result.device.kind == DeviceKind::Cpu && run.run.result.device.threads > 0) {
      m.settings.threads = run.run.result.device.threads;
      threads_resolved = true;
      break;
    }
  }
  return m;
}

// What is replayed, how, and what differs between the recording build and machine and these.
void print_replay_header(const ReplayOptions& o, const Report& recorded, const Manifest& manifest,
                         const MeasureOptions& m, bool threads_resolved) {
  fmt::print("replay of {}: {} ({} run{}), created {}\n", o.file, recorded.title,
             recorded.runs.size(), recorded.runs.size() == 1 ? "" : "s", recorded.created);
  fmt::print("recorded command: {}\n", manifest.command_line);
  fmt::print("{}", settings_text(m.settings, threads_resolved));
  fmt::print(
      "tolerance: relative {:g}: a figure is within tolerance when |replayed - recorded| <= {:g} x "
      "max(|recorded|, |replayed|) (--tolerance)\n",
      o.tolerance, o.tolerance);
  const MachineInfo machine = describe_machine();
  fmt::print("{}", manifest_differences_text(manifest_differences(
                       manifest, recorded.machine ? &*recorded.machine : nullptr,
                       job_manifest(m, m.settings.devices, {}), machine)));
  if (machine.logical_cpus && m.settings.threads > *machine.logical_cpus &&
      contains(m.settings.devices, "cpu")) {
    fmt::print(
        "note: replaying on {} threads as recorded, more than the {} here: the same batch shards "
        "and order of sums, slower\n",
        m.settings.threads, *machine.logical_cpus);
  }
  std::fflush(stdout);  // before the session's progress on stderr
}

// Replays every recorded run on a device here, in order, each compared with its record as it
// ends; the report written after each. Stops at a stop request. `skipped` counts the runs whose
// data is not here.
std::vector<RunComparison> replay_runs(Session& session, const Report& recorded,
                                       const ReplayOptions& o, const std::filesystem::path& out,
                                       size_t& skipped) {
  const std::vector<std::string>& devices = session.devices();
  size_t jobs = 0;
  for (const ReportRun& run : recorded.runs) jobs += contains(devices, run.run.result.device.id);
  const std::string title = fmt::format("crossover replay: {}", o.file);
  std::vector<RunComparison> compared;
  size_t job = 0;
  for (const ReportRun& run : recorded.runs) {
    const TrainResult& r = run.run.result;
    if (!contains(devices, r.device.id)) continue;
    if (session.stopped()) break;
    ModelSpec spec = parse_spec(run.run.spec_toml, fmt::format("{} (spec_toml of run '{}' on {})",
                                                               o.file, r.model, r.device.id));
    spec.origin = r.origin;
    const RunRecord* replayed = nullptr;
    session.limit_steps(r.steps_taken);  // never more than it recorded (0: not recorded)
    try {
      replayed = session.measure(spec, r.device.id, job++, jobs, run.run.axis, run.run.axis_value);
    } catch (const UserError& e) {  // its data is not here, say: the other runs go on
      fmt::print("{}", skipped_run_text(r.model, r.device.id, e.what()));
      ++skipped;
      continue;
    }
    if (!replayed) break;  // stopped before it trained
    write_report(out, session.report("replay", title, false));
    if (replayed->result.interrupted) break;
    compared.push_back(compare_runs(run.run, *replayed, o.tolerance));
    fmt::print("{}", run_comparison_text(compared.back()));
    std::fflush(stdout);
  }
  return compared;
}

int run_replay(const ReplayOptions& o) {
  const Report recorded = read_results(o.file);
  const Manifest& manifest = check_replayable(recorded, o.file);
  const ReplayDevices devices = replay_devices(recorded, o);
  bool threads_resolved = false;
  MeasureOptions m = replay_settings(manifest, recorded, devices.here, threads_resolved);
  // Created now (a fresh replay folder), once nothing before the work can fail.
  const std::filesystem::path out = output_folder(o);
  m.out = out.string();
  m.overwrite = o.overwrite;
  print_replay_header(o, recorded, manifest, m, threads_resolved);
  size_t skipped = 0;
  for (const auto& [device, why] : devices.absent) {
    for (const ReportRun& run : recorded.runs) {
      if (run.run.result.device.id != device) continue;
      fmt::print("{}", skipped_run_text(run.run.result.model, device, why));
      ++skipped;
    }
  }
  Session session(m);
  const std::vector<RunComparison> compared = replay_runs(session, recorded, o, out, skipped);
  fmt::print("{}", replay_summary_text(compared, skipped, o.tolerance));
  if (!session.runs().empty()) {
    const std::string title = fmt::format("crossover replay: {}", o.file);
    write_report(out, session.report("replay", title, true));  // complete unless interrupted
    fmt::print("report of the replay: {} (and results.json, results.csv)\n",
               (out / "report.html").string());
  }
  if (session.stopped()) {
    fmt::print("interrupted: the runs above were compared, the rest not\n");
    return kExitInterrupted;
  }
  if (compared.empty()) {
    if (o.out.empty()) {  // the fresh folder made for it, empty but for the job's lock
      std::error_code ec;
      std::filesystem::remove(out / kFolderLockName, ec);
      std::filesystem::remove(out, ec);
    }
    throw UserError(fmt::format("{}: no run could be replayed here ({} skipped, each with why above)",
                                o.file, skipped));
  }
  const bool differs = std::any_of(compared.begin(), compared.end(), [](const RunComparison& c) {
    return c.verdict() == Verdict::Different;
  });
  return differs ? kExitReplayDiffers : kExitOk;
}

}  // namespace

Command add_replay(CLI::App& app) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* sub = app.add_subcommand(
      "replay",
      "Run the job a results.json recorded again here, with its specs and settings, and report "
      "per run and per figure whether the outcome is bit-identical, within tolerance, or "
      "different, and what differs between the recorded build and machine and this one");
  sub->add_option("results", o->file, "A results.json written by run, sweep, advise or cost")
      ->required();
  sub->add_option("--tolerance", o->tolerance,
                  "Relative difference under which a figure that is not bit-identical is "
                  "'within tolerance'")
      ->check(non_negative_number())
      ->capture_default_str();
  sub->add_option("--out", o->out,
                  "Folder for the replay's own results.json, results.csv and report.html "
                  "(default: a fresh 'replay' folder beside the results)");
  sub->add_flag("--overwrite", o->overwrite, "Replace the finished job in --out");
  sub->add_option("--devices", o->devices,
                  "Replay only the runs on these devices (default: every recorded device present)")
      ->delimiter(',');
  sub->footer(fmt::format(
      "Exit codes: 0 every run replayed is bit-identical or within tolerance; {} a figure differs; "
      "2 bad input (a file that is not a results.json, one without a manifest or with settings out "
      "of range or beyond the run it recorded, no run replayable here); 130 interrupted.",
      kExitReplayDiffers));
  return {sub, [o] { return run_replay(*o); }};
}

}  // namespace xo::cli

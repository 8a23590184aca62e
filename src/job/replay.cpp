// `crossover replay`'s job (job/replay.h): the recorded job run again here, run by run, and
// compared.
#include "job/replay.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/file.h"
#include "job/hooks.h"
#include "job/session.h"
#include "report/files.h"
#include "report/manifest.h"
#include "report/replay_text.h"
#include "report/replayable.h"
#include "report/report_json.h"

namespace xo {
namespace {

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

std::filesystem::path output_folder(const ReplayJob& o) {
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
  if (device == kCpuBf16) {
    return fmt::format(
        "{}: this CPU has neither AMX nor AVX-512 BF16 as oneDNN sees it, and the run was "
        "recorded at bf16",
        device);
  }
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
      m.node_time_steps, m.precision, m.record_step ? "on" : "off");
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

ReplayDevices replay_devices(const Report& recorded, const ReplayJob& o) {
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
    // The CPU at bf16 is here where the CPU has a bf16 unit (list_devices names the CPU once).
    if (contains(here.available, d) || (d == kCpuBf16 && !cpu_bf16_unit().empty())) {
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
void tell_replay_header(const ReplayJob& o, const Report& recorded, const Manifest& manifest,
                        const MeasureOptions& m, bool threads_resolved, JobHooks& hooks) {
  hooks.result(fmt::format("replay of {}: {} ({} run{}), created {}\n", o.file, recorded.title,
                           recorded.runs.size(), recorded.runs.size() == 1 ? "" : "s",
                           recorded.created));
  hooks.result(fmt::format("recorded command: {}\n", manifest.command_line));
  hooks.result(settings_text(m.settings, threads_resolved));
  hooks.result(fmt::format(
      "tolerance: relative {:g}: a figure is within tolerance when |replayed - recorded| <= {:g} x "
      "max(|recorded|, |replayed|) (--tolerance)\n",
      o.tolerance, o.tolerance));
  const MachineInfo machine = describe_machine();
  hooks.result(manifest_differences_text(
      manifest_differences(manifest, recorded.machine ? &*recorded.machine : nullptr,
                           job_manifest(m, m.settings.devices, {}), machine)));
  if (machine.logical_cpus && m.settings.threads > *machine.logical_cpus &&
      contains(m.settings.devices, "cpu")) {
    hooks.result(fmt::format(
        "note: replaying on {} threads as recorded, more than the {} here: the same batch shards "
        "and order of sums, slower\n",
        m.settings.threads, *machine.logical_cpus));
  }
}

// Replays every recorded run on a device here, in order, each compared with its record as it
// ends; the report written after each. Stops at a stop request. `skipped` counts the runs whose
// data is not here.
std::vector<RunComparison> replay_runs(Session& session, const Report& recorded, const ReplayJob& o,
                                       const std::filesystem::path& out, size_t& skipped,
                                       JobHooks& hooks) {
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
      hooks.result(skipped_run_text(r.model, r.device.id, e.what()));
      ++skipped;
      continue;
    }
    if (!replayed) break;  // stopped before it trained
    write_report(out, session.report("replay", title, false));
    if (replayed->result.interrupted) break;
    compared.push_back(compare_runs(run.run, *replayed, o.tolerance));
    hooks.result(run_comparison_text(compared.back()));
  }
  return compared;
}

}  // namespace

int ReplayOutcome::exit_code() const {
  if (stopped) return kExitInterrupted;
  const bool differs = std::any_of(compared.begin(), compared.end(), [](const RunComparison& c) {
    return c.verdict() == Verdict::Different;
  });
  return differs ? kExitReplayDiffers : kExitOk;
}

ReplayOutcome replay_job(const ReplayJob& o, JobHooks& hooks) {
  const Report recorded = read_results(o.file);
  const Manifest& manifest = check_replayable(recorded, o.file);
  const ReplayDevices devices = replay_devices(recorded, o);
  bool threads_resolved = false;
  MeasureOptions m = replay_settings(manifest, recorded, devices.here, threads_resolved);
  // Created now (a fresh replay folder), once nothing before the work can fail.
  ReplayOutcome outcome;
  outcome.out = output_folder(o);
  m.out = outcome.out.string();
  m.overwrite = o.overwrite;
  m.command_line = o.command_line;
  tell_replay_header(o, recorded, manifest, m, threads_resolved, hooks);
  for (const auto& [device, why] : devices.absent) {
    for (const ReportRun& run : recorded.runs) {
      if (run.run.result.device.id != device) continue;
      hooks.result(skipped_run_text(run.run.result.model, device, why));
      ++outcome.skipped;
    }
  }
  Session session(m, hooks);
  outcome.compared = replay_runs(session, recorded, o, outcome.out, outcome.skipped, hooks);
  hooks.result(replay_summary_text(outcome.compared, outcome.skipped, o.tolerance));
  if (!session.runs().empty()) {
    const std::string title = fmt::format("crossover replay: {}", o.file);
    write_report(outcome.out, session.report("replay", title, true));  // complete unless stopped
    hooks.result(fmt::format("report of the replay: {} (and results.json, results.csv)\n",
                             (outcome.out / "report.html").string()));
  }
  outcome.stopped = session.stopped();
  if (outcome.stopped) {
    hooks.result("interrupted: the runs above were compared, the rest not\n");
    return outcome;
  }
  if (outcome.compared.empty()) {
    if (o.out.empty()) {  // the fresh folder made for it, empty but for the job's lock
      std::error_code ec;
      std::filesystem::remove(outcome.out / kFolderLockName, ec);
      std::filesystem::remove(outcome.out, ec);
    }
    throw UserError(
        fmt::format("{}: no run could be replayed here ({} skipped, each with why above)", o.file,
                    outcome.skipped));
  }
  return outcome;
}

}  // namespace xo

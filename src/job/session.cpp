#include "job/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "advisor/analysis.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "distributed/mpi.h"
#include "job/hooks.h"
#include "job/run_notes.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "model/work.h"
#include "report/report_json.h"
#include "train/data_parallel.h"

namespace xo {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_left(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  if (seconds < 90) return fmt::format("{:.0f} s", seconds);
  if (seconds < 5400) return fmt::format("{:.0f} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600);
}

// `o` with its output folder set to `out`.
MeasureOptions with_out(MeasureOptions o, std::string out) {
  o.out = std::move(out);
  return o;
}

// The finished job an output folder holds ("'TITLE' of DATE"), if its results.json says complete;
// nothing for a folder without one, or with an unfinished or unreadable one (resume_job's cases).
std::optional<std::string> finished_job(const std::filesystem::path& out) {
  const std::filesystem::path results = out / "results.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(results, ec)) return std::nullopt;
  try {
    const nlohmann::json doc = parse_report_json(read_file(results), results.string());
    if (doc.is_discarded()) return std::nullopt;
    const Report earlier = read_report(doc, results.string());
    if (!earlier.complete) return std::nullopt;
    return fmt::format("'{}' of {}", earlier.title, earlier.created);
  } catch (const UserError&) {
    return std::nullopt;  // resume_job names what is wrong with it
  }
}

// The folder a measuring job writes (before it is locked): --out as given; by default
// crossover-results, or, when that holds a finished job, a new folder named by the date and time
// beside it, so that a finished job is never overwritten without --overwrite.
std::string job_folder(const MeasureOptions& o, JobHooks& hooks) {
  const bool given = !o.out.empty();
  const std::string out = given ? o.out : kDefaultOutFolder;
  const std::optional<std::string> finished = finished_job(out);
  if (!finished) return out;
  if (o.overwrite) {
    hooks.note(fmt::format("note: --overwrite: replacing the finished job {} in {}",
                           terminal_safe(*finished), terminal_safe(out)));
    return out;
  }
  if (given) {
    throw UserError(fmt::format(
        "--out {}: holds the finished job {}: --overwrite replaces it, another --out keeps it", out,
        *finished));
  }
  std::string stamp = utc_now();  // 2026-11-23T18:15:02Z -> 20261123-181502
  stamp.erase(std::remove_if(stamp.begin(), stamp.end(),
                             [](char c) { return c == '-' || c == ':' || c == 'Z'; }),
              stamp.end());
  std::replace(stamp.begin(), stamp.end(), 'T', '-');
  std::string dated = fmt::format("{}-{}", out, stamp);
  for (int i = 2; std::filesystem::exists(dated); ++i)
    dated = fmt::format("{}-{}-{}", out, stamp, i);
  hooks.note(fmt::format(
      "note: {} holds the finished job {}: this job writes to {} (--out chooses the folder, "
      "--overwrite replaces)",
      out, terminal_safe(*finished), dated));
  return dated;
}

// The job's options with its --out: rank 0's choice on every rank of an MPI job.
MeasureOptions job_options(const MeasureOptions& o, JobHooks& hooks, const mpi::World* world) {
  if (!world) return with_out(o, job_folder(o, hooks));
  std::string out;
  if (world->rank() == 0) out = job_folder(o, hooks);
  return with_out(o, world->broadcast(out));
}

}  // namespace

Session::Session(const MeasureOptions& o, JobHooks& hooks, const mpi::World* world,
                 bool bf16_beside)
    : lead_(!world || world->rank() == 0),
      hooks_(hooks),
      o_(job_options(o, hooks, world)),
      // Parsed before any work, so that a bad interval fails at once.
      checkpoint_every_(parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every")),
      started_(now_seconds()) {
  if (!lead_) {
    // A follower: rank 0 locks, probes and reports; this rank trains on the CPU beside it.
    devices_ = o.settings.devices.empty() ? std::vector<std::string>{"cpu"} : o.settings.devices;
    for (std::string& d : devices_) d = backend(d).info().id;
    return;
  }
  out_lock_.emplace(o_.out, o_.command_line, "--out");
  if (!out_lock_->unsupported().empty()) {
    hooks_.note(fmt::format("note: --out {}", out_lock_->unsupported()));
  }
  devices_ = o.settings.devices;
  if (devices_.empty()) {
    const DeviceList list = list_devices();
    devices_ = list.available;
    for (const auto& why : list.unavailable_reasons) hooks_.note(fmt::format("note: {}", why));
    // The CPU at the precision a user of its matrix units would train at, beside f32.
    if (bf16_beside && parse_precision(o_.settings.precision) == Precision::F32 &&
        !cpu_bf16_unit().empty()) {
      if (const auto cpu = std::find(devices_.begin(), devices_.end(), "cpu");
          cpu != devices_.end()) {
        devices_.insert(cpu + 1, kCpuBf16);
        bf16_added_ = true;
      }
    }
  }
  machine_ = describe_machine();
  for (std::string& d : devices_) {
    Backend& be = backend(d);
    d = be.info().id;  // "auto" and "cuda" name the device they resolved to
    hooks_.status(fmt::format("probing the peaks of {}...", be.info().id));
    DevicePeaks p = device_peaks(be, o.reprobe, default_peaks_cache());
    hooks_.clear();
    hooks_.note(fmt::format(
        "{}: {} matmul {:.1f} GFLOP/s, memory {:.1f} GB/s, step overhead {:.1f} µs{}", p.device,
        p.precision.empty() ? "f32" : p.precision, p.matmul_gflops, p.bandwidth_gbs,
        p.step_overhead_us, p.cached ? " (cached; --reprobe measures again)" : " (measured now)"));
    peaks_.push_back(std::move(p));
  }
}

bool Session::measures(const ModelSpec& spec, const std::string& device) const {
  return !bf16_added_ || device != kCpuBf16 || bf16_changes_products(spec);
}

Backend& Session::backend(const std::string& device) {
  for (const auto& be : backends_) {
    if (be->info().id == device) return *be;
  }
  const DeviceRequest request = parse_device(device, o_.settings.threads, o_.settings.precision);
  backends_.push_back(make_backend(request));
  // Threads are the CPU's: a GPU's backend takes none (a Session holds one CPU backend at most).
  if (lead_ && !request.note.empty() && backends_.back()->info().kind == DeviceKind::Cpu)
    hooks_.note(fmt::format("note: {}", request.note));
  // "auto" and "cuda" name the device they resolve to from here on.
  return *backends_.back();
}

// The run an earlier process of this job finished of this spec on this device with as many
// ranks, if there is one (resume_job kept it).
std::vector<RunRecord>::iterator Session::earlier_run(const std::string& spec_toml,
                                                      const std::string& device, int ranks) {
  auto found = earlier_.end();
  for (auto it = earlier_.begin(); it != earlier_.end(); ++it) {
    if (it->spec_toml == spec_toml && it->result.device.id == device && it->result.ranks == ranks) {
      found = it;
    }
  }
  return found;
}

// How a run of the job is measured, with its checkpoints in one folder per (model, device) under
// --out, named so that a changed spec never meets an old one.
MeasureSettings Session::settings_for(const ModelSpec& spec, const std::string& spec_toml,
                                      const Backend& be, DataParallel* data_parallel) {
  MeasureSettings settings;
  ExecutionOptions& exec = settings.exec;
  // The per-node profile is rank 0's, after the training (no rank waits on it).
  exec.node_time_steps = lead_ ? o_.settings.node_time_steps : 0;
  exec.max_steps = o_.settings.max_steps;
  if (step_limit_ > 0 && (exec.max_steps <= 0 || step_limit_ < exec.max_steps)) {
    exec.max_steps = step_limit_;
  }
  exec.record_step = o_.settings.record_step;
  exec.stop_on_nan = o_.checkpoint.on_nan == "stop";
  exec.data_parallel = data_parallel;
  exec.checkpoint.every = checkpoint_every_;
  settings.sample_interval_s = o_.sample_interval_s;
  settings.data = o_.arrays;
  if (!exec.checkpoint.every.enabled()) return settings;
  std::string device_name = be.info().id;
  std::replace(device_name.begin(), device_name.end(), ':', '-');
  // A data-parallel run's state is its ranks' (a sweep along ranks trains one spec on each).
  const int ranks = data_parallel ? data_parallel->world().size() : 1;
  if (ranks > 1) device_name += fmt::format("-{}ranks", ranks);
  exec.checkpoint.dir =
      std::filesystem::path(o_.out) / "checkpoints" /
      fmt::format("{}-{}-{}", spec.name, device_name, Hasher().text(spec_toml).hex().substr(0, 8));
  exec.checkpoint.resume = true;  // a folder left by an earlier process of this job
  exec.checkpoint.note = [this](const std::string& m) {
    if (!lead_) return;
    hooks_.clear();
    hooks_.note(fmt::format("crossover: {}", m));
  };
  return settings;
}

// The progress bar of run `job` of `jobs`, with what is left of this run and of the job.
EpochCallback Session::progress_bar(size_t job, size_t jobs, const std::string& label) {
  const double job_start = now_seconds();
  return [this, job, jobs, label, job_start](const EpochRecord& e, int64_t n) {
    const double done = static_cast<double>(e.epoch) / static_cast<double>(n);
    const double fraction = (static_cast<double>(job) + done) / static_cast<double>(jobs);
    const double elapsed = now_seconds() - started_;
    const double this_left = (now_seconds() - job_start) / done * (1 - done);
    hooks_.bar(fraction,
               fmt::format("[{}/{}] {}: epoch {}/{}, loss {:.4f}; this model "
                           "~{} left, all ~{} left",
                           job + 1, jobs, label, e.epoch, n, e.loss, format_left(this_left),
                           format_left(elapsed / fraction * (1 - fraction))));
  };
}

// The run's line on the terminal and the notes after it.
void Session::tell_measured(const std::string& label, const ModelSpec& spec, const RunRecord& run,
                            const CheckpointOptions& checkpoint) const {
  const TrainResult& r = run.result;
  if (const std::string note = batch_note(spec, r.samples); !note.empty()) {
    hooks_.note(fmt::format("note: {}: {}", label, note));
  }
  const DevicePeaks* peaks = find_peaks(peaks_, r.device.id);
  // The training error only where an epoch completed (a --steps run or an early stop has none).
  hooks_.note(fmt::format(
      "{}: {:.4f} ms/step, {:.1f} GFLOP/s{}{}", label, r.step_ms.median, r.gflops,
      peaks ? fmt::format(" ({:.1f}% of peak)",
                          100 * r.gflops / (peaks->matmul_gflops * std::max(1, r.ranks)))
            : "",
      r.epochs.empty() ? std::string(", no epoch completed")
      : std::isnan(r.final_train_error)
          ? fmt::format(", final loss {:.6f}", r.final_loss)
          : fmt::format(", train error {:.2f}%", r.final_train_error)));
  tell_run_notes(hooks_, false, label, run, checkpoint, "the same command continues it");
}

const RunRecord* Session::keep_earlier(std::vector<RunRecord>::iterator earlier,
                                       const std::string& label) {
  hooks_.note(
      fmt::format("{}: kept from the earlier, unfinished run of this job in {}", label, o_.out));
  runs_.push_back(std::move(*earlier));
  earlier_.erase(earlier);
  return &runs_.back();
}

namespace {

// A fused group's record from its first trial's: the work of every trial of the group.
void as_group(RunRecord& run, int trials) {
  const auto k = static_cast<double>(trials);
  StepWork& c = run.work;
  for (LayerWork& l : c.layers) {
    l.flops *= k;
    l.bytes *= k;
  }
  c.optimizer_bytes *= k;
  c.flops *= k;
  c.bytes *= k;
  run.result.flops_per_step *= k;
  run.result.gflops *= k;
}

}  // namespace

const RunRecord* Session::measure_trials(const ModelSpec& spec_in, int trials,
                                         const std::string& device, size_t job, size_t jobs,
                                         const std::string& axis,
                                         std::optional<double> axis_value) {
  XO_ASSERT(trials >= 1 && lead_);
  ModelSpec spec = spec_in;
  if (o_.settings.epochs) spec.train.epochs = *o_.settings.epochs;
  spec.name = fmt::format("{} x{}", spec_in.name, trials);
  Backend& be = backend(device);
  const std::string label = terminal_safe(fmt::format("{} fused on {}", spec.name, be.info().id));
  hooks_.status(fmt::format("[{}/{}] {}: loading data", job + 1, jobs, label));
  const std::string spec_toml = to_toml(spec);
  if (const auto earlier = earlier_run(spec_toml, be.info().id, 1); earlier != earlier_.end()) {
    return keep_earlier(earlier, label);
  }
  MeasureSettings settings = settings_for(spec, spec_toml, be, nullptr);
  settings.exec.checkpoint = {};
  settings.exec.node_time_steps = 0;
  std::vector<FusedRun> runs;
  for (int t = 0; t < trials; ++t) {
    FusedRun run;
    run.spec = spec;
    run.spec.train.seed += static_cast<uint64_t>(t);
    if (t == 0) run.hooks.epoch = progress_bar(job, jobs, label);
    runs.push_back(std::move(run));
  }
  std::vector<RunRecord> records;
  try {
    records = measure_fused(be, runs, settings);
  } catch (const Interrupted& e) {
    hooks_.clear();
    hooks_.note(fmt::format("crossover: {}: stopped while {}", label, terminal_safe(e.what())));
    stopped_ = true;
    return nullptr;
  }
  hooks_.clear();
  RunRecord& run = records.front();
  as_group(run, trials);
  run.axis = axis;
  run.axis_value = axis_value.value_or(trials);
  tell_measured(label, spec, run, settings.exec.checkpoint);
  stopped_ = run.result.interrupted || stop_requested();
  runs_.push_back(std::move(run));
  return &runs_.back();
}

const RunRecord* Session::measure(const ModelSpec& spec_in, const std::string& device, size_t job,
                                  size_t jobs, const std::string& axis, double axis_value,
                                  DataParallel* data_parallel) {
  ModelSpec spec = spec_in;
  if (o_.settings.epochs) spec.train.epochs = *o_.settings.epochs;
  Backend& be = backend(device);
  // The label goes to the terminal (progress, the summary line): the spec's name may be anything.
  const std::string label = terminal_safe(
      fmt::format("{} on {}{}", spec.name, be.info().id,
                  data_parallel ? fmt::format(" ({} ranks)", data_parallel->ranks()) : ""));
  if (lead_) hooks_.status(fmt::format("[{}/{}] {}: loading data", job + 1, jobs, label));
  const std::string spec_toml = to_toml(spec);
  // A run an earlier process of this job finished is kept: rank 0 tells its group so.
  const auto earlier =
      earlier_run(spec_toml, be.info().id, data_parallel ? data_parallel->world().size() : 1);
  if (data_parallel) {
    const bool kept =
        data_parallel->world().broadcast(earlier != earlier_.end() ? "kept" : "") == "kept";
    if (!lead_ && kept) return nullptr;
  }
  if (earlier != earlier_.end()) return keep_earlier(earlier, label);
  const MeasureSettings settings = settings_for(spec, spec_toml, be, data_parallel);
  if (!lead_) {
    // A follower: its slice of every batch; rank 0 records and reports the run.
    const RunRecord run = measure_run(be, spec, settings);
    stopped_ = run.result.interrupted || stop_requested();
    return nullptr;
  }
  // A stop while the data loads or is generated, or while the profile runs: the job ends with
  // the runs finished so far (the trainer itself returns an interrupted run at a step boundary).
  std::optional<RunRecord> measured;
  try {
    RunHooks hooks;
    hooks.epoch = progress_bar(job, jobs, label);
    measured = measure_run(be, spec, settings, hooks);
  } catch (const Interrupted& e) {
    // Across ranks the others may be inside a collective already: the job ends (end_job).
    if (data_parallel) throw;
    hooks_.clear();
    hooks_.note(fmt::format("crossover: {}: stopped while {}", label, terminal_safe(e.what())));
    stopped_ = true;
    return nullptr;
  }
  hooks_.clear();
  RunRecord& run = *measured;
  run.axis = axis;
  run.axis_value = axis_value;
  tell_measured(label, spec, run, settings.exec.checkpoint);
  stopped_ = run.result.interrupted || stop_requested();
  if (!run.result.interrupted && !settings.exec.checkpoint.dir.empty()) {
    finished_checkpoints_.push_back(settings.exec.checkpoint.dir);
  }
  runs_.push_back(std::move(run));
  return &runs_.back();
}

void Session::resume_job(const std::string& kind, const std::string& title) {
  namespace fs = std::filesystem;
  const fs::path out(o_.out);
  const fs::path results = out / "results.json";
  const fs::path checkpoints = out / "checkpoints";
  auto start_afresh = [&](const std::string& why) {
    std::error_code ec;
    if (fs::exists(checkpoints, ec)) {
      fs::remove_all(checkpoints, ec);
      hooks_.note(
          fmt::format("note: {}: discarded the checkpoints in {}", why, checkpoints.string()));
    }
  };
  if (o_.checkpoint.restart) return start_afresh("--restart");
  if (!fs::exists(results)) return;  // nothing finished yet: any checkpoint resumes by itself
  const nlohmann::json doc = parse_report_json(read_file(results), results.string());
  if (doc.is_discarded()) {
    throw UserError(fmt::format(
        "{}: not valid JSON, so the job it records cannot be continued: use another --out, or "
        "--restart to start afresh in this one",
        results.string()));
  }
  const Report earlier = read_report(doc, results.string());
  if (earlier.complete) return start_afresh("the job in " + o_.out + " had finished");
  if (earlier.kind != kind || earlier.title != title) {
    throw UserError(fmt::format(
        "{} holds the unfinished results of another job ('{}'; this one is '{}'): use another "
        "--out, or --restart to discard them",
        out.string(), earlier.title, title));
  }
  // The finished runs are kept only if they were measured as this job would measure them.
  if (earlier.manifest) {
    const ExecutionSettings& was = earlier.manifest->settings;
    std::vector<std::string> differs;
    auto compare = [&](const char* flag, const std::string& a, const std::string& b) {
      if (a != b) differs.push_back(fmt::format("{} {} then, {} now", flag, a, b));
    };
    compare("--steps", fmt::format("{}", was.max_steps), fmt::format("{}", o_.settings.max_steps));
    compare("--threads", fmt::format("{}", was.threads), fmt::format("{}", o_.settings.threads));
    compare("--precision", was.precision, o_.settings.precision);
    compare("--no-graph", was.record_step ? "off" : "on", o_.settings.record_step ? "off" : "on");
    if (!differs.empty()) {
      throw UserError(fmt::format(
          "{} holds the unfinished results of this job measured with other settings ({}): use "
          "the same settings to continue it, another --out, or --restart to discard them",
          out.string(), fmt::join(differs, ";")));
    }
  }
  for (const ReportRun& r : earlier.runs) {
    if (!r.run.result.interrupted) earlier_.push_back(r.run);
  }
  hooks_.note(fmt::format(
      "note: continuing the unfinished job in {}: {} finished run{} kept, the interrupted "
      "one resumes from its checkpoint (--restart starts afresh)",
      out.string(), earlier_.size(), earlier_.size() == 1 ? "" : "s"));
}

void Session::settle() {
  for (const auto& dir : finished_checkpoints_) remove_checkpoints(dir);
  finished_checkpoints_.clear();
  std::error_code ec;
  std::filesystem::remove(std::filesystem::path(o_.out) / "checkpoints", ec);  // once empty
}

Report Session::report(const std::string& kind, const std::string& title, bool finished) const {
  Report r;
  r.kind = kind;
  r.title = title;
  r.created = machine_.date;
  r.complete = finished && !stopped_;
  r.machine = machine_;
  r.manifest = job_manifest(o_, devices_, runs_);
  r.peaks = peaks_;
  for (const RunRecord& run : runs_) {
    r.runs.push_back({run, analyse_run(run, find_peaks(peaks_, run.result.device.id))});
  }
  return r;
}

}  // namespace xo

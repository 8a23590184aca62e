#include "cli/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "advisor/analysis.h"
#include "advisor/verdict.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "dist/mpi.h"
#include "measure/sampler.h"
#include "model/model.h"
#include "report/report_json.h"
#include "train/data_parallel.h"

namespace xo::cli {
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
std::string job_folder(const MeasureOptions& o) {
  const bool given = !o.out.empty();
  const std::string out = given ? o.out : kDefaultOutFolder;
  const std::optional<std::string> finished = finished_job(out);
  if (!finished) return out;
  if (o.overwrite) {
    fmt::print(stderr, "note: --overwrite: replacing the finished job {} in {}\n",
               terminal_safe(*finished), terminal_safe(out));
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
  fmt::print(stderr,
             "note: {} holds the finished job {}: this job writes to {} (--out chooses the folder, "
             "--overwrite replaces)\n",
             out, terminal_safe(*finished), dated);
  return dated;
}

}  // namespace

void add_checkpoint_options(CLI::App* sub, CheckpointFlags& f, bool for_train) {
  sub->add_option("--checkpoint-every", f.every,
                  "Save the training state every N steps or every so long (500steps, 90s, 5min, "
                  "1h) and on Ctrl-C/SIGTERM, so that an interrupted run resumes where it was; off "
                  "saves nothing")
      ->capture_default_str();
  if (for_train) {
    sub->add_option("--checkpoint-dir", f.dir,
                    "Folder for the checkpoints (default: crossover-checkpoints/MODEL)");
    sub->add_flag("--resume", f.resume,
                  "Continue from the checkpoint in the checkpoint folder (bit-identical to a run "
                  "never stopped)");
    sub->add_flag("--restart", f.restart,
                  "Discard the checkpoint an unfinished run left and start afresh");
  } else {
    sub->add_flag("--restart", f.restart,
                  "Discard what an unfinished job left in --out (its finished models and "
                  "checkpoints) and start afresh; without it the job continues where it stopped");
  }
  sub->add_option("--on-nan", f.on_nan,
                  "When the loss becomes NaN or infinite: stop (keeping the last good checkpoint) "
                  "or continue")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
}

void end_job(const mpi::World& world, const std::exception& e) {
  const bool interrupted = dynamic_cast<const Interrupted*>(&e) != nullptr;
  const bool user = interrupted || dynamic_cast<const UserError*>(&e) != nullptr;
  fmt::print(stderr, "crossover: {}{}: {} (rank {} of {}; ending every rank)\n",
             user ? "" : "internal ", interrupted ? "stopped" : "error", terminal_safe(e.what()),
             world.rank(), world.size());
  std::fflush(stderr);
  world.abort(interrupted ? 130 : user ? 2 : 3);
}

std::filesystem::path default_checkpoint_dir(const std::string& model) {
  return std::filesystem::path("crossover-checkpoints") / model;
}

CheckpointOptions checkpoint_options(const CheckpointFlags& f, const std::filesystem::path& dir) {
  CheckpointOptions c;
  c.every = parse_checkpoint_interval(f.every, "--checkpoint-every");
  c.resume = f.resume;
  if (f.resume && f.restart) throw UserError("--resume and --restart: choose one");
  if (!c.every.enabled() && !f.resume) return c;  // no folder: no checkpoints
  c.dir = dir;
  if (const auto steps = newest_checkpoint(dir); steps && !f.resume) {
    if (!f.restart) {
      throw UserError(fmt::format(
          "{} holds the checkpoint of an unfinished run (at step {}): --resume continues it, "
          "--restart discards it and starts afresh",
          dir.string(), *steps));
    }
    remove_checkpoints(dir);
    fmt::print(stderr, "note: discarded the checkpoint in {} (--restart)\n", dir.string());
  }
  if (f.resume && !newest_checkpoint(dir)) {
    fmt::print(stderr, "note: no checkpoint in {}: starting from the beginning\n", dir.string());
  }
  return c;
}

std::string stop_message(const TrainResult& r, const CheckpointOptions& checkpoint,
                         const std::string& how_to_resume) {
  const std::optional<int64_t> saved =
      checkpoint.dir.empty() ? std::nullopt : newest_checkpoint(checkpoint.dir);
  const std::string kept =
      saved
          ? fmt::format("the checkpoint at step {} is kept in {}", *saved, checkpoint.dir.string())
          : "no checkpoint had been saved yet (--checkpoint-every sets how often)";
  if (r.stopped_diverged) {
    const std::string where = r.diverged_from == r.diverged_step
                                  ? fmt::format("step {}", r.diverged_step)
                                  : fmt::format("steps {} to {}", r.diverged_from, r.diverged_step);
    const std::string last =
        r.last_finite_step > 0
            ? fmt::format("the last finite loss was {:.6g}, at epoch {} step {}",
                          r.last_finite_loss, r.last_finite_epoch, r.last_finite_step)
            : "no step had a finite loss";
    return fmt::format(
        "error: training of {} stopped: the loss became NaN or infinite at epoch {}, {}; {}; {}. "
        "Try a smaller --lr, or --on-nan continue to train on regardless",
        r.model, r.diverged_epoch, where, last, kept);
  }
  if (r.interrupted) {
    return fmt::format("{} interrupted after {} training steps; {}{}", r.model, r.steps_taken, kept,
                       saved ? fmt::format(" ({})", how_to_resume) : "");
  }
  if (r.diverged_epoch > 0) {
    return fmt::format(
        "warning: training diverged at epoch {} (the loss is not finite); try a smaller --lr",
        r.diverged_epoch);
  }
  return "";
}

std::string early_stopping_message(const TrainResult& r) {
  if (r.early_stopping_monitor.empty() || r.epochs.empty()) return "";
  const std::string best =
      r.best_epoch > 0
          ? fmt::format(
                "best {:.4f} at epoch {}{}", r.best_value, r.best_epoch,
                r.restored_best ? fmt::format("; weights of epoch {} restored", r.best_epoch) : "")
          : std::string("no epoch improved on the start");
  if (!r.stopped_early) {
    return r.restored_best ? fmt::format("early stopping did not stop the run ({})", best) : "";
  }
  return fmt::format(
      "stopped early after epoch {}: {} did not improve by more than {:g} for {} "
      "epochs ({})",
      r.epochs.back().epoch, r.early_stopping_monitor, r.early_stopping_min_delta,
      r.early_stopping_patience, best);
}

void print_notes(const ModelSpec& spec) {
  for (const std::string& note : spec.notes) {
    fmt::print(stderr, "note: {}: {}\n", terminal_safe(spec.origin), terminal_safe(note));
  }
}

std::string batch_note(const ModelSpec& spec, int64_t training_samples) {
  if (training_samples <= 0 || spec.train.batch <= training_samples) return "";
  return fmt::format(
      "batch {} is larger than the {} training samples: every step takes all {} (one step per "
      "epoch)",
      spec.train.batch, training_samples, training_samples);
}

int exit_code(const TrainResult& r) {
  if (r.stopped_diverged) return kExitDiverged;
  return r.interrupted ? 130 : 0;
}

void add_measure_options(CLI::App* sub, MeasureOptions& o, bool with_steps) {
  sub->add_option("--out", o.out,
                  "Folder for results.json, results.csv and report.html (default: "
                  "crossover-results, or a new dated folder beside it when that holds a finished "
                  "job)");
  sub->add_flag("--overwrite", o.overwrite,
                "Replace the finished job in --out (without it, a finished job is never "
                "overwritten)");
  sub->add_option("--devices", o.devices, "Devices (default: every device present)")
      ->delimiter(',');
  sub->add_option("--epochs", o.epochs, "Override every model's epochs")->check(positive_number());
  if (with_steps) {
    sub->add_option("--steps", o.max_steps,
                    "Measure at most N training steps per model (time per epoch is then the "
                    "median step times the steps per epoch, and says so)")
        ->check(non_negative_integer());
  }
  sub->add_option("--threads", o.threads, "CPU threads (0 = all cores)")
      ->check(non_negative_integer());
  sub->add_flag("--reprobe", o.reprobe, "Measure each device's peaks again (they are cached)");
  add_gpu_options(sub, o.precision, o.record_step);
  add_checkpoint_options(sub, o.checkpoint, false);
}

void add_gpu_options(CLI::App* sub, std::string& precision, bool& record_step) {
  sub->add_option("--precision", precision,
                  "GPU matmul arithmetic: f32 (the CPU's, default), tf32 or bf16 (tensor cores; "
                  "f32 master weights). The CPU always computes in f32")
      ->capture_default_str();  // checked by parse_precision, whose error names the choices
  sub->add_flag("!--no-graph", record_step,
                "Launch every kernel of a GPU step from the host instead of replaying the step "
                "as one CUDA Graph (shows what the graph buys)");
}

void add_cost_options(CLI::App* sub, CostOptions& o) {
  sub->add_option("--catalog", o.catalogs,
                  "A catalog file merged over the shipped data/catalog.toml (same id replaces)");
  sub->add_option("--price", o.prices,
                  "Override a price: INSTANCE=USD_PER_HOUR, INSTANCE.spot=USD_PER_HOUR or "
                  "DEVICE=PURCHASE_USD");
  OwnershipAssumptions& a = o.advice.ownership;
  sub->add_option("--lifetime-years", a.lifetime_years, "Years owned hardware is written off over")
      ->capture_default_str();
  sub->add_option("--utilisation", a.utilisation,
                  "Fraction of its lifetime owned hardware is in use, in (0, 1]")
      ->capture_default_str();
  sub->add_option("--electricity-price", a.electricity_usd_per_kwh, "USD per kWh")
      ->capture_default_str();
  sub->add_option("--host-power", a.host_power_w, "Watts of the machine around an owned GPU")
      ->capture_default_str();
  sub->add_option("--hours-per-month", o.advice.hours_per_month,
                  "Use per month at which payback times are given")
      ->check(positive_number())
      ->capture_default_str();
}

Catalog load_user_catalog(const CostOptions& o) {
  check_assumptions(o.advice.ownership);
  Catalog c = shipped_catalog();
  for (const std::string& file : o.catalogs) c = merge_catalogs(std::move(c), load_catalog(file));
  for (const std::string& p : o.prices) apply_price_override(c, p);
  return c;
}

namespace {

// The job's options with its --out: rank 0's choice on every rank of an MPI job.
MeasureOptions job_options(const MeasureOptions& o, const mpi::World* world) {
  if (!world) return with_out(o, job_folder(o));
  std::string out;
  if (world->rank() == 0) out = job_folder(o);
  return with_out(o, world->broadcast(out));
}

}  // namespace

Session::Session(const MeasureOptions& o, const mpi::World* world)
    : lead_(!world || world->rank() == 0),
      o_(job_options(o, world)),
      // Parsed before any work, so that a bad interval fails at once.
      checkpoint_every_(parse_checkpoint_interval(o.checkpoint.every, "--checkpoint-every")),
      started_(now_seconds()) {
  if (!lead_) {
    // A follower: rank 0 locks, probes and reports; this rank trains on the CPU beside it.
    devices_ = o.devices.empty() ? std::vector<std::string>{"cpu"} : o.devices;
    for (std::string& d : devices_) d = backend(d).info().id;
    return;
  }
  out_lock_.emplace(o_.out, recorded_command_line(), "--out");
  if (!out_lock_->unsupported().empty()) {
    fmt::print(stderr, "note: --out {}\n", out_lock_->unsupported());
  }
  devices_ = o.devices;
  if (devices_.empty()) {
    const DeviceList list = list_devices();
    devices_ = list.available;
    for (const auto& why : list.unavailable_reasons) fmt::print(stderr, "note: {}\n", why);
  }
  machine_ = describe_machine();
  for (std::string& d : devices_) {
    Backend& be = backend(d);
    d = be.info().id;  // "auto" and "cuda" name the device they resolved to
    progress_.update(fmt::format("probing the peaks of {}...", be.info().id));
    DevicePeaks p = device_peaks(be, o.reprobe, default_peaks_cache());
    progress_.clear();
    fmt::print(stderr,
               "{}: f32 matmul {:.1f} GFLOP/s, memory {:.1f} GB/s, step overhead {:.1f} µs{}\n",
               p.device, p.matmul_gflops, p.bandwidth_gbs, p.step_overhead_us,
               p.cached ? " (cached; --reprobe measures again)" : " (measured now)");
    peaks_.push_back(std::move(p));
  }
}

Backend& Session::backend(const std::string& device) {
  for (const auto& be : backends_) {
    if (be->info().id == device) return *be;
  }
  const DeviceRequest request = parse_device(device, o_.threads, o_.precision);
  backends_.push_back(make_backend(request));
  // Threads are the CPU's: a GPU's backend takes none (a Session holds one CPU backend at most).
  if (lead_ && !request.note.empty() && backends_.back()->info().kind == DeviceKind::Cpu)
    fmt::print(stderr, "note: {}\n", request.note);
  // "auto" and "cuda" name the device they resolve to from here on.
  return *backends_.back();
}

const RunRecord* Session::measure(const ModelSpec& spec_in, const std::string& device, size_t job,
                                  size_t jobs, const std::string& axis, double axis_value,
                                  DataParallel* data_parallel) {
  ModelSpec spec = spec_in;
  if (o_.epochs) spec.train.epochs = *o_.epochs;
  Backend& be = backend(device);
  // The label goes to the terminal (progress, the summary line): the spec's name may be anything.
  const std::string label = terminal_safe(
      fmt::format("{} on {}{}", spec.name, be.info().id,
                  data_parallel ? fmt::format(" ({} ranks)", data_parallel->ranks()) : ""));
  const double job_start = now_seconds();
  if (lead_) progress_.update(fmt::format("[{}/{}] {}: loading data", job + 1, jobs, label));
  const std::string spec_toml = to_toml(spec);
  // A run an earlier process of this job finished is kept: rank 0 tells its group so.
  const int ranks = data_parallel ? data_parallel->world().size() : 1;
  auto earlier = earlier_.end();
  for (auto it = earlier_.begin(); it != earlier_.end(); ++it) {
    if (it->spec_toml == spec_toml && it->result.device.id == be.info().id &&
        it->result.ranks == ranks) {
      earlier = it;
    }
  }
  if (data_parallel) {
    const bool kept =
        data_parallel->world().broadcast(earlier != earlier_.end() ? "kept" : "") == "kept";
    if (!lead_ && kept) return nullptr;
  }
  if (earlier != earlier_.end()) {
    fmt::print(stderr, "{}: kept from the earlier, unfinished run of this job in {}\n", label,
               o_.out);
    runs_.push_back(std::move(*earlier));
    earlier_.erase(earlier);
    return &runs_.back();
  }
  MeasureSettings settings;
  settings.profile_steps = o_.profile_steps;
  settings.max_steps = o_.max_steps;
  settings.record_step = o_.record_step;
  settings.sample_interval_s = o_.sample_interval_s;
  settings.stop_on_nan = o_.checkpoint.on_nan == "stop";
  settings.checkpoint.every = checkpoint_every_;
  settings.data_parallel = data_parallel;
  // The per-node profile is rank 0's, after the training (no rank waits on it).
  if (!lead_) settings.profile_steps = 0;
  if (settings.checkpoint.every.enabled()) {
    // One folder per (model, device), named so that a changed spec never meets an old one.
    std::string device_name = be.info().id;
    std::replace(device_name.begin(), device_name.end(), ':', '-');
    // A data-parallel run's state is its ranks' (a sweep along ranks trains one spec on each).
    if (ranks > 1) device_name += fmt::format("-{}ranks", ranks);
    settings.checkpoint.dir = std::filesystem::path(o_.out) / "checkpoints" /
                              fmt::format("{}-{}-{}", spec.name, device_name,
                                          Hasher().text(spec_toml).hex().substr(0, 8));
    settings.checkpoint.resume = true;  // a folder left by an earlier process of this job
    settings.checkpoint.note = [this](const std::string& m) {
      if (!lead_) return;
      progress_.clear();
      fmt::print(stderr, "crossover: {}\n", m);
    };
  }
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
    measured = measure_run(be, spec, settings, [&](const EpochRecord& e, int64_t n) {
      const double done = static_cast<double>(e.epoch) / static_cast<double>(n);
      const double fraction = (static_cast<double>(job) + done) / static_cast<double>(jobs);
      const double elapsed = now_seconds() - started_;
      const double this_left = (now_seconds() - job_start) / done * (1 - done);
      progress_.bar(fraction,
                    fmt::format("[{}/{}] {}: epoch {}/{}, loss {:.4f}; this model "
                                "~{} left, all ~{} left",
                                job + 1, jobs, label, e.epoch, n, e.loss, format_left(this_left),
                                format_left(elapsed / fraction * (1 - fraction))));
    });
  } catch (const Interrupted& e) {
    // Across ranks the others may be inside a collective already: the job ends (end_job).
    if (data_parallel) throw;
    progress_.clear();
    fmt::print(stderr, "crossover: {}: stopped while {}\n", label, terminal_safe(e.what()));
    stopped_ = true;
    return nullptr;
  }
  progress_.clear();
  RunRecord& run = *measured;
  run.axis = axis;
  run.axis_value = axis_value;
  const TrainResult& r = run.result;
  const DevicePeaks* peaks = find_peaks(peaks_, be.info().id);
  if (data_parallel && run.utilisation && run.utilisation->mean_other_cores) {
    // The group's other ranks on this machine are this run, not other load.
    const int others = data_parallel->world().local_size() - 1;
    *run.utilisation->mean_other_cores = std::max(
        0.0, *run.utilisation->mean_other_cores - static_cast<double>(others * be.info().threads));
  }
  if (const std::string note = batch_note(spec, r.samples); !note.empty()) {
    fmt::print(stderr, "note: {}: {}\n", label, note);
  }
  // The training error only where an epoch completed (a --steps run or an early stop has none).
  fmt::print(stderr, "{}: {:.4f} ms/step, {:.1f} GFLOP/s{}{}\n", label, r.step_ms.median, r.gflops,
             peaks ? fmt::format(" ({:.1f}% of peak)",
                                 100 * r.gflops / (peaks->matmul_gflops * std::max(1, r.ranks)))
                   : "",
             r.epochs.empty() ? std::string(", no epoch completed")
             : std::isnan(r.final_train_error)
                 ? fmt::format(", final loss {:.6f}", r.final_loss)
                 : fmt::format(", train error {:.2f}%", r.final_train_error));
  if (const std::string stuck = stuck_warning(r); !stuck.empty()) {
    fmt::print(stderr, "warning: {}\n", terminal_safe(stuck));
  }
  if (run.utilisation) {
    if (const std::string busy =
            contamination_warning(*run.utilisation, "this run",
                                  be.info().kind == DeviceKind::Cpu ? be.info().threads : 0);
        !busy.empty()) {
      fmt::print(stderr, "warning: {}: {}\n", label, busy);
    }
  }
  if (const std::string why = stop_message(r, settings.checkpoint, "the same command continues it");
      !why.empty()) {
    fmt::print(stderr, "crossover: {}\n", terminal_safe(why));
  }
  if (const std::string early = early_stopping_message(r); !early.empty()) {
    fmt::print(stderr, "{}: {}\n", label, early);
  }
  stopped_ = r.interrupted || stop_requested();
  if (!r.interrupted && !settings.checkpoint.dir.empty()) {
    finished_checkpoints_.push_back(settings.checkpoint.dir);
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
      fmt::print(stderr, "note: {}: discarded the checkpoints in {}\n", why, checkpoints.string());
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
    compare("--steps", fmt::format("{}", was.max_steps), fmt::format("{}", o_.max_steps));
    compare("--threads", fmt::format("{}", was.threads), fmt::format("{}", o_.threads));
    compare("--precision", was.precision, o_.precision);
    compare("--no-graph", was.record_step ? "off" : "on", o_.record_step ? "off" : "on");
    if (!differs.empty()) {
      throw UserError(fmt::format(
          "{} holds the unfinished results of this job measured with other settings ({}): use "
          "the same settings to continue it, another --out, or --restart to discard them",
          out.string(), fmt::join(differs, "; ")));
    }
  }
  for (const ReportRun& r : earlier.runs) {
    if (!r.run.result.interrupted) earlier_.push_back(r.run);
  }
  fmt::print(stderr,
             "note: continuing the unfinished job in {}: {} finished run{} kept, the interrupted "
             "one resumes from its checkpoint (--restart starts afresh)\n",
             out.string(), earlier_.size(), earlier_.size() == 1 ? "" : "s");
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

AdviceOptions with_profiles(const AdviceOptions& o) {
  AdviceOptions out = o;
  if (out.profiles.empty()) use_profiles(out, cached_profiles_here(default_profile_cache()));
  return out;
}

void add_advice(Report& report, const RunRecord& focus, const std::vector<RunRecord>& runs,
                const std::vector<DevicePeaks>& peaks, const Catalog& catalog,
                const AdviceOptions& o_in, const std::string& axis, bool crossover_predicted) {
  const AdviceOptions o = with_profiles(o_in);
  report.validation = o.validation;
  report.predictions = predict_devices(focus, runs, peaks, catalog, o);
  const int64_t epochs = parse_spec(focus.spec_toml, focus.result.model).train.epochs;
  report.cost = cost_table(focus.result.model, focus.result.params, epochs,
                           focus.result.steps_per_epoch, report.predictions, catalog, o);
  const std::string crossover =
      report.sweep ? crossover_sentence(as_series(*report.sweep), report.sweep->crossovers, axis,
                                        crossover_predicted)
                   : "";
  report.verdict = make_verdict(report.predictions, *report.cost, catalog, crossover);
  if (report.verdict && focus.utilisation) {
    const TrainResult& r = focus.result;
    report.verdict->caution =
        contamination_warning(*focus.utilisation, r.model + " on " + r.device.id,
                              r.device.kind == DeviceKind::Cpu ? r.device.threads : 0);
  }
  const std::string verdict_device =
      report.verdict && report.verdict->gpu ? report.verdict->gpu->device : "";
  report.advice =
      advice_lines(focus.result.model, report.predictions, *report.cost, crossover, verdict_device);
}

}  // namespace xo::cli

// `crossover tune SPEC --vary KEY=...`: a hyper-parameter search. Every trial is its own
// `crossover train` process (so that one trial's crash, divergence or memory cannot touch the
// others, and a trial on a GPU has its own context and stream), several at once per device as
// measured fastest, across MPI ranks where `mpirun` started the job; successive halving pauses
// and resumes trials through their checkpoints. The results are rewritten after every trial that
// ends, and the same command with the same --out goes on where a stopped search was.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "advisor/advice.h"
#include "cli/child.h"
#include "cli/commands.h"
#include "cli/messages.h"
#include "cli/session.h"
#include "core/error.h"
#include "core/file.h"
#include "core/format.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "dist/mpi.h"
#include "measure/peaks.h"
#include "model/cost.h"
#include "model/model.h"
#include "report/machine.h"
#include "report/report_json.h"
#include "report/tune_json.h"
#include "report/tune_text.h"
#include "train/epoch_rules.h"
#include "tune/halving.h"
#include "tune/search_cost.h"
#include "tune/space.h"

extern char** environ;

namespace xo::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct TuneOptions {
  std::string spec;
  std::vector<std::string> vary;
  int64_t samples = 0;
  uint64_t seed = 0;
  std::string objective;
  bool halving = false;
  int64_t min_epochs = 1;
  int64_t factor = 3;
  std::optional<int64_t> epochs;
  int parallel = 0;
  int threads = 0;  // CPU threads per trial (0: the cores shared among the trials at once)
  std::vector<std::string> devices;
  std::string out = "crossover-tune";
  bool restart = false;
  int instances = 4;
  int probe_steps = 200;
  std::string checkpoint_every = "60s";
  bool quiet = false;
  CostOptions cost;
};

// MPI tags: a job for a worker rank, its end, and the end of the search.
constexpr int kTagJob = 1, kTagDone = 2, kTagStop = 3;
constexpr auto kPoll = std::chrono::milliseconds(20);

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The arguments of one `crossover train` process, as one text for MPI (NUL-separated).
std::string join_args(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& a : args) {
    text += a;
    text += '\0';
  }
  return text;
}
std::vector<std::string> split_args(const std::string& text) {
  std::vector<std::string> args;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\0', start);
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

// The last line of `log` that says "error", for a failed trial's record.
std::string failure_text(const fs::path& log, int code) {
  std::string text;
  try {
    text = read_file(log);
  } catch (const UserError&) {
  }
  std::string found;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    if (line.find("error") != std::string::npos) found = line;
    start = end + 1;
  }
  if (found.empty()) return fmt::format("the trial's process ended with exit code {}", code);
  const std::string prefix = "crossover: error: ";
  if (found.rfind(prefix, 0) == 0) found = found.substr(prefix.size());
  return found;
}

// The spec as a file in a trial's folder: the paths it names (data, test split, initial weights),
// which the spec reader keeps relative to where crossover runs, made absolute, so that they read
// the same from there.
ModelSpec with_absolute_paths(ModelSpec spec) {
  auto absolute = [](std::string& source) {
    for (const char* prefix : {"csv:", "idx:", "imdb:"}) {
      const std::string p = prefix;
      if (source.rfind(p, 0) == 0) {
        source = p + fs::absolute(source.substr(p.size())).lexically_normal().string();
        return;
      }
    }
  };
  absolute(spec.data.source);
  absolute(spec.data.test);
  if (!spec.init.empty()) spec.init = fs::absolute(spec.init).lexically_normal().string();
  return spec;
}

struct TrialFiles {
  fs::path dir, spec, result, weights, checkpoints, log;
};
TrialFiles trial_files(const fs::path& out, const std::string& id) {
  const fs::path dir = out / "trials" / id;
  return {dir,
          dir / "spec.toml",
          dir / "result.json",
          dir / "weights.safetensors",
          dir / "checkpoints",
          dir / "log.txt"};
}

// Where trials run: a device of a rank, and the threads each trial gets there.
struct Slot {
  int rank = 0;
  std::string device;
  int threads = 0;
  // While busy: its process (rank 0) or its job (another rank).
  bool busy = false;
  pid_t pid = -1;
  size_t trial = 0;
  int rung = 0;
  Clock::time_point started;
};

std::vector<std::string> train_args(const TrialFiles& f, const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every) {
  std::vector<std::string> a = {"train",
                                f.spec.string(),
                                "--device",
                                device,
                                "--threads",
                                std::to_string(threads),
                                "--quiet",
                                "--json",
                                f.result.string(),
                                "--save",
                                f.weights.string(),
                                "--checkpoint-dir",
                                f.checkpoints.string(),
                                "--checkpoint-every",
                                checkpoint_every,
                                "--resume"};
  if (pause_after) {
    a.push_back("--pause-after");
    a.push_back(std::to_string(*pause_after));
  }
  return a;
}

// The figure the search ranks trials by.
Metric objective_metric(const TuneOptions& o, const ModelSpec& base, const DataSplit& data,
                        bool regression) {
  if (!o.objective.empty()) {
    for (Metric m : kMetrics) {
      if (o.objective == metric_name(m)) {
        if (needs_validation_split(m) && data.validation.samples == 0) {
          throw UserError(
              fmt::format("--objective {}: {} has no validation split (set data.validation_split)",
                          o.objective, base.name));
        }
        if (needs_test_split(m) && data.test.samples == 0) {
          throw UserError(
              fmt::format("--objective {}: {}'s data has no test split", o.objective, base.name));
        }
        if (regression && (m == Metric::ValAccuracy || m == Metric::TestAccuracy)) {
          throw UserError(
              fmt::format("--objective {}: {} is a regression (mse): it has no "
                          "accuracy",
                          o.objective, base.name));
        }
        return m;
      }
    }
    std::vector<std::string> names;
    for (Metric m : kMetrics) names.push_back(metric_name(m));
    throw UserError(fmt::format("--objective '{}': unknown (expected one of {})", o.objective,
                                fmt::join(names, ", ")));
  }
  // Held-out data before the test split (tuning on the test split overfits it), accuracy where
  // the model has one; else the training loss.
  if (data.validation.samples > 0) return regression ? Metric::ValLoss : Metric::ValAccuracy;
  if (data.test.samples > 0) return regression ? Metric::TestLoss : Metric::TestAccuracy;
  return Metric::Loss;
}

// This rank's slot under MPI, as a reply to rank 0: "ok", its device and threads, or why it cannot
// see --out (the token rank 0 wrote there).
std::vector<std::string> rank_slot(const mpi::World& world, const TuneOptions& o,
                                   const std::string& token, const fs::path& out) {
  std::string seen;
  try {
    seen = read_file(out / ".ranks-token");
  } catch (const UserError&) {
  }
  if (seen != token) {
    return {"error",
            fmt::format("{} on {} does not see {}", world.rank(), world.host(), out.string())};
  }
  const DeviceList list = list_devices();
  std::vector<std::string> devices = o.devices.empty() ? list.available : o.devices;
  std::vector<std::string> gpus;
  for (const std::string& d : list.available) {
    if (device_kind_of(d) == DeviceKind::Gpu) gpus.push_back(d);
  }
  const bool want_gpu = std::any_of(devices.begin(), devices.end(), [](const std::string& d) {
    return d.rfind("cuda", 0) == 0 || d == "auto";
  });
  if (want_gpu && !gpus.empty()) {
    return {"ok", gpus[static_cast<size_t>(world.local_rank()) % gpus.size()], "0"};
  }
  const int cores = make_backend(parse_device("cpu", 0))->info().threads;
  return {"ok", "cpu", std::to_string(std::max(1, cores / world.local_size()))};
}

// A rank other than 0: runs the trials rank 0 sends, one at a time, until told the search ended.
int run_worker(const mpi::World& world, const TuneOptions& o) {
  const std::vector<std::string> start = split_args(world.broadcast(""));
  world.gather(join_args(rank_slot(world, o, start.at(1), start.at(0))));
  pid_t child = -1;
  Clock::time_point started;
  bool told = false;
  while (true) {
    if (auto stop = world.try_receive(kTagStop)) {
      if (stop->second == "end") break;
      if (child > 0) kill(child, SIGINT);  // "interrupt": the trial saves its checkpoint
    }
    if (stop_requested() && child > 0 && !told) {
      kill(child, SIGINT);
      told = true;
    }
    if (child < 0) {
      if (auto job = world.try_receive(kTagJob)) {
        std::vector<std::string> args = split_args(job->second);
        const fs::path log = fs::path(args.at(1)).parent_path() / "log.txt";
        child = spawn(args, log);
        started = Clock::now();
        told = false;
        continue;
      }
    } else {
      int status = 0;
      if (waitpid(child, &status, WNOHANG) == child) {
        world.send(0, kTagDone, std::to_string(exit_status(status)));
        child = -1;
        continue;
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
  return 0;
}

class Search {
 public:
  Search(const TuneOptions& o, const mpi::World* world) : o_(o), world_(world) {}
  int run();

 private:
  void prepare();
  void load_or_start();
  void choose_parallel();
  ParallelOption measure_parallel(const std::string& device, int k, int threads);
  void make_slots();
  void make_rank_slots();
  void loop();
  void start_job(Slot& slot, const HalvingJob& job);
  void job_done(Slot& slot, int code, double seconds);
  void record_result(size_t i, const TrainResult& r);
  void finish();
  void write_results() const;
  // The record as it stands, with the search's wall time and device time so far.
  TuneRecord snapshot() const;
  std::vector<TrialProgress> progress() const;
  std::optional<HalvingJob> resumed_job() const;

  const TuneOptions& o_;
  const mpi::World* world_;
  fs::path out_;
  std::optional<FolderLock> lock_;
  ModelSpec base_;
  std::vector<Dimension> dims_;
  std::vector<ModelSpec> specs_;
  Metric metric_ = Metric::Loss;
  TuneRecord record_;
  std::vector<Slot> slots_;
  std::vector<bool> running_;
  std::unique_ptr<Backend> cpu_;
  Clock::time_point started_ = Clock::now();
  double wall_before_ = 0;
  bool interrupted_ = false;
};

void Search::prepare() {
  out_ = o_.out;
  check_writable_path(out_ / "results.json", "--out");
  lock_.emplace(out_, recorded_command_line(), "--out");
  base_ = resolve_spec(o_.spec);
  if (o_.epochs) base_.train.epochs = *o_.epochs;
  // A cosine schedule over "train.epochs" keeps that length when halving pauses a trial early.
  if (base_.train.schedule && base_.train.schedule->t_max == 0)
    base_.train.schedule->t_max = base_.train.epochs;
  print_notes(base_);
  if (o_.vary.empty()) throw UserError("tune: give at least one --vary KEY=V1,V2,...");
  if (!parse_checkpoint_interval(o_.checkpoint_every, "--checkpoint-every").enabled()) {
    throw UserError(
        "--checkpoint-every off: a trial's checkpoints are how a stopped search and halving go on");
  }
  for (const std::string& v : o_.vary) dims_.push_back(parse_dimension(v));
  check_dimensions(base_, dims_);
  const std::vector<Assignment> points =
      o_.samples > 0 ? sample(dims_, o_.samples, o_.seed) : grid(dims_);
  if (o_.samples > 0 && static_cast<int64_t>(points.size()) < o_.samples) {
    fmt::print(stderr, "note: the space holds {} distinct trials, fewer than --samples {}\n",
               points.size(), o_.samples);
  }
  // The data once, before any trial: a bad file fails now, and the splits decide the objective.
  cpu_ = make_backend(parse_device("cpu", 0));
  const Model model(base_, *cpu_);
  const DataSplit data = load_data(base_.data, data_request(base_, model.classes()));
  metric_ = objective_metric(o_, base_, data, model.regression());

  record_.model = base_.name;
  record_.spec_toml = to_toml(base_);
  record_.vary = o_.vary;
  record_.mode = o_.samples > 0 ? "random" : "grid";
  record_.samples = o_.samples;
  record_.seed = o_.seed;
  record_.objective = metric_name(metric_);
  record_.higher_is_better = higher_is_better(metric_);
  record_.max_epochs = base_.train.epochs;
  if (o_.halving) {
    if (o_.min_epochs >= base_.train.epochs) {
      throw UserError(
          fmt::format("--min-epochs {} leaves nothing to halve: the trials train {} "
                      "epochs (set --epochs higher or --min-epochs lower)",
                      o_.min_epochs, base_.train.epochs));
    }
    record_.halving = HalvingSettings{o_.min_epochs, o_.factor};
  }
  record_.rungs = rung_epochs(record_.halving, base_.train.epochs);
  const int width = static_cast<int>(fmt::formatted_size("{}", points.size()));
  for (size_t i = 0; i < points.size(); ++i) {
    TrialRecord t;
    t.id = fmt::format("t{:0{}}", i + 1, std::max(2, width));
    t.values = points[i];
    record_.trials.push_back(t);
    specs_.push_back(trial_spec(base_, dims_, points[i]));
  }
  running_.assign(points.size(), false);
}

// The same search in --out goes on; another is refused unless --restart.
void Search::load_or_start() {
  const fs::path file = out_ / "results.json";
  if (!fs::exists(file)) return;
  if (o_.restart) {
    fs::remove_all(out_ / "trials");
    fs::remove(file);
    return;
  }
  TuneRecord was = read_tune_record(read_file(file), file.string());
  auto differs = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) {
      throw UserError(fmt::format(
          "--out {} holds another search ({} was {}, now {}): give another --out, or --restart "
          "to discard it",
          out_.string(), what, a, b));
    }
  };
  if (was.spec_toml != record_.spec_toml) {
    throw UserError(fmt::format(
        "--out {} holds a search of another spec ('{}', or the same with other settings): give "
        "another --out, or --restart to discard it",
        out_.string(), was.model));
  }
  differs("--vary", fmt::format("{}", fmt::join(was.vary, " ")),
          fmt::format("{}", fmt::join(record_.vary, " ")));
  differs("the mode", fmt::format("{} {} seed {}", was.mode, was.samples, was.seed),
          fmt::format("{} {} seed {}", record_.mode, record_.samples, record_.seed));
  differs("--objective", was.objective, record_.objective);
  differs("the rungs", fmt::format("{}", fmt::join(was.rungs, ",")),
          fmt::format("{}", fmt::join(record_.rungs, ",")));
  if (was.trials.size() != record_.trials.size()) {
    differs("the trials", std::to_string(was.trials.size()), std::to_string(record_.trials.size()));
  }
  size_t kept = 0;
  for (size_t i = 0; i < was.trials.size(); ++i) {
    TrialRecord& t = was.trials[i];
    if (t.values != record_.trials[i].values) {
      differs("a trial's values", t.id, record_.trials[i].id);
    }
    // Stopped while it ran: its checkpoint (if one was written) continues it.
    if (t.status == TrialStatus::Running) t.status = TrialStatus::Pending;
    if (t.status != TrialStatus::Pending) ++kept;
  }
  wall_before_ = was.wall_seconds;
  record_.trials = std::move(was.trials);
  record_.decisions = std::move(was.decisions);
  record_.parallel = std::move(was.parallel);
  fmt::print(stderr, "crossover: {} of {} trials in {} are kept; the search goes on\n", kept,
             record_.trials.size(), out_.string());
}

ParallelOption Search::measure_parallel(const std::string& device, int k, int threads) {
  ParallelOption option{k, threads, 0, {}};
  const fs::path dir = out_ / "parallel";
  fs::create_directories(dir);
  std::vector<pid_t> pids;
  std::vector<fs::path> results;
  for (int i = 0; i < k; ++i) {
    const fs::path json = dir / fmt::format("{}-k{}-{}.json", device, k, i);
    fs::remove(json);
    results.push_back(json);
    // The first trial's model, for a fixed number of steps, no checkpoints.
    pids.push_back(
        spawn({"train", (out_ / "trials" / record_.trials[0].id / "spec.toml").string(), "--device",
               device, "--threads", std::to_string(threads), "--quiet", "--json", json.string(),
               "--steps", std::to_string(o_.probe_steps), "--checkpoint-every", "off"},
              dir / "log.txt"));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (exit_status(status) != 0) {
      throw UserError(fmt::format("measuring {} trials at once on {}: {} (see {})", k, device,
                                  failure_text(dir / "log.txt", exit_status(status)),
                                  (dir / "log.txt").string()));
    }
    const TrainResult r = read_train_result(read_file(results[i]), results[i].string());
    option.per_trial.push_back(r.samples_per_second);
    option.samples_per_second += r.samples_per_second;
  }
  return option;
}

// How many trials at once on each local device: --parallel, or what measured fastest.
void Search::choose_parallel() {
  std::vector<std::string> devices = o_.devices;
  if (devices.empty()) devices = list_devices().available;
  const int cores = cpu_->info().threads;
  for (const std::string& d : devices) {
    const std::string id = make_backend(parse_device(d, 0))->info().id;
    const auto known = std::find_if(record_.parallel.begin(), record_.parallel.end(),
                                    [&](const ParallelChoice& c) { return c.device == id; });
    if (o_.parallel > 0) {
      ParallelChoice c{id, o_.parallel, false, {}};
      if (known != record_.parallel.end())
        *known = c;
      else
        record_.parallel.push_back(c);
      continue;
    }
    if (known != record_.parallel.end() && known->measured) continue;  // measured before a restart
    ParallelChoice c{id, 1, true, {}};
    const bool cpu = device_kind_of(id) == DeviceKind::Cpu;
    const int most = cpu ? cores : 4;
    for (int k = 1; k <= most; k *= 2) {
      if (!o_.quiet)
        fmt::print(stderr, "measuring {} trial{} at once on {}...\n", k, k == 1 ? "" : "s", id);
      c.options.push_back(measure_parallel(
          id, k, cpu ? (o_.threads > 0 ? o_.threads : std::max(1, cores / k)) : 0));
    }
    const auto best = std::max_element(c.options.begin(), c.options.end(),
                                       [](const ParallelOption& a, const ParallelOption& b) {
                                         return a.samples_per_second < b.samples_per_second;
                                       });
    c.k = best->k;
    record_.parallel.push_back(c);
  }
}

void Search::make_slots() {
  const int cores = cpu_->info().threads;
  for (const ParallelChoice& c : record_.parallel) {
    const bool cpu = device_kind_of(c.device) == DeviceKind::Cpu;
    const int threads = o_.threads > 0 ? o_.threads : std::max(1, cores / c.k);
    for (int i = 0; i < c.k; ++i) slots_.push_back({0, c.device, cpu ? threads : 0});
  }
}

// Under MPI, every rank is one slot: its device (a GPU by local rank where it has one, else the
// CPU with its share of the machine's cores), said by each rank at the start. The trials' files
// are read and written by every rank in --out, so --out must be one folder they all see: checked
// here with a token file, before any trial.
void Search::make_rank_slots() {
  const std::string token = fmt::format("{}-{}", getpid(), Clock::now().time_since_epoch().count());
  write_file_atomic(out_ / ".ranks-token", token);
  world_->broadcast(join_args({fs::absolute(out_).string(), token}));
  const std::vector<std::string> replies =
      world_->gather(join_args(rank_slot(*world_, o_, token, fs::absolute(out_))));
  fs::remove(out_ / ".ranks-token");
  std::vector<std::string> unseen;
  record_.parallel.clear();
  for (size_t r = 0; r < replies.size(); ++r) {
    const std::vector<std::string> reply = split_args(replies[r]);
    if (reply.size() != 3 || reply[0] != "ok") {
      unseen.push_back(fmt::format("rank {} ({})", r, reply.empty() ? "no reply" : reply.back()));
      continue;
    }
    slots_.push_back({static_cast<int>(r), reply[1], std::stoi(reply[2])});
    record_.parallel.push_back({fmt::format("rank {}: {}", r, reply[1]), 1, false, {}});
  }
  if (!unseen.empty()) {
    throw UserError(fmt::format(
        "--out {} must be a folder every rank sees (a shared file system, as a cluster's home): "
        "{}",
        fs::absolute(out_).string(), fmt::join(unseen, "; ")));
  }
  record_.ranks = world_->size();
}

std::vector<TrialProgress> Search::progress() const {
  std::vector<TrialProgress> p(record_.trials.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const TrialRecord& t = record_.trials[i];
    p[i].value = t.rung_objective;
    p[i].rung = static_cast<int>(t.rung_objective.size()) - 1;
    p[i].running = running_[i];
    p[i].ended = t.status == TrialStatus::Finished || t.status == TrialStatus::EarlyStopped ||
                 t.status == TrialStatus::Diverged || t.status == TrialStatus::Failed ||
                 t.status == TrialStatus::Stopped;
  }
  return p;
}

// A trial promoted before the search stopped, whose promotion did not complete: it goes on first.
std::optional<HalvingJob> Search::resumed_job() const {
  for (const HalvingDecision& d : record_.decisions) {
    if (!d.promoted) continue;
    for (size_t i = 0; i < record_.trials.size(); ++i) {
      const TrialRecord& t = record_.trials[i];
      if (t.id != d.trial || running_[i] || t.epochs >= d.to_epochs) continue;
      if (t.status != TrialStatus::Pending && t.status != TrialStatus::Paused) continue;
      const auto rung = std::find(record_.rungs.begin(), record_.rungs.end(), d.to_epochs);
      if (rung == record_.rungs.end()) continue;
      return HalvingJob{i, static_cast<int>(rung - record_.rungs.begin()), false, 0, 0, 0};
    }
  }
  return std::nullopt;
}

void Search::start_job(Slot& slot, const HalvingJob& job) {
  TrialRecord& t = record_.trials[job.trial];
  const TrialFiles f = trial_files(out_, t.id);
  if (job.promotion) {
    const int64_t at = record_.rungs[static_cast<size_t>(job.rung - 1)];
    record_.decisions.push_back(
        {t.id, true, at, record_.rungs[static_cast<size_t>(job.rung)], job.place, job.of, job.top});
    if (!o_.quiet) fmt::print("{}\n", decision_text(record_.decisions.back()));
  }
  const bool last = job.rung + 1 == static_cast<int>(record_.rungs.size());
  const std::vector<std::string> args = train_args(
      f, slot.device, slot.threads,
      last ? std::nullopt : std::optional<int64_t>(record_.rungs[static_cast<size_t>(job.rung)]),
      o_.checkpoint_every);
  t.status = TrialStatus::Running;
  t.device = slot.device;
  t.threads = slot.threads;
  t.rank = slot.rank;
  slot.busy = true;
  slot.trial = job.trial;
  slot.rung = job.rung;
  slot.started = Clock::now();
  running_[job.trial] = true;
  if (slot.rank == 0) {
    slot.pid = spawn(args, f.log);
  } else {
    world_->send(slot.rank, kTagJob, join_args(args));
  }
  // The most trials at once on this device so far, for every trial running on it.
  int on_device = 0;
  for (const Slot& s : slots_)
    on_device += s.busy && s.device == slot.device && s.rank == slot.rank;
  for (const Slot& s : slots_) {
    if (s.busy && s.device == slot.device && s.rank == slot.rank) {
      TrialRecord& other = record_.trials[s.trial];
      other.concurrent = std::max(other.concurrent, on_device);
    }
  }
  write_results();
}

void Search::record_result(size_t i, const TrainResult& r) {
  TrialRecord& t = record_.trials[i];
  t.params = r.params;
  t.epochs = static_cast<int64_t>(r.epochs.size());
  t.steps = r.steps_taken;
  t.step_ms = r.step_ms.median;
  t.curve.clear();
  t.train_seconds = 0;
  for (const EpochRecord& e : r.epochs) {
    t.curve.push_back(
        {e.epoch, e.loss, e.val_loss, e.val_accuracy, e.test_loss, e.test_accuracy, e.seconds});
    t.train_seconds += e.seconds;
  }
  // The objective where the saved weights are: the best epoch where early stopping put it back.
  const size_t at = r.restored_best && r.best_epoch > 0 ? static_cast<size_t>(r.best_epoch - 1)
                                                        : r.epochs.size() - 1;
  t.objective = r.epochs.empty() ? std::nan("") : metric_value(r.epochs[at], metric_);
}

void Search::job_done(Slot& slot, int code, double seconds) {
  const size_t i = slot.trial;
  TrialRecord& t = record_.trials[i];
  const TrialFiles f = trial_files(out_, t.id);
  slot.busy = false;
  slot.pid = -1;
  running_[i] = false;
  t.process_seconds += seconds;
  // The objective where this job's rung ended (NaN: the trial failed there).
  auto end_rung = [&](double value) {
    t.rung_objective.resize(static_cast<size_t>(slot.rung), std::nan(""));
    t.rung_objective.push_back(value);
  };
  if (code == 0) {
    const TrainResult r = read_train_result(read_file(f.result), f.result.string());
    record_result(i, r);
    end_rung(t.objective);
    t.status = r.stopped_early ? TrialStatus::EarlyStopped
               : r.paused      ? TrialStatus::Paused
                               : TrialStatus::Finished;
  } else if (code == kExitDiverged) {
    try {
      record_result(i, read_train_result(read_file(f.result), f.result.string()));
    } catch (const UserError&) {
    }
    t.objective = std::nan("");
    end_rung(std::nan(""));
    t.status = TrialStatus::Diverged;
    t.error = "the loss became NaN or infinite";
  } else if (code == 130 || (interrupted_ && code >= 128)) {
    t.status = TrialStatus::Pending;  // its checkpoint continues it
  } else {
    t.status = TrialStatus::Failed;
    t.error = failure_text(f.log, code);
    end_rung(std::nan(""));
  }
  if (!o_.quiet && t.status != TrialStatus::Pending) {
    const std::string values = [&] {
      std::vector<std::string> v;
      for (const auto& [k, x] : t.values) v.push_back(fmt::format("{}={}", k, x));
      return fmt::format("{}", fmt::join(v, " "));
    }();
    const std::string figure = std::isnan(t.objective)
                                   ? terminal_safe(t.error)
                                   : fmt::format("{} {:.4g}", record_.objective, t.objective);
    fmt::print("{} {}: {} after {} epoch{}, {}, {} on {}{}\n", t.id, terminal_safe(values),
               trial_status_name(t.status), t.epochs, t.epochs == 1 ? "" : "s", figure,
               duration(t.process_seconds), t.device,
               t.threads > 0 ? fmt::format(" ({} thread{})", t.threads, t.threads == 1 ? "" : "s")
                             : std::string());
    std::fflush(stdout);
  }
  write_results();
}

void Search::loop() {
  const bool mpi = world_ != nullptr && world_->size() > 1;
  bool stopping = false;
  while (true) {
    if (stop_requested() && !stopping) {
      // Ctrl-C reached the trials too (one process group); SIGTERM to this process alone is
      // passed on, so that each saves its checkpoint.
      stopping = interrupted_ = true;
      for (Slot& s : slots_) {
        if (s.busy && s.rank == 0) kill(s.pid, SIGINT);
      }
      if (mpi) {
        for (int r = 1; r < world_->size(); ++r) world_->send(r, kTagStop, "interrupt");
      }
    }
    // Free slots take the next job.
    if (!stopping) {
      for (Slot& s : slots_) {
        if (s.busy) continue;
        std::optional<HalvingJob> job = resumed_job();
        if (!job) {
          job = next_halving_job(progress(), static_cast<int>(record_.rungs.size()),
                                 record_.halving ? record_.halving->factor : 2,
                                 record_.higher_is_better);
        }
        if (!job) break;
        start_job(s, *job);
      }
    }
    const bool any_busy =
        std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; });
    if (!any_busy) break;
    // Ends: this rank's processes, and other ranks' messages.
    bool progressed = false;
    for (Slot& s : slots_) {
      if (!s.busy || s.rank != 0) continue;
      int status = 0;
      if (waitpid(s.pid, &status, WNOHANG) == s.pid) {
        job_done(s, exit_status(status), seconds_since(s.started));
        progressed = true;
      }
    }
    if (mpi) {
      while (auto message = world_->try_receive(kTagDone)) {
        const int code = std::stoi(message->second);
        for (Slot& s : slots_) {
          if (s.busy && s.rank == message->first) {
            job_done(s, code, seconds_since(s.started));
            break;
          }
        }
        progressed = true;
      }
    }
    if (!progressed) std::this_thread::sleep_for(kPoll);
  }
}

void Search::finish() {
  // Trials halving gave no more epochs to.
  if (!interrupted_) {
    const std::vector<TrialProgress> p = progress();
    for (size_t i = 0; i < record_.trials.size(); ++i) {
      TrialRecord& t = record_.trials[i];
      if (t.status != TrialStatus::Paused) continue;
      const int rung = static_cast<int>(t.rung_objective.size()) - 1;
      const auto [place, of] = place_at_rung(p, i, rung, record_.higher_is_better);
      t.status = TrialStatus::Stopped;
      record_.decisions.push_back(
          {t.id, false, record_.rungs[static_cast<size_t>(rung)], 0, place, of,
           static_cast<int>(of / record_.halving.value_or(HalvingSettings{}).factor)});
      // Its checkpoint is not needed any more.
      fs::remove_all(trial_files(out_, t.id).checkpoints);
    }
  }
  // The best trial: its spec and weights beside the results.
  // The best trial that trained the whole budget (under halving, a stopped trial was compared at
  // fewer epochs).
  const TrialRecord* best = nullptr;
  if (const std::vector<size_t> order = trials_by_objective(record_); !order.empty()) {
    const TrialRecord& first = record_.trials[order.front()];
    if ((first.status == TrialStatus::Finished || first.status == TrialStatus::EarlyStopped) &&
        !std::isnan(first.objective))
      best = &first;
  }
  if (best) {
    record_.best = best->id;
    const TrialFiles f = trial_files(out_, best->id);
    write_file_atomic(out_ / "best.toml", read_file(f.spec));
    if (fs::exists(f.weights)) {
      fs::copy_file(f.weights, out_ / "best.safetensors", fs::copy_options::overwrite_existing);
    }
  }
  // What the same search would take and cost elsewhere.
  try {
    Catalog catalog = load_user_catalog(o_.cost);
    std::vector<DevicePeaks> peaks;
    std::map<std::string, bool> probed;
    std::vector<TrialCostInput> inputs;
    std::vector<size_t> priced;
    for (size_t i = 0; i < record_.trials.size(); ++i) {
      const TrialRecord& t = record_.trials[i];
      if (t.steps <= 0 || std::isnan(t.step_ms) || t.device.empty()) continue;
      if (!probed[t.device]) {
        auto backend = make_backend(parse_device(t.device, 0));
        peaks.push_back(device_peaks(*backend, false, default_peaks_cache()));
        probed[t.device] = true;
      }
      const Model model(specs_[i], *cpu_);
      const int64_t batch = specs_[i].train.batch;
      inputs.push_back({step_cost(model, batch), t.steps, t.step_ms / 1e3, device_kind_of(t.device),
                        t.device, t.process_seconds, t.train_seconds, specs_[i], batch});
      priced.push_back(i);
    }
    const AdviceOptions advice = with_profiles(o_.cost.advice);
    record_.cost = search_cost(inputs, peaks, catalog, advice, o_.instances, record_.cost_note);
    if (!record_.cost.empty()) {
      const SearchCostLine& cheapest = record_.cost.front();
      record_.dollars_instance = cheapest.instance;
      const CatalogDevice* device = catalog.find_device(cheapest.device);
      for (size_t n = 0; n < priced.size() && device; ++n) {
        bool lower = false;
        const double s = predicted_trial_seconds(inputs[n], *device, peaks, advice, lower);
        record_.trials[priced[n]].dollars = s / 3600 * cheapest.price_per_hour;
      }
    }
  } catch (const UserError& e) {
    record_.cost_note = fmt::format("not priced: {}", e.what());
  }
}

TuneRecord Search::snapshot() const {
  TuneRecord r = record_;
  r.wall_seconds = wall_before_ + seconds_since(started_);
  r.device_seconds = 0;
  for (const TrialRecord& t : r.trials) r.device_seconds += t.process_seconds;
  r.interrupted = interrupted_;
  return r;
}

void Search::write_results() const {
  const TuneRecord r = snapshot();
  nlohmann::json j = to_json(r);
  const nlohmann::json machine = to_json(describe_machine());
  j["machine"] = machine;
  write_file_atomic(out_ / "results.json", j.dump(2) + "\n");
  write_file_atomic(out_ / "results.csv", tune_csv(r));
  write_file_atomic(out_ / "report.html", render_tune_html(r, machine));
}

int Search::run() {
  prepare();
  load_or_start();
  for (size_t i = 0; i < specs_.size(); ++i) {
    const TrialFiles f = trial_files(out_, record_.trials[i].id);
    fs::create_directories(f.dir);
    write_file_atomic(f.spec, to_toml(with_absolute_paths(specs_[i])));
  }
  if (world_ && world_->size() > 1) {
    make_rank_slots();
  } else {
    choose_parallel();
    make_slots();
  }
  if (!o_.quiet) {
    std::vector<std::string> where;
    for (const ParallelChoice& c : record_.parallel) {
      where.push_back(fmt::format("{} at once on {}{}", c.k, c.device,
                                  c.measured ? " (measured fastest)" : ""));
    }
    fmt::print("{}: {} trials ({}), {} by {}; {}\n", terminal_safe(base_.name),
               record_.trials.size(), record_.mode, record_.higher_is_better ? "best" : "lowest",
               record_.objective, fmt::join(where, ", "));
    std::fflush(stdout);
  }
  write_results();
  loop();
  if (world_ && world_->size() > 1) {
    for (int r = 1; r < world_->size(); ++r) world_->send(r, kTagStop, "end");
  }
  finish();
  write_results();
  if (!o_.quiet) fmt::print("\n{}", tune_table_text(snapshot()));
  fmt::print("results: {}\n", (out_ / "report.html").string());
  if (interrupted_) {
    fmt::print(stderr,
               "crossover: tune interrupted; finished trials are kept in {} and the same command "
               "goes on from there\n",
               out_.string());
    return 130;
  }
  return 0;
}

int run_tune(const TuneOptions& o) {
  // A process no launcher started never touches MPI.
  if (!mpi::launched()) return Search(o, nullptr).run();
  const mpi::World world;
  if (world.rank() != 0) return run_worker(world, o);
  try {
    return Search(o, &world).run();
  } catch (const std::exception& e) {
    end_job(world, e);  // every rank ends now, with rank 0's message
  }
}

}  // namespace

Command add_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  CLI::App* sub = app.add_subcommand(
      "tune", "Search hyper-parameters: trials at once on every device, halving, priced");
  sub->add_option("spec", o->spec, "Built-in model name, spec file, or ONNX model")->required();
  sub->add_option("--vary", o->vary,
                  "KEY=V1,V2,... or KEY=A..B[:log] (repeatable): lr, optimizer, epochs, seed, "
                  "depth, width, batch, sequence, any dotted spec key (train.optimizer.momentum, "
                  "model.layers.0.out, data.validation_split), or TYPE.KEY (dropout.p)")
      ->required();
  sub->add_option("--samples", o->samples,
                  "Draw this many random trials (ranges and lists) instead of the whole grid")
      ->check(positive_number());
  sub->add_option("--seed", o->seed, "Seed of the random draws")->capture_default_str();
  sub->add_option("--objective", o->objective,
                  "What ranks trials: val_accuracy, val_loss, test_accuracy, test_loss or loss "
                  "(default: validation, else test accuracy, else the training loss)");
  sub->add_flag("--halving", o->halving,
                "Successive halving (ASHA): weak trials stop early, strong ones get more epochs");
  sub->add_option("--min-epochs", o->min_epochs, "Halving: the epochs every trial gets first")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--factor", o->factor,
                  "Halving: the top 1/factor go on, with factor times the epochs")
      ->check(CLI::Range(2, 100))
      ->capture_default_str();
  sub->add_option("--epochs", o->epochs, "Override train.epochs (the most any trial trains)")
      ->check(positive_number());
  sub->add_option("--parallel", o->parallel,
                  "Trials at once per device (default: measured, the fastest of 1, 2, 4, ...)")
      ->check(positive_number());
  sub->add_option("--threads", o->threads,
                  "CPU threads per trial (default: the cores shared among the trials at once)")
      ->check(positive_number());
  sub->add_option("--device", o->devices,
                  "Devices to run trials on (repeatable: cpu, cuda:N; default: every device)");
  sub->add_option("--out", o->out, "Results folder (the same one goes on a stopped search)")
      ->capture_default_str();
  sub->add_flag("--restart", o->restart, "Discard a search already in --out and start afresh");
  sub->add_option("--instances", o->instances,
                  "Instances in parallel for the search's predicted cost elsewhere")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--probe-steps", o->probe_steps,
                  "Steps each process trains when measuring trials at once")
      ->check(positive_number())
      ->capture_default_str();
  sub->add_option("--checkpoint-every", o->checkpoint_every,
                  "Each trial's checkpoints: every DURATION (30s, 5m) or N steps (500steps); a "
                  "stopped search goes on from them (halving needs them: not off)")
      ->capture_default_str();
  sub->add_flag("--quiet,-q", o->quiet, "Print only the final table");
  add_cost_options(sub, o->cost);
  return {sub, [o] { return run_tune(*o); }};
}

}  // namespace xo::cli

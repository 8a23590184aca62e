#include "tune/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <thread>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "dist/mpi.h"
#include "dist/process.h"
#include "measure/peaks.h"
#include "model/cost.h"
#include "model/model.h"
#include "tune/halving.h"
#include "tune/search_cost.h"
#include "tune/space.h"
#include "tune/trials.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// MPI tags: a job for a worker rank, its end, and the end of the search.
constexpr int kTagJob = 1, kTagDone = 2, kTagStop = 3;
constexpr auto kPoll = std::chrono::milliseconds(20);

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
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

// This rank's slot under MPI, as a reply to rank 0: "ok", its device and threads, or why it cannot
// see --out (the token rank 0 wrote there).
std::vector<std::string> rank_slot(const mpi::World& world, const std::vector<std::string>& wanted,
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
  std::vector<std::string> devices = wanted.empty() ? list.available : wanted;
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

class Search {
 public:
  Search(const SearchOptions& o, SearchIo& io, const mpi::World* world)
      : o_(o), io_(io), world_(world) {}
  SearchOutcome run();

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
  void publish() const { io_.publish(snapshot()); }
  void price();
  // The record as it stands, with the search's wall time and device time so far.
  TuneRecord snapshot() const;
  std::vector<TrialProgress> progress() const;
  std::optional<HalvingJob> resumed_job() const;

  const SearchOptions& o_;
  SearchIo& io_;
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
  lock_.emplace(out_, o_.command_line, "--out");
  base_ = resolve_spec(o_.spec);
  if (o_.epochs) base_.train.epochs = *o_.epochs;
  // A cosine schedule over "train.epochs" keeps that length when halving pauses a trial early.
  if (base_.train.schedule && base_.train.schedule->t_max == 0)
    base_.train.schedule->t_max = base_.train.epochs;
  io_.resolved(base_);
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
    io_.note(fmt::format("note: the space holds {} distinct trials, fewer than --samples {}",
                         points.size(), o_.samples));
  }
  // The data once, before any trial: a bad file fails now, and the splits decide the objective.
  cpu_ = make_backend(parse_device("cpu", 0));
  const Model model(base_, *cpu_);
  const DataSplit data = load_data(base_.data, data_request(base_, model.classes()));
  metric_ = objective_metric(o_.objective, base_, data, model.regression());

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
  TuneRecord was = io_.read_record(file);
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
  io_.note(fmt::format("crossover: {} of {} trials in {} are kept; the search goes on", kept,
                       record_.trials.size(), out_.string()));
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
    const TrainResult r = io_.read_trial(results[i]);
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
      io_.measuring(k, id);
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
      world_->gather(join_args(rank_slot(*world_, o_.devices, token, fs::absolute(out_))));
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
    io_.decided(record_.decisions.back());
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
  publish();
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
    const TrainResult r = io_.read_trial(f.result);
    record_result(i, r);
    end_rung(t.objective);
    t.status = r.stopped_early ? TrialStatus::EarlyStopped
               : r.paused      ? TrialStatus::Paused
                               : TrialStatus::Finished;
  } else if (code == kExitDiverged) {
    try {
      record_result(i, io_.read_trial(f.result));
    } catch (const UserError&) {
    }
    t.objective = std::nan("");
    end_rung(std::nan(""));
    t.status = TrialStatus::Diverged;
    t.error = "the loss became NaN or infinite";
  } else if (code == kExitInterrupted || (interrupted_ && code >= 128)) {
    t.status = TrialStatus::Pending;  // its checkpoint continues it
  } else {
    t.status = TrialStatus::Failed;
    t.error = failure_text(f.log, code);
    end_rung(std::nan(""));
  }
  if (t.status != TrialStatus::Pending) io_.ended(t, record_.objective);
  publish();
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
  price();
}

// What the same search would take and cost elsewhere: each trial that trained predicted on the
// catalog's devices, priced on their instances (record_.cost), or why it is not priced.
void Search::price() {
  try {
    Catalog catalog = io_.catalog();
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
    const AdviceOptions advice = with_profiles(o_.advice);
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

SearchOutcome Search::run() {
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
  io_.started(record_);
  publish();
  loop();
  if (world_ && world_->size() > 1) {
    for (int r = 1; r < world_->size(); ++r) world_->send(r, kTagStop, "end");
  }
  finish();
  publish();
  return {snapshot(), out_};
}

}  // namespace

SearchOutcome run_search(const SearchOptions& o, SearchIo& io, const mpi::World* world) {
  return Search(o, io, world).run();
}

int run_search_worker(const mpi::World& world, const std::vector<std::string>& devices) {
  const std::vector<std::string> start = split_args(world.broadcast(""));
  world.gather(join_args(rank_slot(world, devices, start.at(1), start.at(0))));
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

}  // namespace xo

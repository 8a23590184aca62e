#include "tune/search.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "distributed/mpi.h"
#include "measure/peaks.h"
#include "model/model.h"
#include "model/work.h"
#include "train/checkpoint.h"
#include "train/memory.h"
#include "tune/parallel.h"
#include "tune/ranks.h"
#include "tune/resume.h"
#include "tune/search_cost.h"
#include "tune/slots.h"
#include "tune/space.h"
#include "tune/standing.h"
#include "tune/trial_process.h"
#include "tune/trial_result.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The longest the search waits for a trial to end before it looks again.
constexpr auto kPoll = std::chrono::milliseconds(20);
// The least time between two records written for starts and ends (the search's first start and its
// end write one at once): a progress view, since a trial's result is on disk before its end is
// seen and a search that goes on takes it back from there (take_back_results), and a trial the
// record has as pending or running trains again. A 64-trial disc-4 search on a Dask cluster wrote
// one between its two groups' ends (4 ms of the client's CPU beside the group still training), a
// 16-trial width sweep one before each of its 16 jobs.
constexpr auto kProgressEvery = std::chrono::seconds(1);

// Work done beside the trials, which must not slow them (their timings are the search's figures):
// the calling thread at the lowest priority (nice 19, about 1.5% of a core that something else
// wants; Linux's nice is per thread). Returns its thread id, for raising it back where it is waited
// for.
pid_t run_at_lowest_priority() {
  const auto tid = static_cast<pid_t>(::syscall(SYS_gettid));
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 19);
  return tid;
}

// best.toml: the best trial's spec, naming its trained weights (best.safetensors beside it) as
// its initial weights where they were saved, with a header that says what it is.
std::string best_spec_text(const TrialRecord& best, const TrialFiles& f) {
  ModelSpec spec = load_spec_file(f.spec);
  std::vector<std::string> values;
  for (const auto& [key, value] : best.values) values.push_back(key + " = " + value);
  std::string text =
      fmt::format("# The best trial of this search, {} ({}).\n", best.id, fmt::join(values, ", "));
  if (fs::exists(f.weights)) {
    spec.init = "best.safetensors";
    text +=
        "# model.init names its trained weights: `crossover train best.toml` trains on from "
        "them;\n# remove that line to train the same settings from the start.\n";
  }
  return text + to_toml(spec);
}

class Search {
 public:
  Search(const SearchOptions& o, SearchHooks& hooks, const mpi::World* world)
      : o_(o), hooks_(hooks), world_(world) {}
  TuneRecord run();

 private:
  void prepare();
  // prepare's parts: the base spec read and the search's settings checked; every trial's spec
  // (its point of the grid or sample) and which could fuse; the most trials a group may hold.
  void read_base();
  std::vector<Assignment> make_trials();
  void size_groups(const Model& model, const DataSplit& data, size_t trials);
  void lay_out(const std::vector<Assignment>& points);
  void load_or_start();
  size_t take_back_results();
  void write_trial_specs() const;
  std::vector<Slot> make_slots();
  void take_new_slots();
  void loop();
  // Starts the next jobs on the free slots, publishing the record once if it started any.
  bool fill_free_slots();
  void start_pricing();
  // The most trials fused in one group on `device` (0: a process per trial): on the CPU, --fuse's
  // (auto: up to kMaxAutoFuse, the size measured fastest) within the memory free; on a GPU an
  // explicit --fuse K, or under auto gpu_fuse_cap_.
  int fuse_limit(const std::string& device) const;
  int gpu_fuse_cap(const DataSplit& data) const;
  std::vector<HalvingJob> group_for(size_t slot, const HalvingJob& first);
  // The steps taken at trial i's newest checkpoint (-1: none), where its next job starts.
  int64_t resume_step(size_t i) const {
    return newest_checkpoint(trial_files(out_, record_.trials[i].id).checkpoints).value_or(-1);
  }
  // A job on a slot: its trials marked running in the record, their old outputs cleared, and the
  // arguments of the process that trains them (started once the record says so).
  struct JobStart {
    size_t slot;
    std::vector<std::string> args;
  };
  JobStart prepare_job(size_t slot, const std::vector<HalvingJob>& group);
  void job_ended(const HalvingJob& job, const JobRunner::Ended& end, const fs::path& log,
                 bool grouped);
  void note_concurrent(size_t slot);
  // A slot running a job, or given one that starts once the record says so (fill_free_slots).
  bool taken(size_t slot) const { return runner_->busy(slot) || starting_[slot]; }
  void job_done(const JobRunner::Ended& end);
  void finish();
  void price();
  std::vector<TrialCostInput> cost_inputs(std::vector<DevicePeaks>& peaks,
                                          std::vector<size_t>& priced) const;
  // The record as it stands, with the search's wall time and device time so far.
  TuneRecord snapshot() const;
  void publish() {
    hooks_.publish(snapshot());
    published_ = Clock::now();
    end_unpublished_.assign(record_.trials.size(), false);
  }
  // Whether a trial of `group` ended since the record was last written.
  bool ended_unpublished(const std::vector<HalvingJob>& group) const;

  const SearchOptions& o_;
  SearchHooks& hooks_;
  const mpi::World* world_;
  fs::path out_;
  std::optional<FolderLock> lock_;
  ModelSpec base_;
  std::vector<Dimension> dims_;
  std::vector<ModelSpec> specs_;
  Metric metric_ = Metric::Loss;
  TuneRecord record_;
  std::unique_ptr<JobRunner> own_runner_;      // this machine's slots, or the MPI ranks'
  JobRunner* runner_ = nullptr;                // it, or the hooks' (a Dask cluster's workers)
  std::vector<std::vector<HalvingJob>> jobs_;  // each busy slot's (several: a fused group)
  std::vector<fs::path> logs_;                 // each busy slot's process's log
  std::vector<std::string> fusion_keys_;       // per trial: trials of one key may train as one
  std::vector<bool> fuses_;  // per trial: another trial has its key (else it always trains alone)
  int groups_started_ = 0;
  // Every trial's epochs of steps, summed: what the probes' budgets are a share of.
  int64_t search_steps_ = 0;
  int fuse_ = 0;          // --fuse, or 0 where no two trials could train as one
  int fuse_cap_ = 0;      // the most trials in a fused group on the CPU (0: not fused)
  int gpu_fuse_cap_ = 0;  // the same on a GPU under --fuse auto (what every GPU's memory holds)
  std::vector<ParallelOption> fuse_options_;  // the group sizes measured for it (--fuse auto)
  std::vector<bool> running_;                 // per trial
  std::vector<bool> starting_;  // per slot: given a job not started yet (fill_free_slots)
  std::unique_ptr<Backend> cpu_;
  // Whether trials run on this machine's CPU (--device names it, or names nothing).
  bool trials_on_cpu() const {
    return o_.devices.empty() ||
           std::find(o_.devices.begin(), o_.devices.end(), "cpu") != o_.devices.end();
  }
  // The catalog and the advice options the price needs (the device profiles unpacked), read on a
  // thread of their own at the lowest priority (start_pricing).
  std::future<std::pair<Catalog, AdviceOptions>> pricing_;
  std::atomic<pid_t> pricing_thread_{0};
  Clock::time_point started_ = Clock::now();
  Clock::time_point published_{};      // when the record was last written
  std::vector<bool> end_unpublished_;  // each trial: it ended since then
  double wall_before_ = 0;             // a stopped search's wall time before this start
  bool interrupted_ = false;
};

void Search::prepare() {
  out_ = o_.out;
  check_writable_path(out_ / "results.json", "--out");
  lock_.emplace(out_, o_.command_line, "--out");
  read_base();
  const std::vector<Assignment> points = make_trials();
  // The data once, before any trial: a bad file fails now, and the splits decide the objective.
  // A precision this CPU cannot run is refused now too, where trials run on it.
  cpu_ = make_backend(parse_device("cpu", 0));
  if (trials_on_cpu() && o_.precision != "f32") make_backend(parse_device("cpu", 0, o_.precision));
  const Model model(base_, *cpu_);
  std::optional<DataSplit> loaded;
  if (!o_.data) loaded = load_data(base_.data, data_request(base_, model.classes()));
  const DataSplit& data = o_.data ? *o_.data : *loaded;
  metric_ = objective_metric(o_.objective, base_, data, model.regression());
  lay_out(points);
  // Every trial's epochs of full steps (halving stops some sooner: a probe's share is then larger
  // than kFuseProbeShare, never smaller).
  const int64_t samples = data.train.samples;
  for (const ModelSpec& s : specs_) {
    const int64_t batch = std::max<int64_t>(1, std::min(s.train.batch, samples));
    search_steps_ += s.train.epochs * ((samples + batch - 1) / batch);
  }
  size_groups(model, data, points.size());
}

void Search::read_base() {
  base_ = hooks_.read_spec(o_.spec);
  if (o_.epochs) base_.train.epochs = *o_.epochs;
  // A cosine schedule over "train.epochs" keeps that length when halving pauses a trial early.
  if (base_.train.schedule && base_.train.schedule->t_max == 0)
    base_.train.schedule->t_max = base_.train.epochs;
  hooks_.spec_read(base_);
  if (o_.vary.empty()) throw UserError("tune: give at least one --vary KEY=V1,V2,...");
  if (!parse_checkpoint_interval(o_.checkpoint_every, "--checkpoint-every").enabled()) {
    throw UserError(
        "--checkpoint-every off: a trial's checkpoints are how a stopped search and halving go on");
  }
}

std::vector<Assignment> Search::make_trials() {
  for (const std::string& v : o_.vary) dims_.push_back(parse_dimension(v));
  // Each value the spec does not take fails here, before the data is read: in a grid every value
  // is some trial's; samples may leave one out, so each is set on the base alone first.
  if (o_.samples > 0) check_dimensions(base_, dims_);
  const std::vector<Assignment> points =
      o_.samples > 0 ? sample(dims_, o_.samples, o_.seed) : grid(dims_);
  if (o_.samples > 0 && static_cast<int64_t>(points.size()) < o_.samples) {
    hooks_.fewer_trials(points.size(), o_.samples);
  }
  for (const Assignment& a : points) {
    specs_.push_back(trial_spec(base_, dims_, a));
    fusion_keys_.push_back(fusion_key(specs_.back()));
  }
  std::map<std::string, int> sharing;
  for (const std::string& key : fusion_keys_) ++sharing[key];
  for (const std::string& key : fusion_keys_) fuses_.push_back(sharing[key] > 1);
  // No two trials that could train as one: the search runs as --fuse off (how many trials at
  // once is measured), a process per trial.
  fuse_ = o_.fuse;
  if (fuse_ != 0 && std::none_of(fuses_.begin(), fuses_.end(), [](bool f) { return f; })) {
    fuse_ = 0;
    hooks_.nothing_fuses();
  }
  return points;
}

void Search::size_groups(const Model& model, const DataSplit& data, size_t trials) {
  // The most trials a group may hold: --fuse's, or up to kMaxAutoFuse, and never more than the
  // memory free now holds (train/memory.h), so that a group is not refused, or killed, for it.
  if (fuse_ != 0) {
    fuse_cap_ = fuse_ == kFuseAuto ? kMaxAutoFuse : fuse_;
    if (const auto fit = fused_trials_that_fit(model, data, base_.train))
      fuse_cap_ = static_cast<int>(std::min<int64_t>(fuse_cap_, *fit));
  }
  // --fuse auto on a GPU: every trial ready, up to kMaxAutoFuse and what each GPU's memory holds,
  // not timed. On an H200 every MLP measured trained more trial-steps a second in each larger
  // group up to 64, a CNN's group (its convolutions trial by trial) about as many as one trial
  // alone; and each trial fused saves a process's start, most of a trial's cost there
  // (docs/benchmarks.md, "Fused trials on an H200").
  if (fuse_ == kFuseAuto) gpu_fuse_cap_ = gpu_fuse_cap(data);
  // --fuse auto on this machine's CPU: the group size that trains fastest here, measured (not
  // under MPI, whose ranks' slots are not this machine's alone, nor for a runner of the caller's,
  // a Dask cluster's workers: there the ready trials are shared among the slots untimed, as on a
  // GPU; timing them here cost a 16-trial mnist-mlp search 0.8 s of idle workers).
  if (fuse_ == kFuseAuto && trials_on_cpu() && hooks_.runner() == nullptr &&
      !(world_ && world_->size() > 1)) {
    FuseProbe probe;
    probe.steps = o_.probe_steps;
    probe.search_steps = search_steps_;
    probe.measuring = [this] { hooks_.measuring_groups("cpu"); };
    auto backend = make_backend(parse_device("cpu", o_.threads, o_.precision));
    const int most = std::min(fuse_cap_, static_cast<int>(trials));
    fuse_cap_ = measure_fuse_cap(*backend, base_, data, most, probe, fuse_options_);
  }
}

// The record of a search not started yet: what it varies and ranks by, its rungs, its trials.
void Search::lay_out(const std::vector<Assignment>& points) {
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
  }
  running_.assign(points.size(), false);
}

// The same search in --out goes on; another is refused unless --restart.
void Search::load_or_start() {
  const fs::path file = out_ / "results.json";
  if (!fs::exists(file)) return;
  if (o_.restart) {
    fs::remove_all(out_ / "trials");
    fs::remove_all(out_ / "groups");
    fs::remove(file);
    return;
  }
  TuneRecord was = hooks_.read_record(read_file(file), file.string());
  wall_before_ = was.wall_seconds;
  const size_t kept = continue_search(record_, std::move(was), out_.string());
  hooks_.resumed(kept + take_back_results(), record_.trials.size());
}

// A trial trained to its end, or to the end of its halving rung, whose result the search never
// recorded (killed after the trial's process wrote it, before the record was) is taken back from
// its result.json, not trained again: a retrained trial's objective once moved 30% and the ranking
// with it. A result that does not read, of a run stopped or diverged, or (halving) not at the end
// of the rung the record is at, leaves the trial to train.
size_t Search::take_back_results() {
  size_t taken = 0;
  for (TrialRecord& t : record_.trials) {
    const TrialFiles f = trial_files(out_, t.id);
    if (t.status != TrialStatus::Pending || !fs::is_regular_file(fs::symlink_status(f.result)))
      continue;
    try {
      const TrainResult r = hooks_.read_result(read_regular_file(f.result), f.result.string());
      if (r.interrupted || r.stopped_diverged || r.step_limited) continue;
      // The rung it ended: without halving the one, whole run (never paused); with it, the rung
      // its epochs end, the one after those the record has (a paused rung's job, or the last's).
      const auto rung = std::find(record_.rungs.begin(), record_.rungs.end(), epochs_completed(r));
      const auto at = static_cast<size_t>(rung - record_.rungs.begin());
      if (record_.halving ? rung == record_.rungs.end() || at != t.rung_objective.size()
                          : r.paused) {
        continue;
      }
      record_result(t, r, metric_);
      end_rung(t, record_.halving ? static_cast<int>(at) : 0, t.objective);
      t.status = trained_status(r);
      ++taken;
    } catch (const UserError&) {
      // Damaged: the trial trains again.
    }
  }
  return taken;
}

void Search::write_trial_specs() const {
  // Written again by every start of the search (a crash that loses one loses nothing): renamed
  // into place whole, not synced.
  AtomicWrites specs(AtomicWrites::Keep::Rewritten);
  // The trials' folder is the search's own: a link planted at OUT/trials (while it was stopped,
  // or before it began) is removed, never written through.
  own_folder(out_ / "trials");
  for (size_t i = 0; i < specs_.size(); ++i) {
    const TrialFiles f = trial_files(out_, record_.trials[i].id);
    own_folder(f.dir);
    specs.replace(f.spec, to_toml(with_absolute_paths(specs_[i])));
  }
  specs.commit();
}

// Under MPI, one slot per rank (tune/ranks.h); else each local device's trials at once.
std::vector<Slot> Search::make_slots() {
  if (world_ && world_->size() > 1) {
    std::vector<Slot> slots = rank_slots(*world_, out_, o_.devices, o_.threads);
    record_.parallel.clear();
    for (const Slot& s : slots)
      record_.parallel.push_back(
          {fmt::format("rank {} ({}): {}", s.rank, s.host, s.device), 1, false, {}});
    record_.ranks = world_->size();
    return slots;
  }
  const int cores = cpu_->info().threads;
  ParallelSettings s;
  s.parallel = o_.parallel;
  s.threads = o_.threads;
  s.cores = cores;
  s.spec = trial_files(out_, record_.trials[0].id).spec;
  s.dir = out_ / "parallel";
  s.steps = o_.probe_steps;
  s.precision = o_.precision;
  s.search_steps = search_steps_;
  s.trials = static_cast<int>(specs_.size());
  s.read_result = [this](const std::string& text, const std::string& origin) {
    return hooks_.read_result(text, origin);
  };
  s.measuring = [this](int k, const std::string& device) { hooks_.measuring(k, device); };
  s.fused_cpu = fuse_cap_;
  s.fused_gpu = fuse_limit("cuda");
  s.fused_options = fuse_options_;
  choose_parallel(record_.parallel, o_.devices.empty() ? list_devices().available : o_.devices, s);
  return local_slots(record_.parallel, o_.threads, cores);
}

void Search::loop() {
  bool stopping = false;
  bool unpublished = false;  // starts or ends that no record written since holds
  while (true) {
    if (stop_requested() && !stopping) {
      stopping = interrupted_ = true;
      runner_->interrupt();
    }
    // Starts and ends reach the record together, at most every kProgressEvery (each record costs
    // its fsyncs: docs/benchmarks.md, "A search's own costs and groups of one").
    if (!stopping && fill_free_slots()) unpublished = true;
    if (!runner_->any_busy()) break;
    if (unpublished && Clock::now() - published_ >= kProgressEvery) {
      publish();
      unpublished = false;
    }
    const std::vector<JobRunner::Ended> ended = runner_->collect_ended();
    for (const JobRunner::Ended& e : ended) job_done(e);
    // Once for every end seen together, unless nothing runs and nothing is left to start: the
    // search then ends, and its record is written with its price (finish).
    const bool goes_on = runner_->any_busy() || (!stopping && next_job(record_, running_));
    if (!ended.empty() && goes_on) unpublished = true;
    if (ended.empty()) runner_->wait_for_end(kPoll);
  }
}

// The runner's slots sized for, those that joined since included (a worker joined the hooks'
// cluster): each takes jobs from now on, and the record lists it.
void Search::take_new_slots() {
  runner_->refresh();
  const std::vector<Slot>& slots = runner_->slots();
  for (size_t s = jobs_.size(); s < slots.size() && !own_runner_; ++s) {
    record_.parallel.push_back(
        {fmt::format("{}: {}", slots[s].host, slots[s].device), 1, false, {}, fuse_cap_});
  }
  jobs_.resize(slots.size());
  logs_.resize(slots.size());
  starting_.resize(slots.size(), false);
}

bool Search::fill_free_slots() {
  take_new_slots();
  std::vector<JobStart> starts;
  for (size_t s = 0; s < runner_->slots().size(); ++s) {
    if (runner_->busy(s) || runner_->gone(s)) continue;
    const std::optional<HalvingJob> job = next_job(record_, running_);
    if (!job) break;
    const std::vector<HalvingJob> group = group_for(s, *job);
    // A trial that goes on after an end no record holds yet (a halving rung's survivor): the end
    // is written before its job removes the result it was read from (prepare_job).
    if (ended_unpublished(group)) publish();
    starts.push_back(prepare_job(s, group));
    starting_[s] = true;
  }
  if (starts.empty()) return false;
  for (const JobStart& j : starts) note_concurrent(j.slot);
  // The first start writes the record before the jobs run: a search stopped from then on goes on
  // from it (take_back_results); later starts reach it with the next record (loop).
  if (published_ == Clock::time_point{}) publish();
  for (const JobStart& j : starts) runner_->start(j.slot, j.args, logs_[j.slot]);
  starting_.assign(starting_.size(), false);
  // A job ready and no slot free for it: its process starts now, its job once a slot frees.
  if (next_job(record_, running_)) runner_->park();
  start_pricing();
  return true;
}

// The catalog and the profiles the price needs, read on a thread of their own at the lowest
// priority once the first trials have started: after prepare (a group size it times is not timed
// beside them) and beside the trials' process starts, which leave a core idle. Begun before the
// trials' specs were written, beside them, they made a fused search longer (docs/benchmarks.md,
// "Profiles packed at build time, and what a search writes").
void Search::start_pricing() {
  if (pricing_.valid()) return;
  pricing_ = std::async(std::launch::async, [this] {
    pricing_thread_ = run_at_lowest_priority();
    return std::make_pair(hooks_.catalog(), hooks_.advice());
  });
}

// The trials that train with `first` on `slot`: on a CPU with --fuse, the next jobs of the same
// rung whose trials may train as one with it (the same architecture, data and batch size), up to
// the group's size; else `first` alone.
int Search::fuse_limit(const std::string& device) const {
  if (device_kind_of(device) == DeviceKind::Cpu) return fuse_cap_;
  return fuse_ == kFuseAuto ? gpu_fuse_cap_ : fuse_;
}

// The most fused trials every GPU the search may use holds (fused_trials_that_fit), up to
// kMaxAutoFuse; kMaxAutoFuse where it uses none (a GPU slot then never asks).
int Search::gpu_fuse_cap(const DataSplit& data) const {
  int cap = kMaxAutoFuse;
  const std::vector<std::string> devices =
      o_.devices.empty() ? list_devices().available : o_.devices;
  for (const std::string& d : devices) {
    if (device_kind_of(d) != DeviceKind::Gpu) continue;
    const std::unique_ptr<Backend> gpu = make_backend(parse_device(d, 0));
    const Model model(base_, *gpu);
    if (const auto fit = fused_trials_that_fit(model, data, base_.train)) {
      cap = static_cast<int>(std::min<int64_t>(cap, *fit));
    }
  }
  return cap;
}

std::vector<HalvingJob> Search::group_for(size_t slot, const HalvingJob& first) {
  std::vector<HalvingJob> group{first};
  const int limit = fuse_limit(runner_->slots()[slot].device);
  if (limit == 0 || !fuses_[first.trial]) return group;
  const bool automatic = fuse_ == kFuseAuto;
  const auto most = static_cast<size_t>(limit);
  // The jobs looked at are marked running for next_job to move on, and unmarked after.
  std::vector<size_t> looked{first.trial};
  running_[first.trial] = true;
  while (group.size() < most) {
    const std::optional<HalvingJob> next = next_job(record_, running_);
    if (!next) break;
    running_[next->trial] = true;
    looked.push_back(next->trial);
    // A group trains in lockstep: its trials go on from the same step (the same checkpoints).
    if (next->rung == first.rung && fusion_keys_[next->trial] == fusion_keys_[first.trial] &&
        resume_step(next->trial) == resume_step(first.trial)) {
      group.push_back(*next);
    }
  }
  for (const size_t i : looked) running_[i] = false;
  if (automatic) {
    // The ready trials shared among the free slots of this kind of device, so that every slot
    // gets a group.
    const DeviceKind kind = device_kind_of(runner_->slots()[slot].device);
    size_t free = 0;
    for (size_t s = 0; s < runner_->slots().size(); ++s) {
      free += !taken(s) && !runner_->gone(s) && device_kind_of(runner_->slots()[s].device) == kind;
    }
    group.resize((group.size() + free - 1) / std::max<size_t>(free, 1));
  }
  return group;
}

Search::JobStart Search::prepare_job(size_t slot, const std::vector<HalvingJob>& group) {
  const Slot& where = runner_->slots()[slot];
  // A trial no other trial of the search fuses with (another architecture, batch size or data)
  // trains alone, in a process of its own as with --fuse off: no group of one is ever its group.
  const bool fused = fuse_limit(where.device) > 0 && fuses_[group.front().trial];
  const HalvingJob& first = group.front();
  const bool last = first.rung + 1 == static_cast<int>(record_.rungs.size());
  const std::optional<int64_t> pause =
      last ? std::nullopt : std::optional<int64_t>(record_.rungs[static_cast<size_t>(first.rung)]);
  const std::string group_id = fused ? fmt::format("g{:03}", ++groups_started_) : "";
  std::vector<TrialFiles> files;
  for (const HalvingJob& job : group) {
    TrialRecord& t = record_.trials[job.trial];
    const TrialFiles f = trial_files(out_, t.id);
    if (job.promotion) {
      const int64_t at = record_.rungs[static_cast<size_t>(job.rung - 1)];
      record_.decisions.push_back({t.id, true, at, record_.rungs[static_cast<size_t>(job.rung)],
                                   job.place, job.of, job.top});
      hooks_.promoted(record_.decisions.back());
    }
    t.status = TrialStatus::Running;
    t.device = where.device;
    t.threads = where.threads;
    t.rank = where.rank;
    t.host = where.host;
    t.group = group_id;
    t.fused = static_cast<int>(group.size());
    running_[job.trial] = true;
    // What the trial's process writes, in a folder of the search's own: never through a link
    // planted there while the search was stopped (its checkpoints' folder it makes when it first
    // writes one).
    for (const fs::path& p : {f.log, f.result, f.weights}) remove_unless_regular(p);
    remove_unless_folder(f.checkpoints);
    // A result there after the job is the job's: an earlier rung's (a promoted trial's), read for
    // a group that failed before it wrote its results, had the trial trained and promoted again,
    // its group started again and again (the record has what the earlier rung gave).
    std::error_code ignored;
    fs::remove(f.result, ignored);
    files.push_back(f);
  }
  jobs_[slot] = group;
  // A group's output goes to a log of its own (each trial's log gets its summary line).
  logs_[slot] = fused ? out_ / "groups" / (group_id + ".log") : files[0].log;
  if (fused) {
    own_folder(out_ / "groups");
    remove_unless_regular(logs_[slot]);
  }
  return {slot, fused ? group_args(files, where.device, where.threads, pause, o_.checkpoint_every,
                                   o_.precision)
                      : train_args(files[0], where.device, where.threads, pause,
                                   o_.checkpoint_every, o_.precision)};
}

// The most trials at once on this slot's device so far, for every trial running or starting on
// it: their timings are those of a shared device.
void Search::note_concurrent(size_t slot) {
  const std::vector<Slot>& slots = runner_->slots();
  auto beside = [&](size_t s) {
    return taken(s) && slots[s].device == slots[slot].device && slots[s].rank == slots[slot].rank;
  };
  int on_device = 0;
  for (size_t s = 0; s < slots.size(); ++s) on_device += beside(s);
  for (size_t s = 0; s < slots.size(); ++s) {
    if (!beside(s)) continue;
    for (const HalvingJob& job : jobs_[s]) {
      TrialRecord& other = record_.trials[job.trial];
      other.concurrent = std::max(other.concurrent, on_device);
    }
  }
}

bool Search::ended_unpublished(const std::vector<HalvingJob>& group) const {
  return std::any_of(group.begin(), group.end(), [&](const HalvingJob& j) {
    return j.trial < end_unpublished_.size() && end_unpublished_[j.trial];
  });
}

void Search::job_done(const JobRunner::Ended& end) {
  const std::vector<HalvingJob> group = jobs_[end.slot];
  end_unpublished_.resize(record_.trials.size(), false);
  for (const HalvingJob& job : group) {
    end_unpublished_[job.trial] = true;
    job_ended(job, end, logs_[end.slot], !record_.trials[job.trial].group.empty());
  }
}

// How one trial of the job that ended on a slot ended: a trial of its own from its process's
// exit code; a trial of a fused group from its result (the group's exit code says only whether
// the group was stopped, or failed before it wrote the results).
void Search::job_ended(const HalvingJob& job, const JobRunner::Ended& end, const fs::path& log,
                       bool grouped) {
  TrialRecord& t = record_.trials[job.trial];
  const TrialFiles f = trial_files(out_, t.id);
  running_[job.trial] = false;
  // The device's time, shared among the group's trials.
  t.process_seconds += end.seconds / std::max(1, t.fused);
  // Read once (a 64-trial disc-4 search read each result twice: 7 ms of its 90 here).
  std::optional<TrainResult> read;
  auto result = [&]() -> const TrainResult& {
    if (!read) read = hooks_.read_result(read_file(f.result), f.result.string());
    return *read;
  };
  ProcessEnd how = process_end(end.code, interrupted_);
  if (grouped && fs::exists(f.result)) {
    try {
      const TrainResult& r = result();
      // An interrupted result of a group that failed is an earlier run's (a group stopped
      // writes its results and exits as stopped): the group failed before it wrote this one.
      const bool failed = how == ProcessEnd::Failed || how == ProcessEnd::MachineFailed;
      how = r.interrupted        ? (failed ? how : ProcessEnd::Interrupted)
            : r.stopped_diverged ? ProcessEnd::Diverged
                                 : ProcessEnd::Trained;
    } catch (const UserError&) {
      how = ProcessEnd::Failed;
    }
  } else if (grouped && how != ProcessEnd::Interrupted && how != ProcessEnd::MachineFailed) {
    how = ProcessEnd::Failed;  // the group ended before it wrote this trial's result
  }
  switch (how) {
    case ProcessEnd::Trained: {
      const TrainResult& r = result();
      record_result(t, r, metric_);
      end_rung(t, job.rung, t.objective);
      t.status = trained_status(r);
      break;
    }
    case ProcessEnd::Diverged:
      try {  // its epochs before the loss diverged, where it wrote them
        record_result(t, result(), metric_);
      } catch (const UserError&) {
      }
      t.objective = std::nan("");
      end_rung(t, job.rung, std::nan(""));
      t.status = TrialStatus::Diverged;
      t.error = "the loss became NaN or infinite";
      break;
    case ProcessEnd::Interrupted:
      t.status = TrialStatus::Pending;  // its checkpoint continues it
      break;
    case ProcessEnd::MachineFailed:
    case ProcessEnd::Failed:
      t.status = TrialStatus::Failed;
      t.machine_failed = how == ProcessEnd::MachineFailed;
      t.error = failure_text(log, end.code);
      if (t.machine_failed) {
        t.error += " (the machine failed it, not its settings: the same command retries it)";
      }
      end_rung(t, job.rung, std::nan(""));
      break;
  }
  if (t.status != TrialStatus::Pending) hooks_.trial_ended(t, record_);
}

void Search::finish() {
  // Trials halving gave no more epochs to: their checkpoints are not needed any more.
  if (!interrupted_) {
    for (const size_t i : stop_paused_trials(record_))
      fs::remove_all(trial_files(out_, record_.trials[i].id).checkpoints);
  }
  // The best trial: its spec and weights beside the results.
  if (const TrialRecord* best = best_trial(record_)) {
    record_.best = best->id;
    const TrialFiles f = trial_files(out_, best->id);
    // Files of the search's own: whatever has their names (a link planted while it was stopped)
    // is replaced, never written through.
    AtomicWrites best_files;
    best_files.replace(out_ / "best.toml", best_spec_text(*best, f));
    if (fs::exists(f.weights)) best_files.replace(out_ / "best.safetensors", read_file(f.weights));
    best_files.commit();
  }
  price();
}

// Each trial that took steps, as the search's cost elsewhere sees it; `peaks` gets each device's
// measured peaks, `priced` the trials' indices.
std::vector<TrialCostInput> Search::cost_inputs(std::vector<DevicePeaks>& peaks,
                                                std::vector<size_t>& priced) const {
  std::map<std::string, bool> probed;
  std::vector<TrialCostInput> inputs;
  for (size_t i = 0; i < record_.trials.size(); ++i) {
    const TrialRecord& t = record_.trials[i];
    if (t.steps <= 0 || std::isnan(t.step_ms) || t.device.empty()) continue;
    if (!probed[t.device]) {
      auto backend = make_backend(parse_device(t.device, 0, o_.precision));
      peaks.push_back(device_peaks(*backend, false, default_peaks_cache()));
      probed[t.device] = true;
    }
    const Model model(specs_[i], *cpu_);
    const int64_t batch = specs_[i].train.batch;
    inputs.push_back({step_work(model, batch), t.steps, t.step_ms / 1e3, device_kind_of(t.device),
                      t.device, t.process_seconds, t.train_seconds, specs_[i], batch,
                      std::max(1, t.fused), step_key(specs_[i])});
    priced.push_back(i);
  }
  return inputs;
}

// What the same search would take and cost elsewhere (tune/search_cost.h), and each trial's
// dollars on the cheapest instance.
void Search::price() {
  try {
    // Waited for now: at the search's priority again where this process may raise it (root, or
    // RLIMIT_NICE), else at the lowest (the trials have ended: it has the cores it finds idle).
    start_pricing();  // no trial was left to start
    if (pricing_.wait_for(std::chrono::seconds(0)) != std::future_status::ready &&
        pricing_thread_ > 0)
      ::setpriority(PRIO_PROCESS, static_cast<id_t>(pricing_thread_.load()), 0);
    auto [catalog, advice] = pricing_.get();
    std::vector<DevicePeaks> peaks;
    std::vector<size_t> priced;
    const std::vector<TrialCostInput> inputs = cost_inputs(peaks, priced);
    // A price is the trials' seconds: no expected errors, and the group size most trials had (a
    // trial of another is predicted from a copy).
    advice.expected_errors = false;
    if (!inputs.empty() && inputs.front().fused > 1) advice.trials = inputs.front().fused;
    StepMemo memo;
    record_.cost =
        search_cost(inputs, peaks, catalog, advice, o_.instances, record_.cost_note, &memo);
    if (record_.cost.empty()) return;
    const SearchCostLine& cheapest = record_.cost.front();
    record_.dollars_instance = cheapest.instance;
    const CatalogDevice* device = catalog.find_device(cheapest.device);
    for (size_t n = 0; n < priced.size() && device; ++n) {
      bool lower = false;
      const double s = predicted_trial_seconds(inputs[n], *device, peaks, advice, lower, &memo);
      record_.trials[priced[n]].dollars = s / 3600 * cheapest.price_per_hour;
    }
  } catch (const UserError& e) {
    record_.cost_note = fmt::format("not priced: {}", e.what());
  }
}

TuneRecord Search::snapshot() const {
  TuneRecord r = record_;
  r.wall_seconds = wall_before_ + std::chrono::duration<double>(Clock::now() - started_).count();
  r.device_seconds = 0;
  for (const TrialRecord& t : r.trials) r.device_seconds += t.process_seconds;
  r.interrupted = interrupted_;
  return r;
}

TuneRecord Search::run() {
  prepare();
  load_or_start();
  write_trial_specs();
  runner_ = hooks_.runner();
  if (runner_) {
    record_.parallel.clear();  // its slots' lines (take_new_slots)
  } else {
    own_runner_ = std::make_unique<TrialRunner>(make_slots(), world_);
    runner_ = own_runner_.get();
  }
  jobs_.clear();
  take_new_slots();
  hooks_.started(record_);
  loop();
  runner_->release_workers();
  finish();
  publish();
  return snapshot();
}

}  // namespace

TuneRecord run_search(const SearchOptions& o, SearchHooks& hooks, const mpi::World* world) {
  return Search(o, hooks, world).run();
}

}  // namespace xo

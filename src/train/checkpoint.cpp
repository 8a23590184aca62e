// Checkpoints: when to take them, the snapshot taken between two steps, the background writer,
// the pruning of old ones, and the restore from the newest whole one (checkpoint.h says what the
// files guarantee; checkpoint_file.cpp writes and reads them).
#include "train/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/interrupt.h"
#include "data/source.h"
#include "train/checkpoint_file.h"
#include "train/plan.h"
#include "train/state.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kKept = 2;  // whole checkpoints kept: the newest, and one to fall back to

}  // namespace
CheckpointInterval parse_checkpoint_interval(const std::string& text, const std::string& flag) {
  if (text == "off") return {};
  const auto bad = [&] {
    return UserError(fmt::format(
        "{} '{}': expected a count of steps or a time, e.g. 500steps, 90s, 5min, 1h, or off", flag,
        text));
  };
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [unit_start, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || !(value > 0) || !std::isfinite(value)) throw bad();
  const std::string unit(unit_start, end);
  if (unit == "steps" || unit == "step") {
    if (value != std::floor(value) || value > 1e15) throw bad();
    return {static_cast<int64_t>(value), 0};
  }
  static const std::map<std::string, double> kSeconds = {
      {"s", 1}, {"sec", 1}, {"min", 60}, {"m", 60}, {"h", 3600}};
  const auto it = kSeconds.find(unit);
  if (it == kSeconds.end()) throw bad();
  return {0, value * it->second};
}

void CheckpointOptions::tell(const std::string& message) const {
  if (note) {
    note(message);
  } else {
    fmt::print(stderr, "crossover: {}\n", message);
  }
}

std::string describe(const CheckpointInterval& interval) {
  if (interval.steps > 0) return fmt::format("every {} steps", interval.steps);
  if (interval.seconds > 0) return fmt::format("every {:g} s", interval.seconds);
  return "off";
}

RunFingerprint run_fingerprint(const TrainPlan& p, const TrainSpec& train, bool record_step) {
  return run_fingerprint(p, train, record_step, data_fingerprint(p.split));
}

RunFingerprint run_fingerprint(const TrainPlan& p, const TrainSpec& train, bool record_step,
                               std::string data_hash) {
  ModelSpec spec = p.model.spec();
  spec.train = train;
  const DeviceInfo& d = p.backend.info();
  return {
      CROSSOVER_VERSION,
      to_toml(spec),
      std::move(data_hash),
      fmt::format("{} ({}), {}, {} threads, {}", d.id, d.name, d.library, d.threads, d.precision),
      fmt::format("{} batch shards, step {}", p.shards(),
                  record_step && p.recorded ? "recorded" : "launched"),
      p.data_parallel ? p.data_parallel->ranks() : 1};
}

struct Checkpointer::Impl {
  Impl(const TrainPlan& p, const CheckpointOptions& o, RunFingerprint f, int64_t steps_taken)
      : options(o),
        fingerprint(std::move(f)),
        layout{p.model.spec().name, p.model.tensors(), p.model.buffers(), {}},
        slot(p.model.spec().train.seed),
        last(Clock::now()),
        last_steps(steps_taken) {
    // The host side of the snapshot, sized once: saving copies into it.
    slot.params.resize(static_cast<size_t>(p.model.flat_size()));
    slot.buffers.resize(static_cast<size_t>(p.model.state_size()));
    for (const OptimizerStateBuffer& b : p.optimizer->state_buffers()) {
      layout.optimizer.emplace_back(b.name);
      slot.optimizer.emplace_back(static_cast<size_t>(p.model.flat_size()));
    }
  }

  ~Impl() {
    stop();
    if (writer.joinable()) writer.join();
  }

  // The writer starts with the first checkpoint: a run too short for one (a small trial of a
  // fused group, whose writers would start and end one after another) never has one.
  void hand_over() {
    if (!writer.joinable()) writer = std::thread([this] { write_loop(); });
    {
      std::lock_guard lock(mutex);
      pending = true;
      // From the hand-over to the end of its write, a second Ctrl-C ends the process only once
      // this checkpoint is whole (never half of one, and never the one being written lost).
      if (!whole) whole.emplace();
    }
    wake.notify_all();
  }

  // The writer ends once it holds no snapshot.
  void stop() {
    {
      std::lock_guard lock(mutex);
      quit = true;
    }
    wake.notify_all();
  }

  // Waits until the writer holds no snapshot.
  void wait_idle() {
    std::unique_lock lock(mutex);
    idle.wait(lock, [&] { return !pending; });
  }

  void write_loop() {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return pending || quit; });
      if (!pending) return;
      lock.unlock();
      write(slot);
      lock.lock();
      pending = false;
      whole.reset();  // where a second Ctrl-C came meanwhile, the process ends here
      idle.notify_all();
    }
  }

  // Writes one checkpoint, then prunes the older ones. A failure keeps the previous checkpoint.
  void write(const CheckpointSnapshot& s) {
    try {
      write_checkpoint(options.dir, s, layout, fingerprint);
      ++written;
      prune();
    } catch (const std::exception& e) {
      const std::optional<int64_t> previous = newest_checkpoint(options.dir);
      options.tell(fmt::format("warning: the checkpoint at step {} was not written ({}); {}",
                               s.state.steps_taken, e.what(),
                               previous
                                   ? fmt::format("the previous one, at step {}, is kept", *previous)
                                   : std::string("none is saved yet")));
    }
  }

  // Keeps the kKept newest checkpoints of the folder and removes everything else it wrote there
  // (older checkpoints, temporaries of a write that was killed).
  void prune() const {
    std::vector<int64_t> steps;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
      if (const int64_t n = checkpoint_steps(entry.path()); n >= 0) steps.push_back(n);
    }
    std::sort(steps.rbegin(), steps.rend());
    if (steps.size() > static_cast<size_t>(kKept)) steps.resize(kKept);
    for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("step-", 0) != 0) continue;
      const bool kept = std::any_of(steps.begin(), steps.end(), [&](int64_t n) {
        return file == checkpoint_stem(n) + ".json" || file == checkpoint_stem(n) + ".safetensors";
      });
      if (!kept) fs::remove(entry.path(), ec);
    }
  }

  CheckpointOptions options;
  RunFingerprint fingerprint;
  CheckpointLayout layout;
  CheckpointSnapshot slot;  // the writer's; the step loop fills it only while the writer is idle
  Clock::time_point last;   // of the last checkpoint, or the start
  int64_t last_steps;       // steps taken at the last checkpoint, or the start
  int64_t written = 0;
  double wait_ms = 0;

  std::mutex mutex;
  std::condition_variable wake, idle;
  bool pending = false, quit = false;
  std::optional<QuitAfterThis> whole;  // held while a snapshot is handed over and written
  std::thread writer;
};

Checkpointer::Checkpointer(const TrainPlan& p, const CheckpointOptions& options,
                           RunFingerprint fingerprint, int64_t steps_taken)
    : impl_(std::make_unique<Impl>(p, options, std::move(fingerprint), steps_taken)) {}

Checkpointer::~Checkpointer() = default;

bool Checkpointer::due(const TrainState& state) const {
  const CheckpointInterval& every = impl_->options.every;
  if (every.steps > 0 && state.steps_taken - impl_->last_steps >= every.steps) return true;
  if (every.seconds > 0) {
    return std::chrono::duration<double>(Clock::now() - impl_->last).count() >= every.seconds;
  }
  return false;
}

int64_t Checkpointer::steps_until_due(const TrainState& state) const {
  const int64_t every = impl_->options.every.steps;
  if (every <= 0) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(1, every - (state.steps_taken - impl_->last_steps));
}

void Checkpointer::save(TrainPlan& p, TrainState& state) {
  XO_ASSERT(!impl_->quit);  // not after close(): nothing would write it
  const auto start = Clock::now();
  impl_->wait_idle();
  CheckpointSnapshot& s = impl_->slot;
  Backend& be = p.backend;
  be.synchronize();
  be.download(s.params.data(), p.model.params(), sizeof(float) * s.params.size());
  if (!s.buffers.empty()) {
    be.download(s.buffers.data(), p.model.state(), sizeof(float) * s.buffers.size());
  }
  const std::vector<OptimizerStateBuffer> optimizer = p.optimizer->state_buffers();
  for (size_t k = 0; k < optimizer.size(); ++k) {
    be.download(s.optimizer[k].data(), optimizer[k].data, sizeof(float) * s.optimizer[k].size());
  }
  s.optimizer_steps = p.optimizer->steps();
  be.download(&s.step_counter, p.model.step_counter(), sizeof(s.step_counter));
  s.position = 0;
  if (p.position) be.download(&s.position, p.position.as<int64_t>(), sizeof(s.position));
  be.download(s.stats, p.stats, sizeof(s.stats));
  s.state = state;
  impl_->hand_over();
  impl_->last = Clock::now();
  impl_->last_steps = state.steps_taken;
  impl_->wait_ms += std::chrono::duration<double, std::milli>(impl_->last - start).count();
}

void Checkpointer::flush() { impl_->wait_idle(); }

void Checkpointer::close() {
  impl_->wait_idle();
  impl_->stop();
}

int64_t Checkpointer::written() const { return impl_->written; }
double Checkpointer::wait_ms() const { return impl_->wait_ms; }
const fs::path& Checkpointer::dir() const { return impl_->options.dir; }

std::optional<int64_t> newest_checkpoint(const fs::path& dir) {
  std::optional<int64_t> newest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (const int64_t n = checkpoint_steps(entry.path()); n >= 0 && (!newest || n > *newest)) {
      newest = n;
    }
  }
  return newest;
}

void remove_checkpoints(const fs::path& dir, CheckpointFolder folder) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("step-", 0) == 0) fs::remove(entry.path(), ec);
  }
  // Only when empty: the folder may hold other files.
  if (folder == CheckpointFolder::Remove) fs::remove(dir, ec);
}

namespace {

// What goes on differently where a fused trial's checkpoint of `was` batch shards resumes in
// `now` (a halving search's survivors regrouped).
std::string shards_changed_note(int was, int now) {
  return fmt::format(
      "the checkpoint was written in {} batch shard{} (a fused group's), and this run takes {}: "
      "each batch's gradient is summed in another order, so the trial goes on as in its group to "
      "f32 rounding, not bit for bit",
      was, was == 1 ? "" : "s", now);
}

// What goes on differently where a checkpoint of `was` ranks resumes on `now`.
std::string ranks_changed_note(const TrainPlan& p, int was, int now) {
  const auto ranks = [](int n) {
    return n == 1 ? std::string("one process") : fmt::format("{} ranks", n);
  };
  std::string note = fmt::format(
      "the checkpoint was written by {}, and this run has {}: each global batch is split anew "
      "(the same batches, in the same order), so the gradients are summed in another order and "
      "the run goes on as the uninterrupted one to f32 rounding, not bit for bit",
      ranks(was), ranks(now));
  if (p.model.has_batch_norm()) {
    note +=
        "; BatchNorm normalises over each rank's slice of a batch, so with another rank count "
        "its statistics, and the training from here, differ more than that";
  }
  return note;
}

}  // namespace

std::optional<int64_t> restore_checkpoint(TrainPlan& p, TrainState& state,
                                          const CheckpointOptions& options,
                                          const RunFingerprint& fingerprint, int64_t epochs) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
    if (const int64_t n = checkpoint_steps(entry.path()); n >= 0) {
      found.emplace_back(n, entry.path());
    }
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> damage;  // one line per damaged checkpoint, newest first
  for (const auto& [steps, file] : found) {
    try {
      CheckpointFile checkpoint = CheckpointFile::read(file);
      // A checkpoint of another run is refused outright; a damaged one falls back.
      const CheckpointWriter writer = checkpoint.check_fingerprint(fingerprint);
      checkpoint.validate(p, state, epochs);
      checkpoint.apply(p, state);
      // Told now, and carried by the result and every later checkpoint: the run is not
      // bit-identical to one never stopped (its first cause kept).
      std::string differently;
      if (writer.ranks != fingerprint.ranks)
        differently = ranks_changed_note(p, writer.ranks, fingerprint.ranks);
      if (writer.shards > 0) {
        differently +=
            (differently.empty() ? "" : "; ") + shards_changed_note(writer.shards, p.shards());
      }
      if (!differently.empty()) {
        options.tell(differently);
        if (state.resumed_differently.empty()) state.resumed_differently = differently;
      }
    } catch (const DamagedCheckpoint& e) {
      damage.push_back(fmt::format("{}: {}", file.filename().string(), e.what()));
      options.tell(fmt::format("warning: {}: damaged checkpoint ({}); trying the one before",
                               file.string(), e.what()));
      continue;
    }
    return steps;
  }
  // Checkpoints there, none usable: training from the beginning would silently throw away the
  // run; the person decides (--restart), having been told what is wrong with each.
  if (!damage.empty()) {
    throw UserError(fmt::format(
        "{}: no usable checkpoint to resume from ({} damaged: {}); --restart discards them and "
        "trains from the beginning",
        options.dir.string(), damage.size(), fmt::join(damage, "; ")));
  }
  return std::nullopt;
}

}  // namespace xo

// A checkpoint's JSON (step-N.json; checkpoint.h says what the files guarantee): written from a
// snapshot, signed with a checksum over its own content, and read back strictly: every field is
// checked against its range, the others and the run about to resume, and read into a copy of the
// training state, so that nothing is restored from a file that fails any check.
#include "train/checkpoint_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/json_depth.h"
#include "train/timing_series.h"

namespace xo {

namespace fs = std::filesystem;

namespace {

using Json = CheckpointJson;

// JSON numbers for doubles: finite values print with 17 significant digits (nlohmann's default),
// which read back to the same bits; the non-finite ones, which JSON lacks, as strings.
Json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}
double number(const Json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw UserError(fmt::format("'{}' is not a number", s));
  }
  return j.get<double>();
}
Json numbers(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(number(x));
  return a;
}
std::vector<double> numbers(const Json& j) {
  std::vector<double> v;
  v.reserve(j.size());
  for (const Json& x : j) v.push_back(number(x));
  return v;
}

// A series of step times: every time, the warm-up first (as every checkpoint before the series
// were bounded held them), or past TimingSeries::kExactSamples the warm-up, the running moments,
// the bins and each bin's samples (two flat arrays: a number a line in the file).
Json series_json(const TimingSeries& t) {
  if (!t.folded()) return numbers(t.samples());
  const TimingSeries::Folded& f = t.folded_state();
  Json bins = Json::array(), samples = Json::array();
  for (const auto& [bin, n] : f.bins) {
    bins.push_back(bin);
    samples.push_back(n);
  }
  return {{"warmup", number(t.warmup())}, {"count", f.count},
          {"mean", number(f.mean)},       {"m2", number(f.m2)},
          {"min", number(f.min)},         {"max", number(f.max)},
          {"bins", std::move(bins)},      {"samples", std::move(samples)}};
}

// The series back, checked: bins ascending, each holding samples, their samples the count.
TimingSeries read_series(const Json& j, const std::string& field) {
  if (j.is_array()) return TimingSeries::from_samples(numbers(j));
  if (!j.is_object()) throw DamagedCheckpoint(field + ": neither times nor folded times");
  TimingSeries::Folded f;
  f.count = j.at("count").get<int64_t>();
  f.mean = number(j.at("mean"));
  f.m2 = number(j.at("m2"));
  f.min = number(j.at("min"));
  f.max = number(j.at("max"));
  const Json &bins = j.at("bins"), &counts = j.at("samples");
  if (!bins.is_array() || !counts.is_array() || bins.size() != counts.size()) {
    throw DamagedCheckpoint(field + ".bins, .samples: not two arrays of one length");
  }
  int64_t samples = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    const auto bin = bins[i].get<int32_t>();
    const auto n = counts[i].get<int64_t>();
    if (n <= 0 || n > f.count - samples) {
      throw DamagedCheckpoint(
          fmt::format("{}.bins: {} samples in bin {} (of {} in all)", field, n, bin, f.count));
    }
    if (!f.bins.empty() && bin <= f.bins.back().first) {
      throw DamagedCheckpoint(fmt::format("{}.bins: bin {} after bin {} (ascending expected)",
                                          field, bin, f.bins.back().first));
    }
    samples += n;
    f.bins.emplace_back(bin, n);
  }
  if (samples != f.count || f.count <= 0 || !(f.min <= f.max)) {
    throw DamagedCheckpoint(fmt::format(
        "{}: {} samples in its bins, count {}, min {} and max {} (count = the bins' samples > 0, "
        "min <= max expected)",
        field, samples, f.count, f.min, f.max));
  }
  return TimingSeries::from_folded(number(j.at("warmup")), std::move(f));
}

// A LossStats as [loss_sum, correct, samples].
Json stats_json(const LossStats& s) {
  return {number(s.loss_sum), number(s.correct), number(s.samples)};
}
LossStats read_stats(const Json& j) { return {number(j.at(0)), number(j.at(1)), number(j.at(2))}; }

Json to_json(const RunFingerprint& f) {
  return {{"version", f.version}, {"spec", f.spec},         {"data", f.data},
          {"device", f.device},   {"settings", f.settings}, {"ranks", f.ranks}};
}

// The first line where two texts differ, for a message.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t line_start = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i >= a.size() || i >= b.size() || a[i] != b[i]) {
      auto line = [&](const std::string& s) {
        if (line_start >= s.size()) return std::string("(end)");
        return s.substr(line_start, s.find('\n', line_start) - line_start);
      };
      return fmt::format("'{}' in the checkpoint, '{}' now", line(a), line(b));
    }
    if (a[i] == '\n') line_start = i + 1;
  }
  return "";
}

// The ranks a checkpoint's settings name: before the fingerprint had its own "ranks" (0.2.x),
// settings ended ", N ranks" for a data-parallel run. Removes that ending from `settings`.
int legacy_ranks(std::string& settings) {
  static const std::regex ending(R"(, ([0-9]+) ranks$)");
  std::smatch m;
  if (!std::regex_search(settings, m, ending)) return 1;
  const int ranks = std::stoi(m[1].str());
  settings.erase(static_cast<size_t>(m.position(0)));
  return ranks;
}

// The batch shards that open the settings ("2 batch shards, step launched"), taken out; 0 where
// they do not read.
int take_shards(std::string& settings) {
  static const std::regex opening(R"(^([0-9]{1,6}) batch shards, )");
  std::smatch m;
  if (!std::regex_search(settings, m, opening)) return 0;
  const int shards = std::stoi(m[1].str());
  settings.erase(0, static_cast<size_t>(m.length(0)));
  return shards;
}

// Throws unless the checkpoint belongs to this run, naming each part that differs; returns what
// of the run that wrote it may differ.
CheckpointWriter compare_fingerprints(const Json& saved, const RunFingerprint& now,
                                      const fs::path& file) {
  std::vector<std::string> differs;
  std::string saved_settings = saved.at("settings").get<std::string>();
  CheckpointWriter writer;
  writer.ranks = legacy_ranks(saved_settings);
  if (saved.contains("ranks")) writer.ranks = saved.at("ranks").get<int>();
  std::string now_settings = now.settings;
  if (now.shards_may_differ) {
    std::string saved_rest = saved_settings, now_rest = now_settings;
    const int was = take_shards(saved_rest), is = take_shards(now_rest);
    if (was > 0 && is > 0 && was != is && saved_rest == now_rest) {
      writer.shards = was;
      now_settings = saved_settings;
    }
  }
  auto compare = [&](const char* key, const std::string& current, bool show_lines) {
    const std::string was =
        std::string_view(key) == "settings" ? saved_settings : saved.at(key).get<std::string>();
    if (was == current) return;
    const char* verb = std::string_view(key) == "settings" ? "differ" : "differs";
    differs.push_back(
        show_lines
            ? fmt::format("the {} {} ({})", key, verb, first_difference(was, current))
            : fmt::format("the {} {} ('{}' in the checkpoint, '{}' now)", key, verb, was, current));
  };
  compare("spec", now.spec, true);
  compare("data", now.data, false);
  compare("device", now.device, false);
  compare("settings", now_settings, false);
  compare("version", now.version, false);
  if (!differs.empty()) {
    throw UserError(fmt::format(
        "{}: this checkpoint belongs to another run: {}. Resume with the same spec, data, device "
        "and settings, or start afresh (--restart discards the checkpoint)",
        file.string(), fmt::join(differs, "; ")));
  }
  return writer;
}

// The JSON beside the tensors: everything that is not a tensor, and the tensors' size and hash.
Json unsigned_json(const CheckpointSnapshot& s, const std::string& model,
                   const RunFingerprint& fingerprint, const std::string& tensor_file,
                   const std::string& bytes) {
  const TrainState& t = s.state;
  Json epochs = Json::array();
  for (const EpochRecord& e : t.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"loss", number(e.loss)},
                      {"train_error", number(e.train_error)},
                      {"seconds", number(e.seconds)},
                      {"test_loss", number(e.test_loss)},
                      {"test_accuracy", number(e.test_accuracy)},
                      {"val_loss", number(e.val_loss)},
                      {"val_accuracy", number(e.val_accuracy)},
                      {"lr", number(e.lr)}});
  }
  const ScheduleState& schedule = t.schedule;
  const EarlyStoppingState& stopping = t.early_stopping;
  return {{"format", kCheckpointFormat},
          {"model", model},
          {"fingerprint", to_json(fingerprint)},
          {"tensors",
           {{"file", tensor_file}, {"bytes", bytes.size()}, {"hash", Hasher().text(bytes).hex()}}},
          {"epoch", t.epoch},
          {"in_epoch", t.in_epoch},
          {"step", t.step},
          {"steps_taken", t.steps_taken},
          {"optimizer_steps", s.optimizer_steps},
          {"dropout_step", s.step_counter},
          {"position", s.position},
          {"loss_stats", stats_json(s.stats[0])},
          {"partial_loss_stats", stats_json(s.stats[1])},
          {"shuffle_generator", t.shuffle_rng.state()},
          {"order", t.order},
          {"epochs", epochs},
          {"train_seconds", number(t.train_seconds)},
          {"diverged_epoch", t.diverged_epoch},
          {"resumed_differently", t.resumed_differently},
          {"schedule",
           {{"lr", number(schedule.lr)},
            {"last_epoch", schedule.last_epoch},
            {"best", number(schedule.best)},
            {"num_bad_epochs", schedule.num_bad_epochs},
            {"cooldown_counter", schedule.cooldown_counter}}},
          {"early_stopping",
           {{"best", number(stopping.best)},
            {"wait", stopping.wait},
            {"best_epoch", stopping.best_epoch},
            {"stop", stopping.stop}}},
          {"loss_check",
           {{"sum", number(t.checked_loss_sum)},
            {"step", t.checked_step},
            {"last_finite_loss", number(t.last_finite_loss)},
            {"last_finite_epoch", t.last_finite_epoch},
            {"last_finite_step", t.last_finite_step}}},
          {"times",
           {{"timed_steps", t.timed},
            {"epoch_ms", number(t.epoch_ms)},
            {"step", series_json(t.times.step)},
            {"data", series_json(t.times.data)},
            {"forward_backward", series_json(t.times.forward_backward)},
            {"optimizer", series_json(t.times.optimizer)}}}};
}

}  // namespace

CheckpointJson checkpoint_json(const CheckpointSnapshot& s, const std::string& model,
                               const RunFingerprint& fingerprint, const std::string& tensor_file,
                               const std::string& tensor_bytes) {
  Json doc = unsigned_json(s, model, fingerprint, tensor_file, tensor_bytes);
  doc["checksum"] = Hasher().text(doc.dump()).hex();
  return doc;
}

CheckpointJson parse_checkpoint_json(const std::string& text, const std::string& origin) {
  return as_damage([&] {
    check_json_depth(text, origin);
    Json j = Json::parse(text);
    if (!j.is_object() || j.value("format", "") != kCheckpointFormat) {
      throw DamagedCheckpoint(fmt::format("not a {} file", kCheckpointFormat));
    }
    const auto it = j.find("checksum");
    if (it == j.end() || !it->is_string()) throw DamagedCheckpoint("no checksum");
    const std::string written = it->get<std::string>();
    j.erase(it);
    if (Hasher().text(j.dump()).hex() != written) {
      throw DamagedCheckpoint("its content differs from its checksum (the file was changed)");
    }
    return j;
  });
}

CheckpointWriter check_checkpoint_fingerprint(const CheckpointJson& j, const RunFingerprint& now,
                                              const fs::path& file) {
  const Json saved = as_damage([&] {
    const Json& f = j.at("fingerprint");
    for (const char* key : {"spec", "data", "device", "settings", "version"}) {
      f.at(key).get<std::string>();
    }
    if (f.contains("ranks") &&
        !(f.at("ranks").is_number_integer() && f.at("ranks").get<int64_t>() >= 1 &&
          f.at("ranks").get<int64_t>() <= (1 << 24))) {
      throw DamagedCheckpoint("fingerprint.ranks: expected a whole number of ranks, at least 1");
    }
    return f;
  });
  return compare_fingerprints(saved, now, file);
}

namespace {
// The checks of read_checkpoint_state, each throwing DamagedCheckpoint naming the field.
namespace checks {

[[noreturn]] void damaged(const std::string& what) { throw DamagedCheckpoint(what); }

// An integer field from `min` to `max` (a float, a string or a value out of range is damage).
// `within`: the object's own name, for the message ("loss_check.step").
int64_t integer(const Json& j, const char* key, int64_t min, int64_t max,
                std::string_view within = {}) {
  const std::string name = within.empty() ? key : fmt::format("{}.{}", within, key);
  const auto it = j.find(key);
  if (it == j.end()) damaged(fmt::format("{}: missing", name));
  std::optional<int64_t> v;
  if (it->is_number_unsigned()) {
    const uint64_t u = it->get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      v = static_cast<int64_t>(u);
    }
  } else if (it->is_number_integer()) {
    v = it->get<int64_t>();
  }
  if (!v || *v < min || *v > max) {
    damaged(fmt::format("{}: {}, expected an integer from {} to {}", name, it->dump(), min, max));
  }
  return *v;
}

void expect_equal(const char* what, int64_t found, int64_t expected, const char* because) {
  if (found != expected) {
    damaged(fmt::format("{}: {}, expected {} ({})", what, found, expected, because));
  }
}

// The completed epochs' records: one an epoch while epoch_record_stride is 1, then evenly fewer
// (never more than kMaxEpochRecords), in order, the last the last completed.
void epoch_records(const Json& records, int64_t epoch) {
  if (!records.is_array()) damaged("epochs: not an array");
  const auto count = static_cast<int64_t>(records.size());
  constexpr auto kMax = static_cast<int64_t>(kMaxEpochRecords);
  if (epoch_record_stride(epoch) == 1) {
    expect_equal("epochs", count, epoch, "one record a completed epoch");
  } else if (count < 1 || count > kMax) {
    damaged(fmt::format("epochs: {} records of {} epochs, expected 1 to {}", count, epoch, kMax));
  }
  int64_t before = 0;
  for (const Json& e : records) {
    const int64_t n = integer(e, "epoch", before + 1, epoch, "epochs");
    before = n;
  }
  if (count > 0 && before != epoch) {
    damaged(fmt::format("epochs: the last record is of epoch {}, expected {}", before, epoch));
  }
}

// Where the run stood: the epoch within the run, the step within the epoch, the counters that
// follow from them, and the batch position. Returns whether it stood between two epochs (a run
// paused after one: the last epoch's counters stand until the next begins).
bool position(const Json& j, const CheckpointRun& run, int64_t file_steps) {
  const int64_t spe = run.steps_per_epoch;
  const int64_t epoch = integer(j, "epoch", 0, run.epochs);
  const int64_t step = integer(j, "step", 0, spe);
  const int64_t taken = integer(j, "steps_taken", 0, std::numeric_limits<int64_t>::max() / 2);
  expect_equal("steps_taken", taken, epoch * spe + step, "epoch x steps per epoch + step");
  expect_equal("steps_taken", taken, file_steps, "the steps in the file's name");
  expect_equal("optimizer_steps", integer(j, "optimizer_steps", 0, taken), taken, "one a step");
  expect_equal("dropout_step", integer(j, "dropout_step", 0, taken), taken, "one a step");
  const Json& in_epoch = j.at("in_epoch");
  if (!in_epoch.is_boolean()) damaged("in_epoch: not true or false");
  if (step > 0 && !in_epoch.get<bool>()) damaged("in_epoch: false at a step inside the epoch");
  // Where batches are gathered on the device, the samples of the epoch taken so far (the partial
  // batch's at its end); between two epochs (a run paused after one) the whole epoch's, until the
  // next begins; elsewhere the counter stays 0.
  const bool between = step == 0 && !in_epoch.get<bool>() && epoch > 0;
  const int64_t at = between ? run.samples : std::min(step * run.batch, run.samples);
  const int64_t position = integer(j, "position", 0, at);
  if (position != 0 && position != at) {
    damaged(fmt::format("position: {}, expected {} (the samples of the epoch taken) or 0", position,
                        at));
  }
  expect_equal("times.timed_steps", integer(j.at("times"), "timed_steps", 0, spe, "times"), step,
               "the steps of the epoch under way");
  epoch_records(j.at("epochs"), epoch);
  return between;
}

// The shuffle: a generator state that reads, and an order that is a permutation of the samples.
void shuffle(const Json& j, const CheckpointRun& run) {
  const Json& g = j.at("shuffle_generator");
  Rng rng(0);
  if (!g.is_string() || !rng.restore(g.get<std::string>())) {
    damaged("shuffle_generator: not a generator state");
  }
  const Json& order = j.at("order");
  if (!order.is_array()) damaged("order: not an array");
  if (order.empty() && !run.order) return;
  if (order.size() != static_cast<size_t>(run.samples)) {
    damaged(fmt::format("order: {} entries, expected {} (the samples)", order.size(), run.samples));
  }
  std::vector<bool> seen(static_cast<size_t>(run.samples), false);
  for (const Json& e : order) {
    const bool index =
        e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < run.samples;
    if (!index || seen[static_cast<size_t>(e.get<int64_t>())]) {
      damaged(fmt::format("order: {} is not a sample index seen once", e.dump()));
    }
    seen[static_cast<size_t>(e.get<int64_t>())] = true;
  }
}

// The rules between epochs and the divergence check: counts of epochs within the run (`between`:
// position()'s answer).
void epoch_rules(const Json& j, const CheckpointRun& run, bool between) {
  const int64_t epochs = run.epochs;
  const int64_t epoch = j.at("epoch").get<int64_t>();
  integer(j, "diverged_epoch", 0, epoch + 1);
  const Json& check = j.at("loss_check");
  // Its step within the epoch under way; between two epochs, the last epoch's.
  const int64_t step = j.at("step").get<int64_t>();
  integer(check, "step", 0, between ? run.steps_per_epoch : step, "loss_check");
  integer(check, "last_finite_epoch", 0, epoch + 1, "loss_check");
  integer(check, "last_finite_step", 0, std::numeric_limits<int32_t>::max(), "loss_check");
  if (j.contains("schedule")) {
    const Json& schedule = j.at("schedule");
    for (const char* key : {"last_epoch", "num_bad_epochs", "cooldown_counter"}) {
      integer(schedule, key, 0, epochs, "schedule");
    }
    const double lr = number(schedule.at("lr"));
    if (!std::isfinite(lr) || lr < 0) damaged(fmt::format("schedule.lr: {}", lr));
  }
  if (j.contains("early_stopping")) {
    const Json& stopping = j.at("early_stopping");
    integer(stopping, "wait", 0, epoch, "early_stopping");
    integer(stopping, "best_epoch", 0, epoch, "early_stopping");
  }
}

}  // namespace checks

// The epochs so far, and the schedule's and early stopping's state after them.
void restore_epochs(const Json& j, TrainState& state) {
  state.epochs.clear();
  state.train_seconds = 0;
  for (const Json& e : j.at("epochs")) {
    state.epochs.push_back({e.at("epoch").get<int64_t>(), number(e.at("loss")),
                            number(e.at("train_error")), number(e.at("seconds")),
                            number(e.at("test_loss")), number(e.at("test_accuracy")),
                            number(e.at("val_loss")), number(e.at("val_accuracy")),
                            e.contains("lr") ? number(e.at("lr")) : state.schedule.lr});
    state.train_seconds += state.epochs.back().seconds;  // every epoch's, in a checkpoint of 0.2.0
  }
  if (j.contains("train_seconds")) {
    const double seconds = number(j.at("train_seconds"));
    if (!std::isfinite(seconds) || seconds < 0) {
      checks::damaged(fmt::format("train_seconds: {}, expected a time in seconds", seconds));
    }
    state.train_seconds = seconds;
  }
  // Checkpoints written before schedules and early stopping have neither (their run had none: the
  // spec in the fingerprint says so, and the state from EpochRules::start stands).
  if (j.contains("schedule")) {
    const Json& schedule = j.at("schedule");
    state.schedule.lr = number(schedule.at("lr"));
    state.schedule.last_epoch = schedule.at("last_epoch").get<int64_t>();
    state.schedule.best = number(schedule.at("best"));
    state.schedule.num_bad_epochs = schedule.at("num_bad_epochs").get<int64_t>();
    state.schedule.cooldown_counter = schedule.at("cooldown_counter").get<int64_t>();
  }
  if (j.contains("early_stopping")) {
    const Json& stopping = j.at("early_stopping");
    state.early_stopping.best = number(stopping.at("best"));
    state.early_stopping.wait = stopping.at("wait").get<int64_t>();
    state.early_stopping.best_epoch = stopping.at("best_epoch").get<int64_t>();
    state.early_stopping.stop = stopping.at("stop").get<bool>();
  }
}

// The divergence check's running state.
void restore_loss_check(const Json& j, TrainState& state) {
  state.diverged_epoch = j.at("diverged_epoch").get<int64_t>();
  const Json& check = j.at("loss_check");
  state.checked_loss_sum = number(check.at("sum"));
  state.checked_step = check.at("step").get<int64_t>();
  state.last_finite_loss = number(check.at("last_finite_loss"));
  state.last_finite_epoch = check.at("last_finite_epoch").get<int64_t>();
  state.last_finite_step = check.at("last_finite_step").get<int64_t>();
}

// Why the run from here is not bit-identical to one never stopped (absent, as in checkpoints of
// 0.2.0, or empty: it is): a text of at most a few lines.
void restore_resume_note(const Json& j, TrainState& state) {
  constexpr size_t kMaxBytes = 4096;
  state.resumed_differently.clear();
  if (!j.contains("resumed_differently")) return;
  const Json& note = j.at("resumed_differently");
  if (!note.is_string() || note.get_ref<const std::string&>().size() > kMaxBytes) {
    checks::damaged(
        fmt::format("resumed_differently: expected a text of at most {} bytes", kMaxBytes));
  }
  state.resumed_differently = note.get<std::string>();
}

// The steps before the checkpoint were timed by the process that ran them.
void restore_times(const Json& j, TrainState& state) {
  const Json& times = j.at("times");
  state.timed = times.at("timed_steps").get<int64_t>();  // the step (validate checked)
  state.epoch_ms = number(times.at("epoch_ms"));
  state.times.step = read_series(times.at("step"), "times.step");
  state.times.data = read_series(times.at("data"), "times.data");
  state.times.forward_backward =
      read_series(times.at("forward_backward"), "times.forward_backward");
  state.times.optimizer = read_series(times.at("optimizer"), "times.optimizer");
}

// Where the run stopped: the epoch and step, the shuffle generator and the sample order (checked).
void restore_position(const Json& j, TrainState& state) {
  state.epoch = j.at("epoch").get<int64_t>();
  state.in_epoch = j.at("in_epoch").get<bool>();
  state.step = j.at("step").get<int64_t>();
  state.steps_taken = j.at("steps_taken").get<int64_t>();
  state.shuffle_rng.restore(j.at("shuffle_generator").get<std::string>());
  state.order.clear();
  for (const Json& e : j.at("order")) state.order.push_back(static_cast<int32_t>(e.get<int64_t>()));
}

CheckpointCounters read_counters(const Json& j) {
  CheckpointCounters c;
  c.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
  c.dropout_step = j.at("dropout_step").get<uint64_t>();
  c.position = j.at("position").get<int64_t>();
  c.stats[0] = read_stats(j.at("loss_stats"));
  c.stats[1] = read_stats(j.at("partial_loss_stats"));
  return c;
}

}  // namespace

CheckpointRead read_checkpoint_state(const CheckpointJson& j, const CheckpointRun& run,
                                     int64_t file_steps, const TrainState& base) {
  return as_damage([&] {
    const bool between = checks::position(j, run, file_steps);
    checks::shuffle(j, run);
    checks::epoch_rules(j, run, between);
    CheckpointRead read{base, read_counters(j)};
    restore_position(j, read.state);
    restore_epochs(j, read.state);
    restore_loss_check(j, read.state);
    restore_resume_note(j, read.state);
    restore_times(j, read.state);
    return read;
  });
}

}  // namespace xo

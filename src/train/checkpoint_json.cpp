// A checkpoint's JSON (step-N.json; checkpoint.h says what the files guarantee): written from a
// snapshot, signed with a checksum over its own content, and read back strictly: every field is
// checked against its range, the others and the run about to resume, and read into a copy of the
// training state, so that nothing is restored from a file that fails any check.
#include "train/checkpoint_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <regex>
#include <string_view>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "core/json_depth.h"
#include "io/json_fields.h"
#include "io/json_in.h"
#include "train/epoch_fields.h"
#include "train/timing_series.h"

namespace xo {

namespace fs = std::filesystem;

namespace {

using Json = ReadCheckpointJson;

// The state's records, each listed once for the writer and the reader (io/json_fields.h). Every
// double is exact: a resumed run goes on from the very same bits, NaN and the infinities included
// (early stopping's best starts at infinity; a run without a test set has a NaN test loss).

// The epoch's loss sums so far. Checkpoints before the field lists wrote them as an array,
// [loss_sum, correct, samples].
inline constexpr auto loss_stats_fields = [](auto& io, auto& s) {
  io.exact("loss_sum", s.loss_sum);
  io.exact("correct", s.correct);
  io.exact("samples", s.samples);
};
template <class Io, class S>
void loss_stats(Io& io, const char* key, S& s) {
  if constexpr (Io::kReading) {
    if (io.in.holds_array(key)) {
      const std::vector<double> v = io.in.exact_numbers(key);
      if (v.size() != 3) io.refuse(key, "[loss_sum, correct, samples]", v);
      s = {v.at(0), v.at(1), v.at(2)};
      return;
    }
  }
  io.object(key, s, loss_stats_fields);
}

// A series of step times past TimingSeries::kExactSamples: the warm-up, the running moments, the
// bins and each bin's samples (two flat arrays: a number a line in the file).
struct FoldedSeries {
  double warmup = 0;
  TimingSeries::Folded f;
  std::vector<int64_t> bins, samples;
};
inline constexpr auto folded_fields = [](auto& io, auto& s) {
  io.exact("warmup", s.warmup);
  io.integer("count", s.f.count);
  io.exact("mean", s.f.mean);
  io.exact("m2", s.f.m2);
  io.exact("min", s.f.min);
  io.exact("max", s.f.max);
  io.integers("bins", s.bins, Between{INT32_MIN, INT32_MAX});
  io.integers("samples", s.samples, Between{INT64_MIN, INT64_MAX});
};

FoldedSeries folded_series(const TimingSeries& t) {
  FoldedSeries s{t.warmup(), t.folded_state(), {}, {}};
  for (const auto& [bin, n] : s.f.bins) {
    s.bins.push_back(bin);
    s.samples.push_back(n);
  }
  return s;
}

// The series read back, checked (`field` names it): bins ascending, each holding samples, their
// samples the count.
TimingSeries checked_series(FoldedSeries s, const std::string& field) {
  TimingSeries::Folded& f = s.f;
  if (s.bins.size() != s.samples.size()) {
    throw DamagedCheckpoint(field + ".bins, .samples: not two arrays of one length");
  }
  int64_t samples = 0;
  for (size_t i = 0; i < s.bins.size(); ++i) {
    const auto bin = static_cast<int32_t>(s.bins[i]);
    const int64_t n = s.samples[i];
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
  return TimingSeries::from_folded(s.warmup, std::move(f));
}

// A series of step times: every time, the warm-up first (as every checkpoint before the series
// were bounded held them), or folded.
template <class Io, class T>
void series(Io& io, const char* key, T& t) {
  if constexpr (Io::kReading) {
    if (io.in.holds_array(key)) {
      t = TimingSeries::from_samples(io.in.exact_numbers(key));
    } else {
      FoldedSeries s;
      io.object(key, s, folded_fields);
      t = checked_series(std::move(s), fmt::format("{}.{}", io.in.where(), key));
    }
  } else if (!t.folded()) {
    io.exact_numbers(key, t.samples());
  } else {
    io.object(key, folded_series(t), folded_fields);
  }
}

// The steps of the epoch under way timed by the process that ran them.
inline constexpr auto times_fields = [](auto& io, auto& t) {
  io.integer("timed_steps", t.timed);
  io.exact("epoch_ms", t.epoch_ms);
  series(io, "step", t.times.step);
  series(io, "data", t.times.data);
  series(io, "forward_backward", t.times.forward_backward);
  series(io, "optimizer", t.times.optimizer);
};

inline constexpr auto schedule_fields = [](auto& io, auto& s) {
  io.exact("lr", s.lr);
  io.integer("last_epoch", s.last_epoch);
  io.exact("best", s.best);
  io.integer("num_bad_epochs", s.num_bad_epochs);
  io.integer("cooldown_counter", s.cooldown_counter);
};

inline constexpr auto early_stopping_fields = [](auto& io, auto& s) {
  io.exact("best", s.best);
  io.integer("wait", s.wait);
  io.integer("best_epoch", s.best_epoch);
  io.flag("stop", s.stop);
};

// The divergence check's running state.
inline constexpr auto loss_check_fields = [](auto& io, auto& t) {
  io.exact("sum", t.checked_loss_sum);
  io.integer("step", t.checked_step);
  io.exact("last_finite_loss", t.last_finite_loss);
  io.integer("last_finite_epoch", t.last_finite_epoch);
  io.integer("last_finite_step", t.last_finite_step);
};

// An epoch's record as a result names it (train/epoch_fields.h), exact. Read back, an older
// checkpoint's names too, and in a checkpoint of 0.2.0 (no rate per epoch) `lr`, the run's rate.
auto checkpoint_epoch_fields(double lr) {
  return [lr](auto& io, auto& e) {
    if constexpr (kReads<decltype(io)>) {
      const bool before = io.present("train_error");
      epoch_fields(io, e,
                   before ? EpochDocument::kCheckpointBeforeSharing : EpochDocument::kCheckpoint);
      if (!io.present("lr")) e.lr = lr;
    } else {
      epoch_fields(io, e, EpochDocument::kCheckpoint);
    }
  };
}

// Everything of a snapshot that is not a tensor: where the run stood, the device's counters, the
// shuffle, the epochs so far, the rules' state and the step times. Read back after checks::
// passed (below), into a copy of the state of the run about to resume.
template <class Io, class State, class Counters>
void state_fields(Io& io, State& t, Counters& c) {
  io.integer("epoch", t.epoch);
  io.flag("in_epoch", t.in_epoch);
  io.integer("step", t.step);
  io.integer("steps_taken", t.steps_taken);
  io.integer("optimizer_steps", c.optimizer_steps);
  io.integer("dropout_step", c.dropout_step, Between{0, INT64_MAX});
  io.integer("position", c.position);
  loss_stats(io, "loss_stats", c.stats[0]);
  loss_stats(io, "partial_loss_stats", c.stats[1]);
  if constexpr (Io::kReading) {
    std::string generator;
    io.text("shuffle_generator", generator);
    t.shuffle_rng.restore(generator);  // checks::shuffle read it
    t.epochs.clear();
  } else {
    io.text("shuffle_generator", t.shuffle_rng.state());
  }
  io.integers("order", t.order, Between{0, INT32_MAX});
  io.objects("epochs", t.epochs, checkpoint_epoch_fields(t.schedule.lr));
  // Absent from a checkpoint of 0.2.0: every epoch's seconds.
  if (io.present("train_seconds")) {
    io.number("train_seconds", t.train_seconds, AtLeast{0});
  } else if constexpr (Io::kReading) {
    t.train_seconds = 0;
    for (const EpochRecord& e : t.epochs) t.train_seconds += e.seconds;
  }
  io.integer("diverged_epoch", t.diverged_epoch);
  io.text_unless_empty("resumed_differently", t.resumed_differently);
  // Checkpoints written before schedules and early stopping have neither (their run had none: the
  // spec in the fingerprint says so, and the state from EpochRules::start stands).
  if (io.present("schedule")) io.object("schedule", t.schedule, schedule_fields);
  if (io.present("early_stopping")) {
    io.object("early_stopping", t.early_stopping, early_stopping_fields);
  }
  io.object("loss_check", t, loss_check_fields);
  io.object("times", t, times_fields);
}

inline constexpr auto fingerprint_fields = [](auto& io, auto& f) {
  io.text("version", f.version);
  io.text("spec", f.spec);
  io.text("data", f.data);
  io.text("device", f.device);
  io.text("settings", f.settings);
  io.integer("ranks", f.ranks);
};

// The tensors file beside the JSON: its name, size and hash.
struct TensorsEntry {
  std::string file;
  uint64_t bytes = 0;
  std::string hash;
};
inline constexpr auto tensors_fields = [](auto& io, auto& t) {
  io.text("file", t.file);
  io.integer("bytes", t.bytes);
  io.text("hash", t.hash);
};

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

// The JSON beside the tensors: everything that is not a tensor, and the tensors' size and hash,
// its keys in the order listed.
CheckpointJson unsigned_json(const CheckpointSnapshot& s, const std::string& model,
                             const RunFingerprint& fingerprint, const std::string& tensor_file,
                             const std::string& bytes) {
  BasicFieldsOut<CheckpointJson> out;
  out.constant("format", kCheckpointFormat);
  out.text("model", model);
  out.object("fingerprint", fingerprint, fingerprint_fields);
  out.object("tensors", TensorsEntry{tensor_file, bytes.size(), Hasher().text(bytes).hex()},
             tensors_fields);
  const CheckpointCounters counters{
      s.optimizer_steps, s.step_counter, s.position, {s.stats[0], s.stats[1]}};
  state_fields(out, s.state, counters);
  return std::move(out.j);
}

}  // namespace

CheckpointJson checkpoint_json(const CheckpointSnapshot& s, const std::string& model,
                               const RunFingerprint& fingerprint, const std::string& tensor_file,
                               const std::string& tensor_bytes) {
  CheckpointJson doc = unsigned_json(s, model, fingerprint, tensor_file, tensor_bytes);
  doc["checksum"] = Hasher().text(doc.dump()).hex();
  return doc;
}

ReadCheckpointJson parse_checkpoint_json(const std::string& text, const std::string& origin) {
  return as_damage([&] {
    check_json_depth(text, origin);
    // Signed over its keys in the file's order: checked in that order, then parsed again for
    // JsonIn (the ordered copy freed first, so that a long run's records are held once).
    CheckpointJson j = CheckpointJson::parse(text);
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
    j = CheckpointJson();
    Json read = Json::parse(text);
    read.erase("checksum");
    return read;
  });
}

CheckpointWriter check_checkpoint_fingerprint(const ReadCheckpointJson& j,
                                              const RunFingerprint& now, const fs::path& file) {
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
    const std::optional<double> lr = exact_number_value(schedule.at("lr"));
    if (!lr || !std::isfinite(*lr) || *lr < 0) {
      damaged(fmt::format("schedule.lr: {}", schedule.at("lr").dump()));
    }
  }
  if (j.contains("early_stopping")) {
    const Json& stopping = j.at("early_stopping");
    integer(stopping, "wait", 0, epoch, "early_stopping");
    integer(stopping, "best_epoch", 0, epoch, "early_stopping");
  }
}

// Why the run from here is not bit-identical to one never stopped (absent, as in checkpoints of
// 0.2.0, or empty: it is): a text of at most a few lines.
void resume_note(const Json& j) {
  constexpr size_t kMaxBytes = 4096;
  const auto note = j.find("resumed_differently");
  if (note == j.end()) return;
  if (!note->is_string() || note->get_ref<const std::string&>().size() > kMaxBytes) {
    damaged(fmt::format("resumed_differently: expected a text of at most {} bytes", kMaxBytes));
  }
}

}  // namespace checks

}  // namespace

CheckpointRead read_checkpoint_state(const ReadCheckpointJson& j, const CheckpointRun& run,
                                     int64_t file_steps, const TrainState& base) {
  return as_damage([&] {
    const bool between = checks::position(j, run, file_steps);
    checks::shuffle(j, run);
    checks::epoch_rules(j, run, between);
    checks::resume_note(j);
    CheckpointRead read{base, {}};
    // The file is named by the caller; a field here by its place ("loss_check: step: ...").
    const JsonSource source{"", ReadMode::Strict};
    const JsonIn in(j, "", source);
    FieldsIn io(in);
    state_fields(io, read.state, read.counters);
    return read;
  });
}

}  // namespace xo

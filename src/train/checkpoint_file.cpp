// One checkpoint's files: a snapshot written as step-N.safetensors and step-N.json, read back and
// checked whole, compared with the run about to resume, and applied to its plan and state.
#include "train/checkpoint_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

#include "core/file.h"
#include "core/hash.h"
#include "core/json_depth.h"
#include "train/plan.h"

namespace xo {

namespace fs = std::filesystem;

namespace {

using Json = nlohmann::ordered_json;

// /2: the JSON's own content hashed too ("checksum"), and every field checked before a restore.
constexpr const char* kFormat = "crossover.checkpoint/2";
constexpr const char* kOptimizerPrefix = "optimizer.";
// early_stopping.restore_best: the best epoch's parameters and buffers, by their state_dict names.
constexpr const char* kBestPrefix = "early_stopping.best.";

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

// A LossStats as [loss_sum, correct, samples].
Json stats_json(const LossStats& s) {
  return {number(s.loss_sum), number(s.correct), number(s.samples)};
}
LossStats read_stats(const Json& j) { return {number(j.at(0)), number(j.at(1)), number(j.at(2))}; }

Json to_json(const RunFingerprint& f) {
  return {{"version", f.version},
          {"spec", f.spec},
          {"data", f.data},
          {"device", f.device},
          {"settings", f.settings}};
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

// Throws unless the checkpoint belongs to this run, naming each part that differs.
void compare_fingerprints(const Json& saved, const RunFingerprint& now, const fs::path& file) {
  std::vector<std::string> differs;
  auto compare = [&](const char* key, const std::string& current, bool show_lines) {
    const std::string was = saved.at(key).get<std::string>();
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
  compare("settings", now.settings, false);
  compare("version", now.version, false);
  if (!differs.empty()) {
    throw UserError(fmt::format(
        "{}: this checkpoint belongs to another run: {}. Resume with the same spec, data, device "
        "and settings, or start afresh (--restart discards the checkpoint)",
        file.string(), fmt::join(differs, "; ")));
  }
}

// The named tensors of a snapshot: the model's state_dict, then each optimizer state buffer
// viewed per parameter tensor (their alignment padding is always zero, as the gradients' is).
std::vector<NamedTensor> named_tensors(const CheckpointSnapshot& s,
                                       const CheckpointLayout& layout) {
  std::vector<NamedTensor> out;
  auto view = [](const ParamTensor& t, const std::vector<float>& flat) {
    return std::vector<float>(flat.begin() + t.offset, flat.begin() + t.offset + t.size);
  };
  for (const ParamTensor& t : layout.tensors) out.push_back({t.name, t.shape, view(t, s.params)});
  for (const ParamTensor& b : layout.buffers) {
    out.push_back({b.name, b.shape, view(b, s.buffers), b.integer ? "I64" : "F32"});
  }
  for (size_t k = 0; k < layout.optimizer.size(); ++k) {
    for (const ParamTensor& t : layout.tensors) {
      out.push_back({fmt::format("{}{}.{}", kOptimizerPrefix, layout.optimizer[k], t.name), t.shape,
                     view(t, s.optimizer[k])});
    }
  }
  if (!s.state.best_params.empty()) {
    for (const ParamTensor& t : layout.tensors) {
      out.push_back({kBestPrefix + t.name, t.shape, view(t, s.state.best_params)});
    }
    for (const ParamTensor& b : layout.buffers) {
      out.push_back({kBestPrefix + b.name, b.shape, view(b, s.state.best_buffers),
                     b.integer ? "I64" : "F32"});
    }
  }
  return out;
}

// The JSON beside the tensors: everything that is not a tensor, and the tensors' size and hash.
Json state_json(const CheckpointSnapshot& s, const CheckpointLayout& layout,
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
  return {{"format", kFormat},
          {"model", layout.model},
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
          {"diverged_epoch", t.diverged_epoch},
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
            {"step", numbers(t.times.step)},
            {"data", numbers(t.times.data)},
            {"forward_backward", numbers(t.times.forward_backward)},
            {"optimizer", numbers(t.times.optimizer)}}}};
}

// Uploads `floats` (flat, host) into a device buffer.
void upload(Backend& be, float* dst, const std::vector<float>& floats) {
  if (!floats.empty()) be.upload(dst, floats.data(), sizeof(float) * floats.size());
}

}  // namespace

std::string checkpoint_stem(int64_t steps_taken) { return fmt::format("step-{:012}", steps_taken); }

int64_t checkpoint_steps(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name.size() != 22 || name.rfind("step-", 0) != 0 || file.extension() != ".json") return -1;
  int64_t steps = -1;
  const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + 17, steps);
  return ec == std::errc() && end == name.data() + 17 ? steps : -1;
}

void write_checkpoint(const fs::path& dir, const CheckpointSnapshot& s,
                      const CheckpointLayout& layout, const RunFingerprint& fingerprint) {
  const std::string name = checkpoint_stem(s.state.steps_taken);
  const fs::path tensors = dir / (name + ".safetensors");
  const std::string bytes = encode_safetensors(
      named_tensors(s, layout),
      {{"format", "pt"}, {"model", layout.model}, {"producer", "crossover"}}, tensors.string());
  replace_file_atomic(tensors, bytes);
  Json doc = state_json(s, layout, fingerprint, name + ".safetensors", bytes);
  doc["checksum"] = Hasher().text(doc.dump()).hex();
  replace_file_atomic(dir / (name + ".json"), doc.dump(1) + "\n");
}

CheckpointFile CheckpointFile::read(const fs::path& json_file) {
  CheckpointFile c;
  c.file_ = json_file;
  try {
    const std::string text = read_regular_file(json_file);
    check_json_depth(text, json_file.string());
    c.json_ = Json::parse(text);
    c.check_sum();
    c.read_tensors();
  } catch (const Json::exception& e) {
    throw DamagedCheckpoint(e.what());
  } catch (const DamagedCheckpoint&) {
    throw;
  } catch (const UserError& e) {  // an unreadable or malformed file
    throw DamagedCheckpoint(e.what());
  }
  return c;
}

// The JSON's content against the hash written beside it: an edited field is a damaged checkpoint
// (its tensors have their own hash).
void CheckpointFile::check_sum() {
  if (!json_.is_object() || json_.value("format", "") != kFormat) {
    throw DamagedCheckpoint(fmt::format("not a {} file", kFormat));
  }
  const auto it = json_.find("checksum");
  if (it == json_.end() || !it->is_string()) throw DamagedCheckpoint("no checksum");
  const std::string written = it->get<std::string>();
  json_.erase(it);
  if (Hasher().text(json_.dump()).hex() != written) {
    throw DamagedCheckpoint("its content differs from its checksum (the file was changed)");
  }
}

void CheckpointFile::read_tensors() {
  const Json& t = json_.at("tensors");
  // Only this checkpoint's own tensors file, beside it: never a path elsewhere.
  const std::string name = t.at("file").get<std::string>();
  const std::string own = checkpoint_stem(checkpoint_steps(file_)) + ".safetensors";
  if (name != own) {
    throw DamagedCheckpoint(fmt::format("tensors.file: '{}', expected '{}'", name, own));
  }
  const fs::path tensor_file = file_.parent_path() / name;
  const Json& size = t.at("bytes");
  if (!size.is_number_unsigned()) throw DamagedCheckpoint("tensors.bytes: not a byte count");
  const std::string bytes = read_regular_file(tensor_file, size.get<uint64_t>());
  if (Hasher().text(bytes).hex() != t.at("hash").get<std::string>()) {
    throw DamagedCheckpoint(
        fmt::format("{} is truncated or damaged (its size or hash differs from the "
                    "one recorded)",
                    tensor_file.filename().string()));
  }
  tensors_ = decode_safetensors(bytes, tensor_file.string());
}

void CheckpointFile::check_fingerprint(const RunFingerprint& now) const {
  Json saved;
  try {
    saved = json_.at("fingerprint");
    for (const char* key : {"spec", "data", "device", "settings", "version"}) {
      saved.at(key).get<std::string>();
    }
  } catch (const Json::exception& e) {
    throw DamagedCheckpoint(e.what());
  }
  compare_fingerprints(saved, now, file_);
}

void CheckpointFile::apply(TrainPlan& p, TrainState& state) const {
  try {
    apply_state(p, state);
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{}: damaged checkpoint ({})", file_.string(), e.what()));
  }
}

namespace {

using SavedTensors = std::map<std::string, const NamedTensor*>;

// Copies each tensor's saved values (named `prefix` + its name) into its place in `flat`.
void read_flat(const SavedTensors& saved, const std::vector<ParamTensor>& tensors,
               const std::string& prefix, std::vector<float>& flat, const fs::path& file) {
  for (const ParamTensor& t : tensors) {
    const std::string name = prefix + t.name;
    const auto it = saved.find(name);
    if (it == saved.end() || it->second->data.size() != static_cast<size_t>(t.size)) {
      throw UserError(
          fmt::format("{}: tensor '{}' is missing or has the wrong size", file.string(), name));
    }
    std::copy(it->second->data.begin(), it->second->data.end(), flat.begin() + t.offset);
  }
}

// The optimizer's buffers, and the best epoch's parameters where restore_best keeps them (the
// state sized them already), scattered into flat buffers.
void read_training_tensors(const SavedTensors& saved, TrainPlan& p, TrainState& state,
                           const fs::path& file) {
  Model& model = p.model;
  for (const OptimizerStateBuffer& b : p.optimizer->state_buffers()) {
    std::vector<float> flat(static_cast<size_t>(model.flat_size()), 0.0f);
    read_flat(saved, model.tensors(), fmt::format("{}{}.", kOptimizerPrefix, b.name), flat, file);
    upload(p.backend, b.data, flat);
  }
  if (!state.best_params.empty()) {
    read_flat(saved, model.tensors(), kBestPrefix, state.best_params, file);
    read_flat(saved, model.buffers(), kBestPrefix, state.best_buffers, file);
  }
}

// What lives on the device besides the tensors: the optimizer's step count, dropout's step, the
// sampler's position and the loss statistics.
void restore_device_counters(const Json& j, TrainPlan& p) {
  Backend& be = p.backend;
  p.optimizer->set_steps(j.at("optimizer_steps").get<int64_t>());
  const auto dropout_step = j.at("dropout_step").get<uint64_t>();
  be.upload(p.model.step_counter(), &dropout_step, sizeof(dropout_step));
  if (p.position) {
    const auto position = j.at("position").get<int64_t>();
    be.upload(p.position.as<int64_t>(), &position, sizeof(position));
  }
  const LossStats host[2] = {read_stats(j.at("loss_stats")),
                             read_stats(j.at("partial_loss_stats"))};
  be.upload(p.stats, host, sizeof(host));
}

// Where the run stopped: the epoch and step, the shuffle generator and the sample order, each
// checked against the plan.
void restore_position(const Json& j, TrainPlan& p, TrainState& state, const fs::path& file) {
  state.epoch = j.at("epoch").get<int64_t>();
  state.in_epoch = j.at("in_epoch").get<bool>();
  state.step = j.at("step").get<int64_t>();
  state.steps_taken = j.at("steps_taken").get<int64_t>();
  if (!state.shuffle_rng.restore(j.at("shuffle_generator").get<std::string>())) {
    throw UserError(fmt::format("{}: shuffle_generator: not a generator state", file.string()));
  }
  // A permutation of the samples (CheckpointFile::validate checked it).
  state.order.clear();
  for (const Json& e : j.at("order")) state.order.push_back(static_cast<int32_t>(e.get<int64_t>()));
  if (p.order) p.backend.upload(p.order.as<int32_t>(), state.order.data(), p.order.bytes());
}

// The epochs so far, and the schedule's and early stopping's state after them.
void restore_epochs(const Json& j, TrainState& state) {
  state.epochs.clear();
  for (const Json& e : j.at("epochs")) {
    state.epochs.push_back({e.at("epoch").get<int64_t>(), number(e.at("loss")),
                            number(e.at("train_error")), number(e.at("seconds")),
                            number(e.at("test_loss")), number(e.at("test_accuracy")),
                            number(e.at("val_loss")), number(e.at("val_accuracy")),
                            e.contains("lr") ? number(e.at("lr")) : state.schedule.lr});
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

// The steps before the checkpoint were timed by the process that ran them.
void restore_times(const Json& j, TrainState& state) {
  const Json& times = j.at("times");
  state.timed = times.at("timed_steps").get<int64_t>();  // the step (validate checked)
  state.epoch_ms = number(times.at("epoch_ms"));
  state.times.step = numbers(times.at("step"));
  state.times.data = numbers(times.at("data"));
  state.times.forward_backward = numbers(times.at("forward_backward"));
  state.times.optimizer = numbers(times.at("optimizer"));
}

}  // namespace

namespace {
// The checks of CheckpointFile::validate, each throwing DamagedCheckpoint naming the field.
namespace checks {

[[noreturn]] void damaged(const std::string& what) { throw DamagedCheckpoint(what); }

// An integer field from `min` to `max` (a float, a string or a value out of range is damage).
int64_t integer(const Json& j, const char* key, int64_t min, int64_t max) {
  const auto it = j.find(key);
  if (it == j.end()) damaged(fmt::format("{}: missing", key));
  const bool fits =
      it->is_number_unsigned()
          ? it->get<uint64_t>() <= static_cast<uint64_t>(max) && min <= 0
          : it->is_number_integer() && it->get<int64_t>() >= min && it->get<int64_t>() <= max;
  if (!fits || it->get<int64_t>() < min) {
    damaged(fmt::format("{}: {}, expected an integer from {} to {}", key, it->dump(), min, max));
  }
  return it->get<int64_t>();
}

void expect_equal(const char* what, int64_t found, int64_t expected, const char* because) {
  if (found != expected) {
    damaged(fmt::format("{}: {}, expected {} ({})", what, found, expected, because));
  }
}

// Where the run stood: the epoch within the run, the step within the epoch, the counters that
// follow from them, and the batch position.
void position(const Json& j, const TrainPlan& p, int64_t epochs, int64_t file_steps) {
  const int64_t spe = p.steps_per_epoch;
  const int64_t epoch = integer(j, "epoch", 0, epochs);
  const int64_t step = integer(j, "step", 0, spe);
  const int64_t taken = integer(j, "steps_taken", 0, std::numeric_limits<int64_t>::max() / 2);
  expect_equal("steps_taken", taken, epoch * spe + step, "epoch x steps per epoch + step");
  expect_equal("steps_taken", taken, file_steps, "the steps in the file's name");
  expect_equal("optimizer_steps", integer(j, "optimizer_steps", 0, taken), taken, "one a step");
  expect_equal("dropout_step", integer(j, "dropout_step", 0, taken), taken, "one a step");
  // Where batches are gathered on the device, the samples of the epoch taken so far (the partial
  // batch's at its end); elsewhere the counter stays 0.
  const int64_t at = std::min(step * p.batch, p.samples);
  const int64_t position = integer(j, "position", 0, at);
  if (position != 0 && position != at) {
    damaged(fmt::format("position: {}, expected {} (the samples of the epoch taken) or 0", position,
                        at));
  }
  const Json& in_epoch = j.at("in_epoch");
  if (!in_epoch.is_boolean()) damaged("in_epoch: not true or false");
  if (step > 0 && !in_epoch.get<bool>()) damaged("in_epoch: false at a step inside the epoch");
  expect_equal("times.timed_steps", integer(j.at("times"), "timed_steps", 0, spe), step,
               "the steps of the epoch under way");
  if (!j.at("epochs").is_array()) damaged("epochs: not an array");
  expect_equal("epochs", static_cast<int64_t>(j.at("epochs").size()), epoch,
               "one record a completed epoch");
}

// The shuffle: a generator state that reads, and an order that is a permutation of the samples.
void shuffle(const Json& j, const TrainPlan& p) {
  const Json& g = j.at("shuffle_generator");
  Rng rng(0);
  if (!g.is_string() || !rng.restore(g.get<std::string>())) {
    damaged("shuffle_generator: not a generator state");
  }
  const Json& order = j.at("order");
  if (!order.is_array()) damaged("order: not an array");
  if (order.empty() && !p.order) return;
  if (order.size() != static_cast<size_t>(p.samples)) {
    damaged(fmt::format("order: {} entries, expected {} (the samples)", order.size(), p.samples));
  }
  std::vector<bool> seen(static_cast<size_t>(p.samples), false);
  for (const Json& e : order) {
    const bool index =
        e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < p.samples;
    if (!index || seen[static_cast<size_t>(e.get<int64_t>())]) {
      damaged(fmt::format("order: {} is not a sample index seen once", e.dump()));
    }
    seen[static_cast<size_t>(e.get<int64_t>())] = true;
  }
}

// The rules between epochs and the divergence check: counts of epochs within the run.
void epoch_rules(const Json& j, int64_t epochs) {
  const int64_t epoch = j.at("epoch").get<int64_t>();
  integer(j, "diverged_epoch", 0, epoch + 1);
  const Json& check = j.at("loss_check");
  integer(check, "step", 0, j.at("step").get<int64_t>());
  integer(check, "last_finite_epoch", 0, epoch + 1);
  integer(check, "last_finite_step", 0, std::numeric_limits<int32_t>::max());
  if (j.contains("schedule")) {
    const Json& schedule = j.at("schedule");
    for (const char* key : {"last_epoch", "num_bad_epochs", "cooldown_counter"}) {
      integer(schedule, key, 0, epochs);
    }
    const double lr = number(schedule.at("lr"));
    if (!std::isfinite(lr) || lr < 0) damaged(fmt::format("schedule.lr: {}", lr));
  }
  if (j.contains("early_stopping")) {
    const Json& stopping = j.at("early_stopping");
    integer(stopping, "wait", 0, epoch);
    integer(stopping, "best_epoch", 0, epoch);
  }
}

// Every tensor the run needs, of its size, finite unless the run's loss had diverged.
void tensors(const std::vector<NamedTensor>& saved, const TrainPlan& p, const TrainState& state,
             bool diverged) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : saved) by_name[t.name] = &t;
  auto need = [&](const std::string& name, int64_t size) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) damaged(fmt::format("tensor '{}' is missing", name));
    if (it->second->data.size() != static_cast<size_t>(size)) {
      damaged(
          fmt::format("tensor '{}': {} values, expected {}", name, it->second->data.size(), size));
    }
    if (diverged) return;
    for (float v : it->second->data) {
      if (!std::isfinite(v)) damaged(fmt::format("tensor '{}' holds {}", name, v));
    }
  };
  const Model& m = p.model;
  for (const ParamTensor& t : m.tensors()) need(t.name, t.size);
  for (const ParamTensor& b : m.buffers()) need(b.name, b.size);
  for (const OptimizerStateBuffer& b : p.optimizer->state_buffers()) {
    for (const ParamTensor& t : m.tensors()) {
      need(fmt::format("{}{}.{}", kOptimizerPrefix, b.name, t.name), t.size);
    }
  }
  if (!state.best_params.empty()) {
    for (const ParamTensor& t : m.tensors()) need(kBestPrefix + t.name, t.size);
    for (const ParamTensor& b : m.buffers()) need(kBestPrefix + b.name, b.size);
  }
}

}  // namespace checks
}  // namespace

void CheckpointFile::validate(const TrainPlan& p, const TrainState& state, int64_t epochs) const {
  try {
    checks::position(json_, p, epochs, checkpoint_steps(file_));
    checks::shuffle(json_, p);
    checks::epoch_rules(json_, epochs);
    checks::tensors(tensors_, p, state, json_.at("diverged_epoch").get<int64_t>() > 0);
  } catch (const Json::exception& e) {
    throw DamagedCheckpoint(e.what());
  } catch (const DamagedCheckpoint&) {
    throw;
  } catch (const UserError& e) {
    throw DamagedCheckpoint(e.what());
  }
}

void CheckpointFile::apply_state(TrainPlan& p, TrainState& state) const {
  // The model's tensors through the checked import; the optimizer's (and early stopping's best
  // epoch's) into flat buffers.
  std::vector<NamedTensor> model_tensors;
  SavedTensors state_tensors;
  for (const NamedTensor& t : tensors_) {
    if (t.name.rfind(kOptimizerPrefix, 0) == 0 || t.name.rfind(kBestPrefix, 0) == 0) {
      state_tensors[t.name] = &t;
    } else {
      model_tensors.push_back(t);
    }
  }
  p.model.import_params(model_tensors, file_.string());
  read_training_tensors(state_tensors, p, state, file_);
  restore_device_counters(json_, p);
  restore_position(json_, p, state, file_);
  restore_epochs(json_, state);
  restore_loss_check(json_, state);
  restore_times(json_, state);
}

}  // namespace xo

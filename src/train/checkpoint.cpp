// Checkpoints: the snapshot taken between two steps, the background writer, and the restore (see
// checkpoint.h for the files and their guarantees).
#include "train/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "core/hash.h"
#include "data/source.h"
#include "io/safetensors.h"
#include "train/plan.h"
#include "train/state.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kFormat = "crossover.checkpoint/1";
constexpr const char* kOptimizerPrefix = "optimizer.";
constexpr int kKept = 2;  // whole checkpoints kept: the newest, and one to fall back to

// "step-000000001200": steps taken, zero-padded so that names sort as numbers.
std::string stem(int64_t steps_taken) { return fmt::format("step-{:012}", steps_taken); }

// The steps taken a checkpoint's JSON file name holds, or -1 where it is not one.
int64_t steps_of(const fs::path& file) {
  const std::string name = file.filename().string();
  if (name.size() != 22 || name.rfind("step-", 0) != 0 || file.extension() != ".json") return -1;
  int64_t steps = -1;
  const auto [end, ec] = std::from_chars(name.data() + 5, name.data() + 17, steps);
  return ec == std::errc() && end == name.data() + 17 ? steps : -1;
}

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
void check_fingerprint(const Json& saved, const RunFingerprint& now, const fs::path& file) {
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

// Everything a checkpoint holds, on the host.
struct Snapshot {
  explicit Snapshot(uint64_t seed) : state(seed) {}
  std::vector<float> params, buffers;
  std::vector<std::vector<float>> optimizer;  // per state buffer, flat
  int64_t optimizer_steps = 0;
  uint64_t step_counter = 0;
  int64_t position = 0;
  LossStats stats{};
  TrainState state;
};

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

std::string describe(const CheckpointInterval& interval) {
  if (interval.steps > 0) return fmt::format("every {} steps", interval.steps);
  if (interval.seconds > 0) return fmt::format("every {:g} s", interval.seconds);
  return "off";
}

RunFingerprint run_fingerprint(const TrainPlan& p, const TrainSpec& train, bool record_step) {
  ModelSpec spec = p.model.spec();
  spec.train = train;
  const DeviceInfo& d = p.backend.info();
  return {
      CROSSOVER_VERSION, to_toml(spec), data_fingerprint(p.split),
      fmt::format("{} ({}), {}, {} threads, {}", d.id, d.name, d.library, d.threads, d.precision),
      fmt::format("{} batch shards, step {}", p.full.shards(),
                  record_step && p.recorded ? "recorded" : "launched")};
}

struct Checkpointer::Impl {
  Impl(const TrainPlan& p, const CheckpointOptions& o, RunFingerprint f)
      : options(o),
        fingerprint(std::move(f)),
        model_name(p.model.spec().name),
        tensors(p.model.tensors()),
        buffers(p.model.buffers()),
        slot(p.model.spec().train.seed),
        started(Clock::now()) {
    // The host side of the snapshot, sized once: saving copies into it.
    slot.params.resize(static_cast<size_t>(p.model.flat_size()));
    slot.buffers.resize(static_cast<size_t>(p.model.state_size()));
    for (const OptimizerStateBuffer& b : p.optimizer->state_buffers()) {
      optimizer_names.emplace_back(b.name);
      slot.optimizer.emplace_back(static_cast<size_t>(p.model.flat_size()));
    }
    writer = std::thread([this] { write_loop(); });
  }

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      quit = true;
    }
    wake.notify_all();
    writer.join();
  }

  void note(const std::string& message) const {
    if (options.note) {
      options.note(message);
    } else {
      fmt::print(stderr, "crossover: {}\n", message);
    }
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
      idle.notify_all();
    }
  }

  // The named tensors of a snapshot: the model's state_dict, then each optimizer state buffer
  // viewed per parameter tensor (their alignment padding is always zero, as the gradients' is).
  std::vector<NamedTensor> named_tensors(const Snapshot& s) const {
    std::vector<NamedTensor> out;
    auto view = [](const ParamTensor& t, const std::vector<float>& flat) {
      return std::vector<float>(flat.begin() + t.offset, flat.begin() + t.offset + t.size);
    };
    for (const ParamTensor& t : tensors) out.push_back({t.name, t.shape, view(t, s.params)});
    for (const ParamTensor& b : buffers) {
      out.push_back({b.name, b.shape, view(b, s.buffers), b.integer ? "I64" : "F32"});
    }
    for (size_t k = 0; k < optimizer_names.size(); ++k) {
      for (const ParamTensor& t : tensors) {
        out.push_back({fmt::format("{}{}.{}", kOptimizerPrefix, optimizer_names[k], t.name),
                       t.shape, view(t, s.optimizer[k])});
      }
    }
    return out;
  }

  Json state_json(const Snapshot& s, const std::string& tensor_file,
                  const std::string& bytes) const {
    const TrainState& t = s.state;
    Json epochs = Json::array();
    for (const EpochRecord& e : t.epochs) {
      epochs.push_back({{"epoch", e.epoch},
                        {"loss", number(e.loss)},
                        {"train_error", number(e.train_error)},
                        {"seconds", number(e.seconds)},
                        {"test_loss", number(e.test_loss)},
                        {"test_accuracy", number(e.test_accuracy)}});
    }
    return {
        {"format", kFormat},
        {"model", model_name},
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
        {"loss_stats",
         {number(s.stats.loss_sum), number(s.stats.correct), number(s.stats.samples)}},
        {"shuffle_generator", t.shuffle_rng.state()},
        {"order", t.order},
        {"epochs", epochs},
        {"diverged_epoch", t.diverged_epoch},
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

  // Writes one checkpoint, then prunes the older ones. A failure keeps the previous checkpoint.
  void write(const Snapshot& s) {
    const std::string name = stem(s.state.steps_taken);
    try {
      const std::string bytes = encode_safetensors(
          named_tensors(s), {{"format", "pt"}, {"model", model_name}, {"producer", "crossover"}},
          (options.dir / (name + ".safetensors")).string());
      write_file_atomic(options.dir / (name + ".safetensors"), bytes);
      write_file_atomic(options.dir / (name + ".json"),
                        state_json(s, name + ".safetensors", bytes).dump(1) + "\n");
      ++written;
      prune();
    } catch (const std::exception& e) {
      const std::optional<int64_t> previous = newest_checkpoint(options.dir);
      note(fmt::format("warning: the checkpoint at step {} was not written ({}); {}",
                       s.state.steps_taken, e.what(),
                       previous ? fmt::format("the previous one, at step {}, is kept", *previous)
                                : std::string("none is saved yet")));
    }
  }

  // Keeps the kKept newest checkpoints of the folder and removes everything else it wrote there
  // (older checkpoints, temporaries of a write that was killed).
  void prune() const {
    std::vector<int64_t> steps;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
      if (const int64_t n = steps_of(entry.path()); n >= 0) steps.push_back(n);
    }
    std::sort(steps.rbegin(), steps.rend());
    if (steps.size() > static_cast<size_t>(kKept)) steps.resize(kKept);
    for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("step-", 0) != 0) continue;
      const bool kept = std::any_of(steps.begin(), steps.end(), [&](int64_t n) {
        return file == stem(n) + ".json" || file == stem(n) + ".safetensors";
      });
      if (!kept) fs::remove(entry.path(), ec);
    }
  }

  CheckpointOptions options;
  RunFingerprint fingerprint;
  std::string model_name;
  std::vector<ParamTensor> tensors, buffers;
  std::vector<std::string> optimizer_names;
  Snapshot slot;  // the writer's; the step loop fills it only while the writer is idle
  Clock::time_point started, last{};
  int64_t last_steps = 0;
  int64_t written = 0;
  double wait_ms = 0;

  std::mutex mutex;
  std::condition_variable wake, idle;
  bool pending = false, quit = false;
  std::thread writer;
};

Checkpointer::Checkpointer(const TrainPlan& p, const CheckpointOptions& options,
                           RunFingerprint fingerprint)
    : impl_(std::make_unique<Impl>(p, options, std::move(fingerprint))) {}

Checkpointer::~Checkpointer() = default;

bool Checkpointer::due(const TrainState& state) const {
  const CheckpointInterval& every = impl_->options.every;
  if (every.steps > 0 && state.steps_taken - impl_->last_steps >= every.steps) return true;
  if (every.seconds > 0) {
    const Clock::time_point since =
        impl_->written > 0 || impl_->last_steps > 0 ? impl_->last : impl_->started;
    return std::chrono::duration<double>(Clock::now() - since).count() >= every.seconds;
  }
  return false;
}

void Checkpointer::save(TrainPlan& p, TrainState& state) {
  const auto start = Clock::now();
  impl_->wait_idle();
  Snapshot& s = impl_->slot;
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
  be.download(&s.stats, p.stats, sizeof(s.stats));
  s.state = state;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->pending = true;
  }
  impl_->wake.notify_all();
  impl_->last = Clock::now();
  impl_->last_steps = state.steps_taken;
  impl_->wait_ms += std::chrono::duration<double, std::milli>(impl_->last - start).count();
}

void Checkpointer::flush() { impl_->wait_idle(); }

int64_t Checkpointer::written() const { return impl_->written; }
double Checkpointer::wait_ms() const { return impl_->wait_ms; }
const fs::path& Checkpointer::dir() const { return impl_->options.dir; }

std::optional<int64_t> newest_checkpoint(const fs::path& dir) {
  std::optional<int64_t> newest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (const int64_t n = steps_of(entry.path()); n >= 0 && (!newest || n > *newest)) newest = n;
  }
  return newest;
}

void remove_checkpoints(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().rfind("step-", 0) == 0) fs::remove(entry.path(), ec);
  }
  fs::remove(dir, ec);  // only when empty: the folder may hold other files
}

namespace {

// A checkpoint read back and checked whole: its JSON and its tensors.
struct Loaded {
  Json json;
  std::vector<NamedTensor> tensors;
};

Loaded load(const fs::path& json_file) {
  Loaded l;
  try {
    l.json = Json::parse(read_file(json_file));
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("not valid JSON ({})", e.what()));
  }
  if (l.json.value("format", "") != kFormat) {
    throw UserError(fmt::format("not a {} file", kFormat));
  }
  const Json& t = l.json.at("tensors");
  const fs::path tensor_file = json_file.parent_path() / t.at("file").get<std::string>();
  const std::string bytes = read_file(tensor_file);
  if (bytes.size() != t.at("bytes").get<size_t>() ||
      Hasher().text(bytes).hex() != t.at("hash").get<std::string>()) {
    throw UserError(
        fmt::format("{} is truncated or damaged (its size or hash differs from the "
                    "one recorded)",
                    tensor_file.filename().string()));
  }
  l.tensors = decode_safetensors(bytes, tensor_file.string());
  return l;
}

// Uploads `floats` (flat, host) into a device buffer.
void upload(Backend& be, float* dst, const std::vector<float>& floats) {
  if (!floats.empty()) be.upload(dst, floats.data(), sizeof(float) * floats.size());
}

void apply(TrainPlan& p, TrainState& state, const Loaded& l, const fs::path& file) {
  const Json& j = l.json;
  Model& model = p.model;
  Backend& be = p.backend;
  // The model's tensors through the checked import; the optimizer's scattered into flat buffers.
  std::vector<NamedTensor> model_tensors;
  std::map<std::string, const NamedTensor*> optimizer_tensors;
  for (const NamedTensor& t : l.tensors) {
    if (t.name.rfind(kOptimizerPrefix, 0) == 0) {
      optimizer_tensors[t.name] = &t;
    } else {
      model_tensors.push_back(t);
    }
  }
  model.import_params(model_tensors, file.string());
  for (const OptimizerStateBuffer& b : p.optimizer->state_buffers()) {
    std::vector<float> flat(static_cast<size_t>(model.flat_size()), 0.0f);
    for (const ParamTensor& t : model.tensors()) {
      const std::string name = fmt::format("{}{}.{}", kOptimizerPrefix, b.name, t.name);
      const auto it = optimizer_tensors.find(name);
      if (it == optimizer_tensors.end() || it->second->data.size() != static_cast<size_t>(t.size)) {
        throw UserError(
            fmt::format("{}: tensor '{}' is missing or has the wrong size", file.string(), name));
      }
      std::copy(it->second->data.begin(), it->second->data.end(), flat.begin() + t.offset);
    }
    upload(be, b.data, flat);
  }
  p.optimizer->set_steps(j.at("optimizer_steps").get<int64_t>());
  const auto dropout_step = j.at("dropout_step").get<uint64_t>();
  be.upload(model.step_counter(), &dropout_step, sizeof(dropout_step));
  if (p.position) {
    const auto position = j.at("position").get<int64_t>();
    be.upload(p.position.as<int64_t>(), &position, sizeof(position));
  }
  const Json& stats = j.at("loss_stats");
  const LossStats host{number(stats.at(0)), number(stats.at(1)), number(stats.at(2))};
  be.upload(p.stats, &host, sizeof(host));

  state.epoch = j.at("epoch").get<int64_t>();
  state.in_epoch = j.at("in_epoch").get<bool>();
  state.step = j.at("step").get<int64_t>();
  state.steps_taken = j.at("steps_taken").get<int64_t>();
  if (!state.shuffle_rng.restore(j.at("shuffle_generator").get<std::string>())) {
    throw UserError(fmt::format("{}: shuffle_generator: not a generator state", file.string()));
  }
  state.order = j.at("order").get<std::vector<int32_t>>();
  if (p.order) {
    if (state.order.size() != static_cast<size_t>(p.samples)) {
      throw UserError(fmt::format("{}: order: {} entries, expected {} (the samples)", file.string(),
                                  state.order.size(), p.samples));
    }
    for (int32_t i : state.order) {
      if (i < 0 || i >= p.samples) {
        throw UserError(fmt::format("{}: order: {} is not a sample index", file.string(), i));
      }
    }
    be.upload(p.order.as<int32_t>(), state.order.data(), p.order.bytes());
  }
  if (state.step < 0 || state.step > p.steps_per_epoch || state.epoch < 0) {
    throw UserError(fmt::format("{}: step {} of epoch {} is outside the run ({} steps per epoch)",
                                file.string(), state.step, state.epoch, p.steps_per_epoch));
  }
  state.epochs.clear();
  for (const Json& e : j.at("epochs")) {
    state.epochs.push_back({e.at("epoch").get<int64_t>(), number(e.at("loss")),
                            number(e.at("train_error")), number(e.at("seconds")),
                            number(e.at("test_loss")), number(e.at("test_accuracy"))});
  }
  state.diverged_epoch = j.at("diverged_epoch").get<int64_t>();
  const Json& check = j.at("loss_check");
  state.checked_loss_sum = number(check.at("sum"));
  state.checked_step = check.at("step").get<int64_t>();
  state.last_finite_loss = number(check.at("last_finite_loss"));
  state.last_finite_epoch = check.at("last_finite_epoch").get<int64_t>();
  state.last_finite_step = check.at("last_finite_step").get<int64_t>();
  const Json& times = j.at("times");
  // The steps before the checkpoint were timed by the process that ran them.
  state.timed = times.at("timed_steps").get<int64_t>();
  if (state.timed != state.step) {
    throw UserError(fmt::format("{}: times: {} steps timed, expected {}", file.string(),
                                state.timed, state.step));
  }
  state.epoch_ms = number(times.at("epoch_ms"));
  state.times.step = numbers(times.at("step"));
  state.times.data = numbers(times.at("data"));
  state.times.forward_backward = numbers(times.at("forward_backward"));
  state.times.optimizer = numbers(times.at("optimizer"));
}

}  // namespace

std::optional<int64_t> restore_checkpoint(TrainPlan& p, TrainState& state,
                                          const CheckpointOptions& options,
                                          const RunFingerprint& fingerprint) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
    if (const int64_t n = steps_of(entry.path()); n >= 0) found.emplace_back(n, entry.path());
  }
  std::sort(found.rbegin(), found.rend());
  auto note = [&](const std::string& m) {
    if (options.note) {
      options.note(m);
    } else {
      fmt::print(stderr, "crossover: {}\n", m);
    }
  };
  for (const auto& [steps, file] : found) {
    Loaded l;
    try {
      l = load(file);
      check_fingerprint(l.json.at("fingerprint"), fingerprint, file);
    } catch (const Json::exception& e) {
      note(fmt::format("warning: {}: damaged checkpoint ({}); trying the one before", file.string(),
                       e.what()));
      continue;
    } catch (const UserError& e) {
      // A checkpoint of another run is refused outright; a damaged one falls back.
      if (l.json.is_object() && l.json.contains("fingerprint")) throw;
      note(fmt::format("warning: {}: damaged checkpoint ({}); trying the one before", file.string(),
                       e.what()));
      continue;
    }
    try {
      apply(p, state, l, file);
    } catch (const Json::exception& e) {
      throw UserError(fmt::format("{}: damaged checkpoint ({})", file.string(), e.what()));
    }
    return steps;
  }
  if (!found.empty()) {
    note(fmt::format("warning: no whole checkpoint in {}; training starts from the beginning",
                     options.dir.string()));
  }
  return std::nullopt;
}

}  // namespace xo

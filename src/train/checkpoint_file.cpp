// One checkpoint's files: a snapshot written as step-N.safetensors and step-N.json, read back and
// checked whole, compared with the run about to resume, and applied to its plan and state.
#include "train/checkpoint_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

#include "core/file.h"
#include "core/hash.h"
#include "train/plan.h"

namespace xo {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOptimizerPrefix = "optimizer.";
// early_stopping.restore_best: the best epoch's parameters and buffers, by their state_dict names.
constexpr const char* kBestPrefix = "early_stopping.best.";

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
  const CheckpointJson doc =
      checkpoint_json(s, layout.model, fingerprint, tensors.filename().string(), bytes);
  replace_file_atomic(dir / (name + ".json"), doc.dump(1) + "\n");
}

CheckpointFile CheckpointFile::read(const fs::path& json_file) {
  CheckpointFile c;
  c.file_ = json_file;
  as_damage([&] {  // an unreadable or malformed file
    c.json_ = parse_checkpoint_json(read_regular_file(json_file), json_file.string());
    c.read_tensors();
  });
  return c;
}

void CheckpointFile::read_tensors() {
  const ReadCheckpointJson& t = json_.at("tensors");
  // Only this checkpoint's own tensors file, beside it: never a path elsewhere.
  const std::string name = t.at("file").get<std::string>();
  const std::string own = checkpoint_stem(checkpoint_steps(file_)) + ".safetensors";
  if (name != own) {
    throw DamagedCheckpoint(fmt::format("tensors.file: '{}', expected '{}'", name, own));
  }
  const fs::path tensor_file = file_.parent_path() / name;
  const ReadCheckpointJson& size = t.at("bytes");
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

CheckpointWriter CheckpointFile::check_fingerprint(const RunFingerprint& now) const {
  return check_checkpoint_fingerprint(json_, now, file_);
}

namespace {

// Every tensor the run needs, of its size, finite unless the run's loss had diverged.
void check_tensors(const std::vector<NamedTensor>& saved, const TrainPlan& p,
                   const TrainState& state, bool diverged) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : saved) by_name[t.name] = &t;
  auto need = [&](const std::string& name, int64_t size) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw DamagedCheckpoint(fmt::format("tensor '{}' is missing", name));
    if (it->second->data.size() != static_cast<size_t>(size)) {
      throw DamagedCheckpoint(
          fmt::format("tensor '{}': {} values, expected {}", name, it->second->data.size(), size));
    }
    if (diverged) return;
    for (float v : it->second->data) {
      if (!std::isfinite(v)) throw DamagedCheckpoint(fmt::format("tensor '{}' holds {}", name, v));
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

}  // namespace

void CheckpointFile::validate(const TrainPlan& p, const TrainState& state, int64_t epochs) {
  const CheckpointRun run{epochs, p.steps_per_epoch, p.batch, p.samples, bool(p.order)};
  CheckpointRead read = read_checkpoint_state(json_, run, checkpoint_steps(file_), state);
  as_damage([&] { check_tensors(tensors_, p, state, read.state.diverged_epoch > 0); });
  restored_.emplace(std::move(read));
}

void CheckpointFile::apply(TrainPlan& p, TrainState& state) {
  XO_ASSERT(restored_);  // validate() passed
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
  const CheckpointCounters c = restored_->counters;
  state = std::move(restored_->state);
  restored_.reset();
  read_training_tensors(state_tensors, p, state, file_);
  // What lives on the device besides the tensors: the optimizer's step count, dropout's step, the
  // sampler's position and order, and the loss statistics.
  Backend& be = p.backend;
  p.optimizer->set_steps(c.optimizer_steps);
  be.upload(p.model.step_counter(), &c.dropout_step, sizeof(c.dropout_step));
  if (p.position) be.upload(p.position.as<int64_t>(), &c.position, sizeof(c.position));
  be.upload(p.stats, c.stats, sizeof(c.stats));
  if (p.order) be.upload(p.order.as<int32_t>(), state.order.data(), p.order.bytes());
}

}  // namespace xo

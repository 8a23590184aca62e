// One checkpoint's files (see checkpoint.h): a snapshot of the training state on the host, written
// as step-N.safetensors and step-N.json, read back and checked whole, compared with the run about
// to resume, and applied to its plan and state. When and where checkpoints are taken is
// checkpoint.cpp's business.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/state.h"

namespace xo {

struct TrainPlan;

// Everything a checkpoint holds, on the host.
struct CheckpointSnapshot {
  explicit CheckpointSnapshot(uint64_t seed) : state(seed) {}
  std::vector<float> params, buffers;         // the model's flat buffers, padding included
  std::vector<std::vector<float>> optimizer;  // per optimizer state buffer, flat
  int64_t optimizer_steps = 0;
  uint64_t step_counter = 0;  // the dropout masks' step
  int64_t position = 0;       // the batch position, where batches are gathered
  LossStats stats[2]{};       // the epoch's loss sums so far: full batches, partial batch
  TrainState state;
};

// What names a snapshot's tensors.
struct CheckpointLayout {
  std::string model;
  std::vector<ParamTensor> tensors, buffers;
  std::vector<std::string> optimizer;  // the optimizer's state buffer names, in its order
};

// "step-000000001200": the files' stem for a checkpoint at that many steps taken, zero-padded so
// that names sort as numbers.
std::string checkpoint_stem(int64_t steps_taken);
// The steps taken a checkpoint's JSON file name holds, or -1 where it is not one.
int64_t checkpoint_steps(const std::filesystem::path& file);

// Writes DIR/step-N.safetensors, then DIR/step-N.json (with the tensors' size and hash), each
// atomically. Throws UserError naming the file when a write fails.
void write_checkpoint(const std::filesystem::path& dir, const CheckpointSnapshot& s,
                      const CheckpointLayout& layout, const RunFingerprint& fingerprint);

// A checkpoint that cannot be read whole (truncated, corrupt, not one): the one before is used.
class DamagedCheckpoint : public UserError {
 public:
  using UserError::UserError;
};

// A checkpoint read back from its JSON file, with its tensors checked against the recorded hash.
class CheckpointFile {
 public:
  // Throws DamagedCheckpoint.
  static CheckpointFile read(const std::filesystem::path& json_file);
  // Throws UserError naming each part of the run that differs (DamagedCheckpoint where the
  // fingerprint cannot be read).
  void check_fingerprint(const RunFingerprint& now) const;
  // Checks every field against its range, the others and the run (`epochs` its epochs): the epoch
  // within the run, the step within the epoch and the counters that follow from them, the batch
  // position, the order a permutation of the samples, the generator state, the rules' counts,
  // every tensor present with its size and finite (unless the run had diverged). Throws
  // DamagedCheckpoint naming what is wrong; nothing is restored before it passes.
  void validate(const TrainPlan& p, const TrainState& state, int64_t epochs) const;
  // Restores the plan's device state and `state` (after validate).
  void apply(TrainPlan& p, TrainState& state) const;

 private:
  void check_sum();
  void read_tensors();
  void apply_state(TrainPlan& p, TrainState& state) const;

  std::filesystem::path file_;
  nlohmann::ordered_json json_;
  std::vector<NamedTensor> tensors_;
};

}  // namespace xo

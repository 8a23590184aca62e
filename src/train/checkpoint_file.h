// One checkpoint's files (see checkpoint.h): a snapshot of the training state on the host, written
// as step-N.safetensors and step-N.json, read back and checked whole, compared with the run about
// to resume, and applied to its plan and state. When and where checkpoints are taken is
// checkpoint.cpp's business.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/checkpoint_json.h"
#include "train/state.h"

namespace xo {

struct TrainPlan;

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

// A checkpoint read back from its JSON file, with its tensors checked against the recorded hash.
class CheckpointFile {
 public:
  // Throws DamagedCheckpoint.
  static CheckpointFile read(const std::filesystem::path& json_file);
  // Throws UserError naming each part of the run that differs (DamagedCheckpoint where the
  // fingerprint cannot be read).
  // Returns what of the run that wrote it may differ (its ranks, a fused trial's shards).
  CheckpointWriter check_fingerprint(const RunFingerprint& now) const;
  // Checks every field against its range, the others and the run (`epochs` its epochs; see
  // read_checkpoint_state), and every tensor present with its size and finite (unless the run
  // had diverged), reading the state it holds aside. Throws DamagedCheckpoint naming what is
  // wrong; nothing is restored before it passes.
  void validate(const TrainPlan& p, const TrainState& state, int64_t epochs);
  // Restores the plan's device state and `state` (after validate).
  void apply(TrainPlan& p, TrainState& state);

 private:
  void read_tensors();

  std::filesystem::path file_;
  ReadCheckpointJson json_;
  std::optional<CheckpointRead> restored_;  // read by validate
  std::vector<NamedTensor> tensors_;
};

}  // namespace xo

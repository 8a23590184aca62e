// A checkpoint's JSON, step-N.json: everything of a snapshot that is not a tensor (where the run
// stood, the shuffle, the epochs so far, the rules' state, the device's counters), the run's
// fingerprint and the tensors file's size and hash, signed with a checksum over its own content.
// Read back, it trusts nothing: its fields are checked against their ranges, each other and the
// run about to resume, and read into a copy of the training state that replaces the state only
// once every check has passed. No backend here: the fuzz target `checkpoint` reads it alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/state.h"

namespace xo {

// /2: the JSON's own content hashed too ("checksum"), and every field checked before a restore.
inline constexpr const char* kCheckpointFormat = "crossover.checkpoint/2";

// A checkpoint's JSON as written: its keys in the order its field lists name them, and signed
// over that order's dump.
using CheckpointJson = nlohmann::ordered_json;
// As read back (its checksum checked and removed), for the checked reader io/json_in.h.
using ReadCheckpointJson = nlohmann::json;

// A checkpoint that cannot be read whole (truncated, corrupt, edited, not one): the one before is
// used.
class DamagedCheckpoint : public UserError {
 public:
  using UserError::UserError;
};

// `read()`'s result; any failure of it (a JSON exception, a UserError: an unreadable file, a field
// of the wrong type) is a DamagedCheckpoint.
template <class Read>
decltype(auto) as_damage(Read&& read) {
  try {
    return read();
  } catch (const CheckpointJson::exception& e) {
    throw DamagedCheckpoint(e.what());
  } catch (const DamagedCheckpoint&) {
    throw;
  } catch (const UserError& e) {
    throw DamagedCheckpoint(e.what());
  }
}

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

// The JSON of snapshot `s` of `model`, whose tensors are `tensor_bytes` in `tensor_file` (a name
// beside it), signed.
CheckpointJson checkpoint_json(const CheckpointSnapshot& s, const std::string& model,
                               const RunFingerprint& fingerprint, const std::string& tensor_file,
                               const std::string& tensor_bytes);

// The JSON read from `text`: nested no deeper than a checkpoint nests, of this format, its content
// the one its checksum was computed over (the checksum removed). Throws DamagedCheckpoint.
ReadCheckpointJson parse_checkpoint_json(const std::string& text, const std::string& origin);

// What wrote a checkpoint where it may differ from the run that resumes it.
struct CheckpointWriter {
  int ranks = 1;   // which may differ from the run's
  int shards = 0;  // its batch shards where they differ from the run's (now.shards_may_differ)
};

// Throws UserError naming each part of the run that differs from the one `j` was taken in (spec,
// data, device, settings, version); DamagedCheckpoint where its fingerprint does not read.
CheckpointWriter check_checkpoint_fingerprint(const ReadCheckpointJson& j,
                                              const RunFingerprint& now,
                                              const std::filesystem::path& file);

// What a checkpoint is checked against: the run about to resume.
struct CheckpointRun {
  int64_t epochs = 0;  // the run's
  int64_t steps_per_epoch = 0, batch = 0, samples = 0;
  bool order = false;  // batches are gathered on the device in a drawn order (kept in the file)
};

// What lives on the device besides the tensors.
struct CheckpointCounters {
  int64_t optimizer_steps = 0;
  uint64_t dropout_step = 0;
  int64_t position = 0;
  LossStats stats[2]{};
};

// A checkpoint's state as read: the host's, and what goes to the device.
struct CheckpointRead {
  TrainState state;
  CheckpointCounters counters;
};

// Checks every field of `j` but the tensors against its range, the others and `run` (`file_steps`:
// the steps in the file's name): the epoch within the run, the step within the epoch and the
// counters that follow from them, the batch position, the order a permutation of the samples
// read as 64-bit, the generator state, the rules' counts. Then reads the host state into a copy
// of `base` (the state of the run about to resume) and the device's counters. Throws
// DamagedCheckpoint naming what is wrong.
CheckpointRead read_checkpoint_state(const ReadCheckpointJson& j, const CheckpointRun& run,
                                     int64_t file_steps, const TrainState& base);

}  // namespace xo

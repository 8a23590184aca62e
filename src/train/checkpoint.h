// Checkpoints of a training run in progress: the whole state between two steps (parameters,
// BatchNorm buffers, optimizer state, counters, the random stream, the epoch's order and position,
// the epochs and step times so far), so that a resumed run ends bit-identical to one never
// stopped. The tensors go to a safetensors file that PyTorch can read, the rest to JSON beside it:
//
//   DIR/step-000000001200.safetensors   "0.weight", …, "optimizer.exp_avg.0.weight", …
//   DIR/step-000000001200.json          counters, generator, order, epochs, times, fingerprint,
//                                       and the size and hash of the safetensors file
//
// Each file is written atomically (temporary, fsync, rename, fsync of the folder), the JSON last:
// a checkpoint exists once its JSON does, and is whole when the tensors match the JSON's hash. The
// two newest whole checkpoints are kept, so a damaged newest one falls back to the one before.
//
// Saving costs the step loop only the copy to host buffers planned up front; a background thread
// serialises and writes while training goes on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace xo {

struct TrainPlan;
struct TrainState;
struct TrainSpec;

// When to save. A checkpoint is also written when the run is stopped (Ctrl-C, SIGTERM).
struct CheckpointInterval {
  int64_t steps = 0;   // every this many training steps (0: not by steps)
  double seconds = 0;  // every this many seconds of training (0: not by time)
  bool enabled() const { return steps > 0 || seconds > 0; }
};
// The default: about a minute, so a lost machine costs at most a minute of work.
inline constexpr CheckpointInterval kDefaultCheckpointInterval{0, 60};

// "500steps", "60s", "2min", "1h" or "off" (as --checkpoint-every takes it); throws UserError
// naming `flag` and the accepted forms.
CheckpointInterval parse_checkpoint_interval(const std::string& text, const std::string& flag);
std::string describe(const CheckpointInterval& interval);  // "every 60 s", "every 500 steps"

struct CheckpointOptions {
  std::filesystem::path dir;  // empty: no checkpoints
  CheckpointInterval every = kDefaultCheckpointInterval;
  bool resume = false;  // continue from the newest whole checkpoint in dir, where there is one
  // Notes for the user (a damaged checkpoint skipped, a write that failed); null: stderr.
  std::function<void(const std::string&)> note;
  // Passes a note to `note`, or prints it on stderr.
  void tell(const std::string& message) const;
};

// What a checkpoint belongs to. A resume is refused, naming the part, unless all are equal.
struct RunFingerprint {
  std::string version;  // crossover's
  std::string spec;     // the spec as TOML, with the training settings used
  std::string data;     // data_fingerprint of the split
  std::string device;   // id, name, library, threads, precision
  // Batch shards and whether the step is recorded: what changes the arithmetic. A step limit
  // does not (it only says where to stop), so a resumed run may set another.
  std::string settings;
  // The ranks that trained it: a run may go on on another number (the same global batches split
  // anew), which changes only the order the ranks' gradients are summed in.
  int ranks = 1;
  // A fused group's trial (train/trials.h): it may go on in another number of batch shards, as a
  // halving search's survivors are regrouped (a group of one takes the shards its trial takes
  // alone, a larger group one), which changes only the order a batch's gradients are summed in.
  bool shards_may_differ = false;
};
RunFingerprint run_fingerprint(const TrainPlan& p, const TrainSpec& train, bool record_step);
// The same with the split's data_fingerprint given (trials sharing a data set hash it once: it
// reads every byte).
RunFingerprint run_fingerprint(const TrainPlan& p, const TrainSpec& train, bool record_step,
                               std::string data_hash);

// Saves checkpoints of one run into options.dir. Host buffers are planned when it is built; the
// interval counts from `steps_taken` (where a resumed run starts) and from then.
class Checkpointer {
 public:
  Checkpointer(const TrainPlan& p, const CheckpointOptions& options, RunFingerprint fingerprint,
               int64_t steps_taken);
  ~Checkpointer();  // waits for a write under way
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Whether the interval has passed since the last checkpoint (or the start).
  bool due(const TrainState& state) const;
  // Steps to take before due() says so by the interval in steps (at least 1; the largest int64_t
  // where there is none). An interval in seconds is not foreseen here.
  int64_t steps_until_due(const TrainState& state) const;
  // Copies the state to the host and hands it to the writer (waiting for the previous write
  // first); the step loop goes on while it is written.
  void save(TrainPlan& p, TrainState& state);
  // Waits until every checkpoint handed over is written (or failed, with a note).
  void flush();
  // Nothing more to save: the writer is told to end (the destructor waits for it), so that the
  // writers of a fused group's trials end together rather than one after another.
  void close();

  int64_t written() const;  // checkpoints written whole
  double wait_ms() const;   // time the step loop spent in save(), all checkpoints
  const std::filesystem::path& dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The steps taken of the newest checkpoint in `dir` (whole or not), or nullopt where it holds none.
std::optional<int64_t> newest_checkpoint(const std::filesystem::path& dir);
// Removes the checkpoints in `dir` (and the folder, once empty, unless `folder` says keep it). The
// caller does this once the run's results are written: they hold what the checkpoint would.
enum class CheckpointFolder { Remove, Keep };
void remove_checkpoints(const std::filesystem::path& dir,
                        CheckpointFolder folder = CheckpointFolder::Remove);

// Restores the newest whole checkpoint of options.dir into the plan and the state, after the plan
// is built and before the first step. Returns the steps taken it resumes at, or nullopt where the
// folder holds none. A damaged checkpoint (unreadable, edited, or with a field that does not fit
// the others or the run of `epochs` epochs) is skipped with a note naming what is wrong, and the
// one before is tried; where every one is damaged, a UserError names each and what is wrong
// (--restart discards them). One of another run (spec, data, device, settings or version) is
// refused with a UserError saying which differs.
std::optional<int64_t> restore_checkpoint(TrainPlan& p, TrainState& state,
                                          const CheckpointOptions& options,
                                          const RunFingerprint& fingerprint, int64_t epochs);

}  // namespace xo

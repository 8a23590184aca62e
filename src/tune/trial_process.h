// A trial as a `crossover train` process: the files it reads and writes in its folder, the
// arguments that start it, and how its exit reads. Each trial is a process of its own, so that one
// trial's crash, divergence or memory cannot touch the others, and a trial on a GPU has its own
// context and stream.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/spec.h"

namespace xo {

// A trial's folder, --out/trials/ID, and what its process reads and writes there.
struct TrialFiles {
  std::filesystem::path dir, spec, result, weights, checkpoints, log;
};
TrialFiles trial_files(const std::filesystem::path& out, const std::string& id);
// The same files in the folder `dir`.
TrialFiles trial_folder(const std::filesystem::path& dir);

// The spec as a file in a trial's folder: the paths it names (data, test split, initial weights),
// which the spec reader keeps relative to where crossover runs, made absolute, so that they read
// the same from there.
ModelSpec with_absolute_paths(ModelSpec spec);

// The `crossover train` that runs a trial on `device` from its last checkpoint, to the end of its
// spec or, for a rung below the last, pausing after `pause_after` epochs.
// `precision`: the trial's --precision (f32 passes none).
std::vector<std::string> train_args(const TrialFiles& f, const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every,
                                    const std::string& precision = "f32");

// The `crossover train-group` that runs trials as one fused group on `device`, each from its last
// checkpoint (every trial's at the same step), to the end of its spec or `pause_after` epochs.
std::vector<std::string> group_args(const std::vector<TrialFiles>& trials,
                                    const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every,
                                    const std::string& precision = "f32");

// One process of a measurement of trials at once: `spec` for `steps` steps, its result in `json`,
// no checkpoints.
std::vector<std::string> probe_args(const std::filesystem::path& spec, const std::string& device,
                                    int threads, int steps, const std::filesystem::path& json,
                                    const std::string& precision = "f32");

// How a trial's process ended, from its exit code (core/exit_codes.h: the loss not finite, a stop
// request, whose checkpoint continues it, the machine's failure). A process that a stop request
// reached may die of the signal (128 + N) rather than exit with 130: `interrupted` says the search
// was stopped. Killed otherwise by SIGKILL (the kernel's out-of-memory killer) or SIGBUS (a mapped
// file on a full disk), or exited with kExitMachine, the machine failed it: MachineFailed.
enum class ProcessEnd { Trained, Diverged, Interrupted, MachineFailed, Failed };
ProcessEnd process_end(int code, bool interrupted);

// The last error crossover's process wrote in `log` ("crossover: error: …", "crossover: internal
// error: …"), without crossover's prefix, for a failed trial's record; where it wrote none, the
// exit code. Other lines are not errors, though they may say "error" (a trial's summary line of a
// group: "train error 0.60%").
std::string failure_text(const std::filesystem::path& log, int code);

}  // namespace xo

#include "tune/trial_process.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "core/exit_codes.h"
#include "core/file.h"

namespace xo {

namespace fs = std::filesystem;

TrialFiles trial_files(const fs::path& out, const std::string& id) {
  return trial_folder(out / "trials" / id);
}

TrialFiles trial_folder(const fs::path& dir) {
  return {dir,
          dir / "spec.toml",
          dir / "result.json",
          dir / "weights.safetensors",
          dir / "checkpoints",
          dir / "log.txt"};
}

ModelSpec with_absolute_paths(ModelSpec spec) {
  auto absolute = [](std::string& source) {
    for (const char* prefix : {"csv:", "safetensors:", "idx:", "imdb:"}) {
      const std::string p = prefix;
      if (source.rfind(p, 0) == 0) {
        source = p + fs::absolute(source.substr(p.size())).lexically_normal().string();
        return;
      }
    }
  };
  absolute(spec.data.source);
  absolute(spec.data.test);
  if (!spec.init.empty()) spec.init = fs::absolute(spec.init).lexically_normal().string();
  return spec;
}

namespace {

// `crossover train SPEC` on the device, quiet, its result document in `json`.
std::vector<std::string> quiet_train(const fs::path& spec, const std::string& device, int threads,
                                     const fs::path& json, const std::string& precision) {
  std::vector<std::string> a{"train",   spec.string(), "--device",
                             device,    "--threads",   std::to_string(threads),
                             "--quiet", "--json",      json.string()};
  if (precision != "f32") a.insert(a.end(), {"--precision", precision});
  return a;
}

}  // namespace

std::vector<std::string> train_args(const TrialFiles& f, const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every,
                                    const std::string& precision) {
  std::vector<std::string> a = quiet_train(f.spec, device, threads, f.result, precision);
  a.insert(a.end(), {"--save", f.weights.string(), "--checkpoint-dir", f.checkpoints.string(),
                     "--checkpoint-every", checkpoint_every, "--resume-if-any"});
  if (pause_after) a.insert(a.end(), {"--pause-after", std::to_string(*pause_after)});
  return a;
}

std::vector<std::string> group_args(const std::vector<TrialFiles>& trials,
                                    const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every,
                                    const std::string& precision) {
  std::vector<std::string> a{"train-group"};
  for (const TrialFiles& f : trials) a.push_back(f.dir.string());
  a.insert(a.end(), {"--device", device, "--threads", std::to_string(threads), "--quiet",
                     "--checkpoint-every", checkpoint_every, "--resume"});
  if (precision != "f32") a.insert(a.end(), {"--precision", precision});
  if (pause_after) a.insert(a.end(), {"--pause-after", std::to_string(*pause_after)});
  return a;
}

std::vector<std::string> probe_args(const fs::path& spec, const std::string& device, int threads,
                                    int steps, const fs::path& json, const std::string& precision) {
  std::vector<std::string> a = quiet_train(spec, device, threads, json, precision);
  a.insert(a.end(), {"--steps", std::to_string(steps), "--checkpoint-every", "off"});
  return a;
}

ProcessEnd process_end(int code, bool interrupted) {
  if (code == 0) return ProcessEnd::Trained;
  if (code == kExitDiverged) return ProcessEnd::Diverged;
  if (code == kExitInterrupted || (interrupted && code >= 128)) return ProcessEnd::Interrupted;
  if (code == kExitMachine || code == 128 + SIGKILL || code == 128 + SIGBUS) {
    return ProcessEnd::MachineFailed;
  }
  return ProcessEnd::Failed;
}

std::string failure_text(const fs::path& log, int code) {
  constexpr std::string_view kError = "crossover: error: ";
  constexpr std::string_view kInternal = "crossover: internal error: ";
  constexpr std::string_view kCrossover = "crossover: ";
  std::string text;
  try {
    text = read_file(log);
  } catch (const UserError&) {
  }
  std::string found;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    if (line.starts_with(kError)) found = line.substr(kError.size());
    if (line.starts_with(kInternal)) found = line.substr(kCrossover.size());  // "internal error: …"
    start = end + 1;
  }
  if (!found.empty()) return found;
  if (code > 128) {
    return fmt::format("the trial's process was killed by signal {} ({})", code - 128,
                       ::strsignal(code - 128));
  }
  return fmt::format("the trial's process ended with exit code {}", code);
}

}  // namespace xo

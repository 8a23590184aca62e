#include "tune/trials.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/file.h"

namespace xo {

namespace fs = std::filesystem;

TrialFiles trial_files(const fs::path& out, const std::string& id) {
  const fs::path dir = out / "trials" / id;
  return {dir,
          dir / "spec.toml",
          dir / "result.json",
          dir / "weights.safetensors",
          dir / "checkpoints",
          dir / "log.txt"};
}

std::vector<std::string> train_args(const TrialFiles& f, const std::string& device, int threads,
                                    std::optional<int64_t> pause_after,
                                    const std::string& checkpoint_every) {
  std::vector<std::string> a = {"train",
                                f.spec.string(),
                                "--device",
                                device,
                                "--threads",
                                std::to_string(threads),
                                "--quiet",
                                "--json",
                                f.result.string(),
                                "--save",
                                f.weights.string(),
                                "--checkpoint-dir",
                                f.checkpoints.string(),
                                "--checkpoint-every",
                                checkpoint_every,
                                "--resume"};
  if (pause_after) {
    a.push_back("--pause-after");
    a.push_back(std::to_string(*pause_after));
  }
  return a;
}

ModelSpec with_absolute_paths(ModelSpec spec) {
  auto absolute = [](std::string& source) {
    for (const char* prefix : {"csv:", "idx:", "imdb:"}) {
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

std::string failure_text(const fs::path& log, int code) {
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
    if (line.find("error") != std::string::npos) found = line;
    start = end + 1;
  }
  if (found.empty()) return fmt::format("the trial's process ended with exit code {}", code);
  const std::string prefix = "crossover: error: ";
  if (found.rfind(prefix, 0) == 0) found = found.substr(prefix.size());
  return found;
}

Metric objective_metric(const std::string& objective, const ModelSpec& base, const DataSplit& data,
                        bool regression) {
  if (!objective.empty()) {
    for (Metric m : kMetrics) {
      if (objective == metric_name(m)) {
        if (needs_validation_split(m) && data.validation.samples == 0) {
          throw UserError(
              fmt::format("--objective {}: {} has no validation split (set data.validation_split)",
                          objective, base.name));
        }
        if (needs_test_split(m) && data.test.samples == 0) {
          throw UserError(
              fmt::format("--objective {}: {}'s data has no test split", objective, base.name));
        }
        if (regression && (m == Metric::ValAccuracy || m == Metric::TestAccuracy)) {
          throw UserError(
              fmt::format("--objective {}: {} is a regression (mse): it has no "
                          "accuracy",
                          objective, base.name));
        }
        return m;
      }
    }
    std::vector<std::string> names;
    for (Metric m : kMetrics) names.push_back(metric_name(m));
    throw UserError(fmt::format("--objective '{}': unknown (expected one of {})", objective,
                                fmt::join(names, ", ")));
  }
  // Held-out data before the test split (tuning on the test split overfits it), accuracy where
  // the model has one; else the training loss.
  if (data.validation.samples > 0) return regression ? Metric::ValLoss : Metric::ValAccuracy;
  if (data.test.samples > 0) return regression ? Metric::TestLoss : Metric::TestAccuracy;
  return Metric::Loss;
}

std::string join_args(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& a : args) {
    text += a;
    text += '\0';
  }
  return text;
}
std::vector<std::string> split_args(const std::string& text) {
  std::vector<std::string> args;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\0', start);
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

}  // namespace xo

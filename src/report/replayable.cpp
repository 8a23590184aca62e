// What `crossover replay` checks of a results.json before it runs anything (report/replayable.h).
#include "report/replayable.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/arrays.h"
#include "model/spec.h"

namespace xo {
namespace {

// Whether version `a` ("0.2.0") comes before `b`, comparing the dotted numbers in turn; a part
// that is not a number reads as 0.
bool version_before(const std::string& a, const std::string& b) {
  const auto parts = [](const std::string& v) {
    std::vector<long> out;
    for (size_t at = 0; at <= v.size();) {
      const size_t dot = std::min(v.find('.', at), v.size());
      out.push_back(std::strtol(v.substr(at, dot - at).c_str(), nullptr, 10));
      at = dot + 1;
    }
    return out;
  };
  return parts(a) < parts(b);
}

const Manifest& manifest_of(const Report& report, const std::string& file) {
  if (report.manifest) return *report.manifest;
  const std::string by = report.machine ? report.machine->crossover : std::string();
  if (by.empty() || version_before(by, kManifestSince)) {
    throw UserError(fmt::format(
        "{}: no manifest: it was written by crossover {}, before {} added the manifest a replay "
        "needs: cannot replay",
        file, by.empty() ? std::string("of unknown version") : by, kManifestSince));
  }
  throw UserError(fmt::format(
      "{}: its manifest is missing, though crossover {} writes one: the file was edited or cut "
      "short: cannot replay",
      file, by));
}

// Refuses, before any work, a run the replay could not repeat as recorded: the epochs it would
// train (the manifest's, else its spec's) differ from the epochs it recorded while nothing cut
// the run short (a stop, early stopping, divergence, --steps). The steps each run recorded also
// bound the steps its replay may take (cli/replay_command.cpp).
void check_recorded_epochs(const Report& recorded, const Manifest& manifest,
                           const std::string& file) {
  const ExecutionSettings& m = manifest.settings;
  for (size_t i = 0; i < recorded.runs.size(); ++i) {
    const RunRecord& run = recorded.runs[i].run;
    const TrainResult& r = run.result;
    const std::string where =
        fmt::format("{}: runs[{}] ('{}' on {})", file, i, r.model, r.device.id);
    if (r.data.starts_with(kArraysData)) {
      throw UserError(fmt::format(
          "{}: trained on {} (the Python module's arrays), which the file does not hold: cannot "
          "replay",
          where, r.data));
    }
    const ModelSpec spec = parse_spec(run.spec_toml, where + ": spec_toml");
    const int64_t epochs = m.epochs.value_or(spec.train.epochs);
    const int64_t done = epochs_completed(r);
    const bool cut_short = r.interrupted || r.stopped_early || r.diverged_epoch > 0 ||
                           (m.max_steps > 0 && r.steps_taken >= m.max_steps);
    if (epochs < done || (epochs > done && !cut_short)) {
      throw UserError(fmt::format(
          "{}: {} says {} epochs, but the run recorded {}: the file was edited (a replay repeats "
          "the run it recorded)",
          where, m.epochs ? "manifest.settings.epochs" : "its spec_toml's train.epochs", epochs,
          done));
    }
  }
}

}  // namespace

const Manifest& check_replayable(const Report& recorded, const std::string& file) {
  const Manifest& manifest = manifest_of(recorded, file);
  if (recorded.runs.empty()) throw UserError(fmt::format("{}: no runs in it to replay", file));
  check_recorded_epochs(recorded, manifest, file);
  return manifest;
}

}  // namespace xo

#include "report/replay_text.h"

#include <fmt/format.h>

#include <cmath>

#include "core/format.h"
#include "report/table.h"

namespace xo {
namespace {

// Every digit a double needs to be read back the same (fmt's shortest round trip): two values
// that differ in the last bit print differently.
std::string exact(double v) { return std::isnan(v) ? std::string(kMissing) : fmt::format("{}", v); }

// The figures in the order they are shown.
constexpr Figure kOrder[] = {Figure::Data,        Figure::Parameters, Figure::Epochs,
                             Figure::Loss,        Figure::TrainError, Figure::ValLoss,
                             Figure::ValAccuracy, Figure::TestLoss,   Figure::TestAccuracy};

bool per_epoch(Figure f) {
  return f != Figure::Data && f != Figure::Parameters && f != Figure::Epochs;
}

}  // namespace

std::string verdict_text(Verdict v, Figure figure) {
  switch (v) {
    case Verdict::Identical:
      return figure == Figure::Data || figure == Figure::Epochs ? "same" : "bit-identical";
    case Verdict::WithinTolerance:
      return "within tolerance";
    case Verdict::Different:
      return "different";
  }
  return "?";
}

std::string manifest_differences_text(const std::vector<ManifestDifference>& differences) {
  if (differences.empty()) return "manifest: the same build, libraries and machine as recorded\n";
  Table t({"differs here", "recorded", "here"});
  for (const ManifestDifference& d : differences) t.add_row({d.entry, d.recorded, d.here});
  return "manifest: what differs on this machine\n" + t.render();
}

std::string run_comparison_text(const RunComparison& c) {
  Table t({"figure", "verdict", "recorded", "replayed", "where"});
  for (Figure figure : kOrder) {
    // The epoch shown: the first with the figure's worst verdict, else the last.
    const FigureComparison* shown = nullptr;
    size_t count = 0, identical = 0;
    for (const FigureComparison& f : c.figures) {
      if (f.figure != figure) continue;
      ++count;
      identical += f.verdict == Verdict::Identical;
      if (!shown || f.verdict > shown->verdict ||
          (f.verdict == Verdict::Identical && shown->verdict == Verdict::Identical)) {
        shown = &f;
      }
    }
    if (!shown) continue;
    const bool hash = figure == Figure::Data || figure == Figure::Parameters;
    std::string where;
    if (per_epoch(figure)) {
      where = fmt::format("epoch {}", shown->epoch);
      if (identical < count) {
        where += fmt::format("; {} of {} epochs not bit-identical", count - identical, count);
      } else {
        where += fmt::format(" (all {} alike)", count);
      }
    }
    t.add_row({figure_name(figure), verdict_text(shown->verdict, figure),
               hash ? shown->recorded_hash : exact(shown->recorded),
               hash ? shown->replayed_hash : exact(shown->replayed), where});
  }
  const auto ms = [](double v) {
    return std::isfinite(v) ? fmt::format("{:.4f} ms", v) : std::string(kMissing);
  };
  const double ratio = c.step_ratio();
  t.add_row({"median step",
             std::isfinite(ratio) ? fmt::format("{:.2f}x", ratio) : std::string(kMissing),
             ms(c.recorded_step_ms), ms(c.replayed_step_ms), "a measurement: replayed / recorded"});
  std::string s = fmt::format("\n{} on {}: {}\n", terminal_safe(c.model), terminal_safe(c.device),
                              c.figures.empty() ? std::string("nothing to compare")
                                                : verdict_text(c.verdict(), Figure::Loss));
  s += t.render();
  if (c.data_differs()) {
    s += "note: the data differs from the data recorded: the run trained on other data, so its "
         "other figures compare a different experiment\n";
  }
  if (c.recorded_interrupted) {
    s += "note: the recorded run was interrupted (Ctrl-C): its finished epochs are compared, its "
         "epoch count and final parameters are not\n";
  }
  for (const SetupDifference& d : c.setup) {
    s += fmt::format("setup differs: {}: {} recorded, {} here\n", d.what, d.recorded, d.replayed);
  }
  return s;
}

std::string skipped_run_text(const std::string& model, const std::string& device,
                             const std::string& why) {
  return fmt::format("\n{} on {}: skipped: {}\n", terminal_safe(model), terminal_safe(device),
                     terminal_safe(why));
}

std::string replay_summary_text(const std::vector<RunComparison>& runs, size_t skipped,
                                double tolerance) {
  size_t identical = 0, within = 0, different = 0;
  for (const RunComparison& c : runs) {
    const Verdict v = c.verdict();
    identical += v == Verdict::Identical;
    within += v == Verdict::WithinTolerance;
    different += v == Verdict::Different;
  }
  return fmt::format(
      "\nreplay: {} run{} replayed: {} bit-identical, {} within tolerance (relative {:g}), {} "
      "different{}\n",
      runs.size(), runs.size() == 1 ? "" : "s", identical, within, tolerance, different,
      skipped ? fmt::format("; {} skipped", skipped) : std::string());
}

}  // namespace xo

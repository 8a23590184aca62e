#include "tune/resume.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "core/error.h"

namespace xo {
namespace {

// Refuses a search in `out` whose `what` was `a` and now is `b`.
void check_same(const std::string& out, const char* what, const std::string& a,
                const std::string& b) {
  if (a == b) return;
  throw UserError(fmt::format(
      "--out {} holds another search ({} was {}, now {}): give another --out, or --restart "
      "to discard it",
      out, what, a, b));
}

void check_same_search(const TuneRecord& now, const TuneRecord& was, const std::string& out) {
  if (was.spec_toml != now.spec_toml) {
    throw UserError(fmt::format(
        "--out {} holds a search of another spec ('{}', or the same with other settings): give "
        "another --out, or --restart to discard it",
        out, was.model));
  }
  check_same(out, "--vary", fmt::format("{}", fmt::join(was.vary, " ")),
             fmt::format("{}", fmt::join(now.vary, " ")));
  check_same(out, "the mode", fmt::format("{} {} seed {}", was.mode, was.samples, was.seed),
             fmt::format("{} {} seed {}", now.mode, now.samples, now.seed));
  check_same(out, "--objective", was.objective, now.objective);
  check_same(out, "the rungs", fmt::format("{}", fmt::join(was.rungs, ",")),
             fmt::format("{}", fmt::join(now.rungs, ",")));
  check_same(out, "the trials", std::to_string(was.trials.size()),
             std::to_string(now.trials.size()));
  for (size_t i = 0; i < was.trials.size(); ++i) {
    if (was.trials[i].values != now.trials[i].values) {
      check_same(out, "a trial's values", was.trials[i].id, now.trials[i].id);
    }
  }
}

}  // namespace

size_t continue_search(TuneRecord& now, TuneRecord was, const std::string& out) {
  check_same_search(now, was, out);
  size_t kept = 0;
  for (TrialRecord& t : was.trials) {
    if (t.status == TrialStatus::Running) t.status = TrialStatus::Pending;
    // Failed by the machine (a full disk, …): trained again, from its checkpoint where it has one,
    // at the rung it failed at.
    if (t.status == TrialStatus::Failed && t.machine_failed) {
      t.status = TrialStatus::Pending;
      t.machine_failed = false;
      t.error.clear();
      if (!t.rung_objective.empty() && std::isnan(t.rung_objective.back())) {
        t.rung_objective.pop_back();
      }
    }
    if (t.status != TrialStatus::Pending) ++kept;
  }
  now.trials = std::move(was.trials);
  now.decisions = std::move(was.decisions);
  now.parallel = std::move(was.parallel);
  return kept;
}

}  // namespace xo

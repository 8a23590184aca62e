#include "tune/standing.h"

#include <algorithm>
#include <cmath>

namespace xo {
namespace {

bool ended(TrialStatus s) {
  return s == TrialStatus::Finished || s == TrialStatus::EarlyStopped ||
         s == TrialStatus::Diverged || s == TrialStatus::Failed || s == TrialStatus::Stopped;
}

// A trial promoted before the search stopped, whose promotion did not complete: it goes on first.
std::optional<HalvingJob> resumed_job(const TuneRecord& r, const std::vector<bool>& running) {
  for (const HalvingDecision& d : r.decisions) {
    if (!d.promoted) continue;
    for (size_t i = 0; i < r.trials.size(); ++i) {
      const TrialRecord& t = r.trials[i];
      if (t.id != d.trial || running[i] || t.epochs >= d.to_epochs) continue;
      if (t.status != TrialStatus::Pending && t.status != TrialStatus::Paused) continue;
      const auto rung = std::find(r.rungs.begin(), r.rungs.end(), d.to_epochs);
      if (rung == r.rungs.end()) continue;
      return HalvingJob{i, static_cast<int>(rung - r.rungs.begin()), false, 0, 0, 0};
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<TrialProgress> trial_progress(const TuneRecord& r, const std::vector<bool>& running) {
  std::vector<TrialProgress> p(r.trials.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const TrialRecord& t = r.trials[i];
    p[i].value = t.rung_objective;
    p[i].rung = static_cast<int>(t.rung_objective.size()) - 1;
    p[i].running = running[i];
    p[i].ended = ended(t.status);
  }
  return p;
}

std::optional<HalvingJob> next_job(const TuneRecord& r, const std::vector<bool>& running) {
  if (std::optional<HalvingJob> job = resumed_job(r, running)) return job;
  return next_halving_job(trial_progress(r, running), static_cast<int>(r.rungs.size()),
                          r.halving ? r.halving->factor : 2, r.higher_is_better);
}

std::vector<size_t> stop_paused_trials(TuneRecord& r) {
  const std::vector<TrialProgress> p = trial_progress(r, std::vector<bool>(r.trials.size(), false));
  const int64_t factor = r.halving.value_or(HalvingSettings{}).factor;
  std::vector<size_t> stopped;
  for (size_t i = 0; i < r.trials.size(); ++i) {
    TrialRecord& t = r.trials[i];
    if (t.status != TrialStatus::Paused) continue;
    const int rung = static_cast<int>(t.rung_objective.size()) - 1;
    const auto [place, of] = place_at_rung(p, i, rung, r.higher_is_better);
    t.status = TrialStatus::Stopped;
    r.decisions.push_back({t.id, false, r.rungs[static_cast<size_t>(rung)], 0, place, of,
                           static_cast<int>(of / factor)});
    stopped.push_back(i);
  }
  return stopped;
}

const TrialRecord* best_trial(const TuneRecord& r) {
  const std::vector<size_t> order = trials_by_objective(r);
  if (order.empty()) return nullptr;
  const TrialRecord& first = r.trials[order.front()];
  const bool whole =
      first.status == TrialStatus::Finished || first.status == TrialStatus::EarlyStopped;
  return whole && !std::isnan(first.objective) ? &first : nullptr;
}

}  // namespace xo

#include "tune/record.h"

namespace xo {
namespace {
constexpr TrialStatus kStatuses[] = {
    TrialStatus::Pending,  TrialStatus::Running,      TrialStatus::Paused,   TrialStatus::Stopped,
    TrialStatus::Finished, TrialStatus::EarlyStopped, TrialStatus::Diverged, TrialStatus::Failed};
}  // namespace

const char* trial_status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::Pending:
      return "pending";
    case TrialStatus::Running:
      return "running";
    case TrialStatus::Paused:
      return "paused";
    case TrialStatus::Stopped:
      return "stopped";
    case TrialStatus::Finished:
      return "finished";
    case TrialStatus::EarlyStopped:
      return "early-stopped";
    case TrialStatus::Diverged:
      return "diverged";
    case TrialStatus::Failed:
      return "failed";
  }
  return "?";
}

std::optional<TrialStatus> parse_trial_status(const std::string& text) {
  for (TrialStatus s : kStatuses) {
    if (text == trial_status_name(s)) return s;
  }
  return std::nullopt;
}

std::vector<size_t> trials_by_objective(const TuneRecord& r) {
  std::vector<size_t> order(r.trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto rank = [&](const TrialRecord& t) {
    // Trials that trained every epoch first, then by the objective, NaN last.
    return t.status == TrialStatus::Finished || t.status == TrialStatus::EarlyStopped ? 0 : 1;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TrialRecord &x = r.trials[a], &y = r.trials[b];
    const bool xn = x.objective != x.objective, yn = y.objective != y.objective;
    if (xn != yn) return yn;
    if (rank(x) != rank(y)) return rank(x) < rank(y);
    if (xn) return false;
    return r.higher_is_better ? x.objective > y.objective : x.objective < y.objective;
  });
  return order;
}

}  // namespace xo

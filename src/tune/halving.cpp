#include "tune/halving.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace xo {
namespace {

// a ranks before b: NaN (a failed trial) ranks last.
bool better(double a, double b, bool higher_is_better) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return higher_is_better ? a > b : a < b;
}

// The trials that completed `rung`, best first (ties in trial order).
std::vector<size_t> ranked(const std::vector<TrialProgress>& trials, int rung,
                           bool higher_is_better) {
  std::vector<size_t> at;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].rung >= rung) at.push_back(i);
  }
  std::stable_sort(at.begin(), at.end(), [&](size_t a, size_t b) {
    return better(trials[a].value[rung], trials[b].value[rung], higher_is_better);
  });
  return at;
}

}  // namespace

std::vector<int64_t> rung_epochs(const std::optional<HalvingSettings>& h, int64_t max_epochs) {
  if (!h) return {max_epochs};
  XO_ASSERT(h->min_epochs > 0 && h->factor >= 2);
  std::vector<int64_t> out;
  for (int64_t e = h->min_epochs; e < max_epochs; e *= h->factor) out.push_back(e);
  out.push_back(max_epochs);
  return out;
}

std::pair<int, int> place_at_rung(const std::vector<TrialProgress>& trials, size_t trial, int rung,
                                  bool higher_is_better) {
  const std::vector<size_t> order = ranked(trials, rung, higher_is_better);
  const auto it = std::find(order.begin(), order.end(), trial);
  return {static_cast<int>(it - order.begin()) + 1, static_cast<int>(order.size())};
}

std::optional<HalvingJob> next_halving_job(const std::vector<TrialProgress>& trials, int rungs,
                                           int64_t factor, bool higher_is_better) {
  // Promotions, from the highest rung down: a trial among the top 1/factor of its rung so far.
  for (int k = rungs - 2; k >= 0; --k) {
    const std::vector<size_t> order = ranked(trials, k, higher_is_better);
    const int top = static_cast<int>(order.size() / static_cast<size_t>(factor));
    for (int place = 0; place < top; ++place) {
      const TrialProgress& t = trials[order[place]];
      if (t.rung == k && !t.running && !t.ended && !std::isnan(t.value[k])) {
        return HalvingJob{order[place], k + 1, true, place + 1, static_cast<int>(order.size()),
                          top};
      }
    }
  }
  for (size_t i = 0; i < trials.size(); ++i) {
    if (!trials[i].started()) return HalvingJob{i, 0, false, 0, 0, 0};
  }
  return std::nullopt;
}

}  // namespace xo

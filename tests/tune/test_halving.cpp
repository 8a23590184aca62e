// Successive halving as ASHA promotes: the rungs, and a search stepped by hand against decisions
// worked out on paper.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "tune/halving.h"

namespace xo {
namespace {

TEST(Halving, RungsGrowByTheFactorAndEndAtTheBudget) {
  EXPECT_EQ(rung_epochs(HalvingSettings{1, 3}, 9), (std::vector<int64_t>{1, 3, 9}));
  EXPECT_EQ(rung_epochs(HalvingSettings{1, 3}, 10), (std::vector<int64_t>{1, 3, 9, 10}));
  EXPECT_EQ(rung_epochs(HalvingSettings{2, 2}, 8), (std::vector<int64_t>{2, 4, 8}));
  EXPECT_EQ(rung_epochs(std::nullopt, 12), (std::vector<int64_t>{12}));
}

// Completes `job` with `value` at its rung.
void complete(std::vector<TrialProgress>& t, const HalvingJob& job, double value, bool last) {
  TrialProgress& p = t[job.trial];
  p.value.resize(static_cast<size_t>(job.rung), NAN);
  p.value.push_back(value);
  p.rung = job.rung;
  p.running = false;
  p.ended = last;
}

// Nine trials, factor 3, rungs 1, 3, 9 epochs, accuracy (higher is better), one slot: each job
// completes before the next is asked for. Worked by hand:
//   t0..t2 start (no rung-0 trial can be promoted until 3 have completed: top = floor(n/3)).
//   After t0=50, t1=70, t2=60: top 1 of 3 is t1 -> promoted to rung 1 (3 epochs); t1 gets 75.
//   Rung 1 has 1 trial: top floor(1/3) = 0, no promotion. Rung 0: t1 already promoted: t3 starts.
//   t3=80: rung 0 has 4, top 1 = t3 (80) -> promoted; t3 gets 85 at rung 1.
//   Rung 1 has 2: top 0. Rung 0 top 1 = t3 (promoted). t4 starts: 40. Rung 0 has 5: top 1 = t3.
//   t5 starts: 90. Rung 0 has 6: top 2 = t5, t3 -> t5 promoted; t5 gets 65 at rung 1.
//   Rung 1 has 3: top 1 = t3 (85) -> promoted to rung 2 (9 epochs, the last); t3 ends at 88.
//   ...then t6, t7, t8 start in turn (values 30, 95, 20), with t7 promoted after it completes
//   (rung 0 has 8: top 2 = t7, t5; t5 already promoted).
TEST(Halving, PromotionsFollowAHandWorkedSearch) {
  std::vector<TrialProgress> t(9);
  const int rungs = 3;
  const int64_t factor = 3;
  auto next = [&] { return next_halving_job(t, rungs, factor, true); };
  auto expect_job = [&](size_t trial, int rung, bool promotion) {
    const std::optional<HalvingJob> j = next();
    EXPECT_TRUE(j.has_value());
    if (!j) return HalvingJob{};
    EXPECT_EQ(j->trial, trial);
    EXPECT_EQ(j->rung, rung);
    EXPECT_EQ(j->promotion, promotion);
    return *j;
  };
  complete(t, expect_job(0, 0, false), 50, false);
  complete(t, expect_job(1, 0, false), 70, false);
  complete(t, expect_job(2, 0, false), 60, false);
  const HalvingJob p1 = expect_job(1, 1, true);
  EXPECT_EQ(p1.place, 1);
  EXPECT_EQ(p1.of, 3);
  EXPECT_EQ(p1.top, 1);
  complete(t, p1, 75, false);
  complete(t, expect_job(3, 0, false), 80, false);
  complete(t, expect_job(3, 1, true), 85, false);
  complete(t, expect_job(4, 0, false), 40, false);
  complete(t, expect_job(5, 0, false), 90, false);
  const HalvingJob p5 = expect_job(5, 1, true);
  EXPECT_EQ(p5.of, 6);
  EXPECT_EQ(p5.top, 2);
  complete(t, p5, 65, false);
  const HalvingJob top = expect_job(3, 2, true);
  EXPECT_EQ(top.place, 1);
  EXPECT_EQ(top.of, 3);
  complete(t, top, 88, true);
  complete(t, expect_job(6, 0, false), 30, false);
  complete(t, expect_job(7, 0, false), 95, false);
  // Rung 1 has 3 (t1 75, t3 85, t5 65): its top 1, t3, is promoted already. Rung 0 has 8: top 2
  // is t7 (95) and t5 (90): t7 goes on.
  complete(t, expect_job(7, 1, true), 70, false);
  complete(t, expect_job(8, 0, false), 20, false);
  // Rung 1 has 4 (85, 75, 70, 65): top 1 is t3. Rung 0 (9 trials): top 3 = t7, t5, t3: all
  // promoted. Nothing is left: the search is done.
  EXPECT_FALSE(next().has_value());
  EXPECT_EQ(place_at_rung(t, 8, 0, true), std::make_pair(9, 9));
  EXPECT_EQ(place_at_rung(t, 7, 0, true), std::make_pair(1, 9));
}

TEST(Halving, RunningFailedAndEndedTrialsAreNotPromoted) {
  std::vector<TrialProgress> t(3);
  for (size_t i = 0; i < 3; ++i) {
    t[i].rung = 0;
    t[i].value = {static_cast<double>(i)};
  }
  // Lower is better: t0 leads; it is running, so nothing is promoted and nothing new is left.
  t[0].running = true;
  EXPECT_FALSE(next_halving_job(t, 2, 3, false).has_value());
  t[0].running = false;
  t[0].ended = true;  // its own early stopping ended it
  EXPECT_FALSE(next_halving_job(t, 2, 3, false).has_value());
  // A failed trial (NaN) ranks last, never first.
  t[0].ended = false;
  t[0].value = {NAN};
  EXPECT_EQ(place_at_rung(t, 0, 0, false), std::make_pair(3, 3));
  EXPECT_EQ(next_halving_job(t, 2, 3, false)->trial, 1u);
}

TEST(Halving, WithoutHalvingEveryTrialRunsOnceInOrder) {
  std::vector<TrialProgress> t(2);
  auto j = next_halving_job(t, 1, 2, true);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->trial, 0u);
  t[0].running = true;
  EXPECT_EQ(next_halving_job(t, 1, 2, true)->trial, 1u);
  t[1].running = true;
  EXPECT_FALSE(next_halving_job(t, 1, 2, true).has_value());
}

}  // namespace
}  // namespace xo

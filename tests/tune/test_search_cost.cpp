// The search priced elsewhere: trials placed on instances as the search hands them out, and
// instances billed until their last trial ends.
#include <gtest/gtest.h>

#include <tuple>

#include "tune/search_cost.h"
#include "tune/space.h"

namespace xo {
namespace {

TEST(SearchCost, TrialsGoToTheDeviceFreeFirstAndInstancesAreBilledUntilTheirLastTrial) {
  const std::vector<double> jobs = {10, 20, 30, 40};
  const Placement one = place_jobs(jobs, 1, 1);
  EXPECT_DOUBLE_EQ(one.wall_seconds, 100);
  EXPECT_DOUBLE_EQ(one.instance_seconds, 100);
  // Two instances: 10 -> a, 20 -> b, 30 -> a (free at 10, ends 40), 40 -> b (free at 20, ends 60).
  const Placement two = place_jobs(jobs, 2, 1);
  EXPECT_DOUBLE_EQ(two.wall_seconds, 60);
  EXPECT_DOUBLE_EQ(two.instance_seconds, 100);
  // One instance with two GPUs runs the same placement, billed once until its last trial.
  const Placement gpus = place_jobs(jobs, 1, 2);
  EXPECT_DOUBLE_EQ(gpus.wall_seconds, 60);
  EXPECT_DOUBLE_EQ(gpus.instance_seconds, 60);
  // Every trial on its own instance: as long as the longest, the same instance-seconds.
  const Placement all = place_jobs(jobs, 4, 1);
  EXPECT_DOUBLE_EQ(all.wall_seconds, 40);
  EXPECT_DOUBLE_EQ(all.instance_seconds, 100);
  // More instances than trials: the idle ones cost nothing.
  EXPECT_DOUBLE_EQ(place_jobs(jobs, 8, 1).instance_seconds, 100);
}

// A GPU of the catalog's kind, and a disc-4 trial measured here: 1000 steps, 2 s of its 3 s in
// them.
const CatalogDevice kGpu{"gpu-a", DeviceKind::Gpu, "Test GPU",  10, 0, 0, 1000, 16, 300, 2000, 0,
                         0,       "test",          "2026-01-01"};
TrialCostInput disc4_trial() {
  const ModelSpec spec = *builtin_spec("disc-4");
  TrialCostInput t;
  t.steps = 1000;
  t.device = "cpu";
  t.process_seconds = 3;
  t.train_seconds = 2;
  t.spec = spec;
  t.batch = spec.train.batch;
  return t;
}

// With device profiles, a trial is predicted on a catalog device as `advise` predicts a step:
// from the profile, its steps times the profiled step, plus its time outside the steps as measured.
TEST(SearchCost, ATrialIsPredictedFromTheDeviceProfilesWhereThereAreSome) {
  AdviceOptions o;
  use_profiles(o, {});  // the shipped ones
  ASSERT_FALSE(o.profiles.empty());
  const TrialCostInput t = disc4_trial();
  const ModelSpec& spec = *t.spec;
  bool lower = true;
  const double s = predicted_trial_seconds(t, kGpu, {}, o, lower);
  const auto step = profiled_step(spec, spec.train.batch, catalog_target(kGpu, {}, o), o);
  ASSERT_TRUE(step);
  EXPECT_DOUBLE_EQ(s, step->step.seconds * 1000 + 1);
  EXPECT_FALSE(lower);
  std::string note;
  search_cost({t}, {}, Catalog{}, o, 1, note);
  EXPECT_NE(note.find("device profile"), std::string::npos) << note;
}

// A trial fused here in a group of 16 is predicted elsewhere as its share of a fused group of 16
// (predict_fused_with_profile), not as a run of its own.
TEST(SearchCost, AFusedTrialIsItsShareOfAFusedGroupElsewhere) {
  AdviceOptions o;
  use_profiles(o, {});
  TrialCostInput t = disc4_trial();
  const ModelSpec spec = *t.spec;
  t.fused = 16;
  bool lower = true;
  const double s = predicted_trial_seconds(t, kGpu, {}, o, lower);
  AdviceOptions fused = o;
  fused.trials = 16;
  const auto group = profiled_step(spec, spec.train.batch, catalog_target(kGpu, {}, fused), fused);
  ASSERT_TRUE(group);
  EXPECT_DOUBLE_EQ(s, group->step.seconds / 16 * 1000 + 1);
  t.fused = 1;
  const double alone = predicted_trial_seconds(t, kGpu, {}, o, lower);
  EXPECT_LT(s, alone);  // the group's launches shared: its share is less than a run alone
}

// Trials that differ only in what a step's prediction does not read (a learning rate, a seed)
// share one prediction per device; another optimizer kind is predicted on its own. The search's
// price is the same with the memo as without.
TEST(SearchCost, TrialsOfOneStepKeyShareOnePredictionPerDevice) {
  AdviceOptions o;
  use_profiles(o, {});
  std::vector<TrialCostInput> trials;
  for (const char* lr : {"0.05", "0.2"}) {
    for (const char* seed : {"1", "2"}) {
      TrialCostInput t = disc4_trial();
      t.spec = with_spec_value(with_spec_value(*t.spec, parse_spec_key("lr"), lr),
                               parse_spec_key("train.seed"), seed);
      t.step_key = step_key(*t.spec);
      trials.push_back(t);
    }
  }
  TrialCostInput adam = disc4_trial();
  adam.spec = with_spec_value(*adam.spec, parse_spec_key("optimizer"), "adam");
  adam.step_key = step_key(*adam.spec);
  trials.push_back(adam);
  EXPECT_EQ(trials[0].step_key, trials[3].step_key);
  EXPECT_NE(trials[0].step_key, adam.step_key);

  const CatalogDevice other{"gpu-b", DeviceKind::Gpu, "Other GPU", 20, 0, 0, 2000, 32, 600, 3000, 0,
                            0,       "test",          "2026-01-01"};
  Catalog catalog;
  catalog.devices = {kGpu, other};
  for (const auto& [id, device, usd] :
       {std::tuple{"one-a", "gpu-a", 1.0}, std::tuple{"one-b", "gpu-b", 2.0}}) {
    CatalogInstance i;
    i.id = id;
    i.device = device;
    i.on_demand_usd_per_hour = usd;
    catalog.instances.push_back(i);
  }
  StepMemo memo;
  std::string note, memo_note;
  const auto plain = search_cost(trials, {}, catalog, o, 1, note);
  const auto memoized = search_cost(trials, {}, catalog, o, 1, memo_note, &memo);
  EXPECT_EQ(memo.size(), 4u);  // 2 devices x 2 step keys
  ASSERT_EQ(plain.size(), memoized.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_EQ(plain[i].plans.size(), memoized[i].plans.size());
    for (size_t p = 0; p < plain[i].plans.size(); ++p) {
      EXPECT_DOUBLE_EQ(plain[i].plans[p].wall_seconds, memoized[i].plans[p].wall_seconds);
      EXPECT_DOUBLE_EQ(plain[i].plans[p].dollars, memoized[i].plans[p].dollars);
    }
  }
  bool lower = false;
  EXPECT_NE(predicted_trial_seconds(trials[0], kGpu, {}, o, lower, &memo),
            predicted_trial_seconds(adam, kGpu, {}, o, lower, &memo));
}

}  // namespace
}  // namespace xo

// The search priced elsewhere: trials placed on instances as the search hands them out, and
// instances billed until their last trial ends.
#include <gtest/gtest.h>

#include "tune/search_cost.h"

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

}  // namespace
}  // namespace xo

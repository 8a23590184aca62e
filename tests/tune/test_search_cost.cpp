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

}  // namespace
}  // namespace xo

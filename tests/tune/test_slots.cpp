// The search's slots: a trial's process started on one, and its end seen as soon as it comes.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "tune/slots.h"

namespace xo {
namespace {

// The runner's wait ends when the trial's process does, not when the wait's limit does: the
// search looks again at once instead of a poll's interval later.
TEST(TuneSlots, AWaitEndsWhenTheTrialsProcessEnds) {
  const testing::TempDir dir("slots");
  TrialRunner runner({Slot{0, "cpu", 1, ""}}, nullptr);
  // This test binary, running no test: a process that ends at once with code 0.
  runner.start(0, {"--gtest_filter=NoSuchTest.None"}, dir.path() / "log.txt");
  ASSERT_TRUE(runner.busy(0));
  const auto limit = std::chrono::minutes(2);
  const auto began = std::chrono::steady_clock::now();
  runner.wait_for_end(limit);
  const auto waited = std::chrono::steady_clock::now() - began;
  // What ended is there right after the wait: it did not come back before the end either.
  const std::vector<TrialRunner::Ended> ended = runner.collect_ended();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].slot, 0u);
  EXPECT_EQ(ended[0].code, 0);
  EXPECT_FALSE(runner.busy(0));
  EXPECT_LT(waited, limit / 2);
  // Nothing runs: the wait has nothing to wait for and ends after its limit at most.
  runner.wait_for_end(std::chrono::milliseconds(1));
  EXPECT_TRUE(runner.collect_ended().empty());
}

}  // namespace
}  // namespace xo

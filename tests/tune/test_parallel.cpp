// --fuse auto's choice among the group sizes it timed (tune/parallel.h's choose_fuse_size): the
// largest within 5% of the fastest rate, and sizes the budget did not reach taken as fast as the
// largest timed; and whether it times any (can_compare_sizes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tune/parallel.h"

namespace xo {
namespace {

TEST(TuneParallel, FuseAutoChoosesAmongTheSizesItTimed) {
  struct Case {
    const char* what;
    std::vector<double> rates;  // samples a second of sizes 4, 16, ... in order, as far as timed
    int chosen;
  };
  const std::vector<int> sizes = {4, 16, 64};
  const std::vector<Case> cases = {
      {"none timed: a search shorter than timing them", {}, 64},
      {"every size timed, the largest fastest", {100, 150, 200}, 64},
      {"every size timed, the middle fastest", {100, 200, 150}, 16},
      {"the largest within 5% of the fastest", {100, 200, 191}, 64},
      {"the budget held 4 only: taken for the larger sizes too", {100}, 64},
      {"the budget held 4 and 16, 16 fastest", {100, 200}, 64},
      {"the budget held 4 and 16, 4 fastest", {200, 100}, 4},
      {"the budget held 4 and 16, 16 within 5% of 4", {200, 192}, 64},
  };
  for (const Case& c : cases) {
    std::vector<ParallelOption> options;
    for (size_t i = 0; i < c.rates.size(); ++i) options.push_back({sizes[i], 0, c.rates[i], {}});
    EXPECT_EQ(choose_fuse_size(options, sizes), c.chosen) << c.what;
  }
}

// A choice needs two sizes timed: where the second's set-up alone is past the budget, none is.
TEST(TuneParallel, FuseAutoTimesNoSizeWhereOnlyOneFits) {
  struct Case {
    const char* what;
    double setup_s, budget_s;
    std::vector<int> sizes;
    bool timed;
  };
  const std::vector<Case> cases = {
      {"mnist-mlp here: 16 set up in 2.2 s of 1.5", 0.136, 1.5, {4, 16}, false},
      {"disc-4: 16 set up well within", 0.002, 1.5, {4, 16, 64}, true},
      {"the second just fits", 0.1, 1.6, {4, 16}, true},
      {"the second just past", 0.1, 1.59, {4, 16}, false},
      {"one size: nothing to choose", 0.0, 1.5, {4}, false},
      {"no budget", 0.001, 0.0, {4, 16}, false},
  };
  for (const Case& c : cases)
    EXPECT_EQ(can_compare_sizes(c.setup_s, c.budget_s, c.sizes), c.timed) << c.what;
}

}  // namespace
}  // namespace xo

// --fuse auto's choice among the group sizes it timed (tune/parallel.h's choose_fuse_size): the
// largest within 5% of the fastest rate, and sizes the budget did not reach taken as fast as the
// largest timed.
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

}  // namespace
}  // namespace xo

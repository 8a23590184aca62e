// The replay's terminal output, parsed: a run's table names each figure with its verdict and both
// values, and the summary counts the runs by verdict with the tolerance stated.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "report/replay_text.h"

namespace xo {
namespace {

// The table row of `figure` (the line that starts with it), split on runs of two spaces or more.
std::vector<std::string> row(const std::string& text, const std::string& figure) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(figure + "  ", 0) != 0) continue;
    std::vector<std::string> cells;
    size_t at = 0;
    while (at < line.size()) {
      const size_t gap = line.find("  ", at);
      const std::string cell = line.substr(at, gap == std::string::npos ? gap : gap - at);
      if (!cell.empty()) cells.push_back(cell.substr(cell.find_first_not_of(' ')));
      if (gap == std::string::npos) break;
      at = line.find_first_not_of(' ', gap);
      if (at == std::string::npos) break;
    }
    return cells;
  }
  return {};
}

TEST(ReplayText, ARunsTableShowsTheWorstEpochWithBothValues) {
  RunComparison c;
  c.model = "disc-2";
  c.device = "cpu";
  c.recorded_step_ms = 0.5;
  c.replayed_step_ms = 0.25;
  c.figures.push_back({Figure::Data, 0, Verdict::Identical, NAN, NAN, "00aa", "00aa"});
  c.figures.push_back({Figure::Parameters, 0, Verdict::Different, NAN, NAN, "00bb", "00cc"});
  c.figures.push_back({Figure::Loss, 1, Verdict::Identical, 5.0, 5.0, {}, {}});
  c.figures.push_back({Figure::Loss, 2, Verdict::Different, 4.25, 4.5, {}, {}});
  c.figures.push_back({Figure::Loss, 3, Verdict::Different, 3.0, 3.5, {}, {}});
  c.figures.push_back({Figure::TrainError, 1, Verdict::Identical, 20, 20, {}, {}});
  c.figures.push_back({Figure::TrainError, 2, Verdict::WithinTolerance, 10, 10.000001, {}, {}});
  c.setup.push_back({"threads", "16", "2"});
  const std::string text = run_comparison_text(c);
  EXPECT_NE(text.find("disc-2 on cpu: different"), std::string::npos) << text;
  EXPECT_EQ(row(text, "data"), (std::vector<std::string>{"data", "same", "00aa", "00aa"}));
  EXPECT_EQ(row(text, "final parameters"),
            (std::vector<std::string>{"final parameters", "different", "00bb", "00cc"}));
  EXPECT_EQ(row(text, "loss"),
            (std::vector<std::string>{"loss", "different", "4.25", "4.5",
                                      "epoch 2; 2 of 3 epochs not bit-identical"}));
  EXPECT_EQ(row(text, "train error"),
            (std::vector<std::string>{"train error", "within tolerance", "10", "10.000001",
                                      "epoch 2; 1 of 2 epochs not bit-identical"}));
  const auto step = row(text, "median step");
  ASSERT_GE(step.size(), 2u) << text;
  EXPECT_EQ(step[1], "0.50x");
  EXPECT_NE(text.find("setup differs: threads: 16 recorded, 2 here"), std::string::npos) << text;
  EXPECT_EQ(text.find("the data differs"), std::string::npos) << text;
}

TEST(ReplayText, TheSummaryCountsRunsByVerdictAndStatesTheTolerance) {
  RunComparison same, off;
  off.figures.push_back({Figure::Loss, 1, Verdict::Different, 1, 2, {}, {}});
  const std::string s = replay_summary_text({same, off, same}, 1, 1e-5);
  EXPECT_NE(s.find("3 runs replayed: 2 bit-identical, 0 within tolerance (relative 1e-05), 1 "
                   "different; 1 skipped"),
            std::string::npos)
      << s;
  EXPECT_NE(manifest_differences_text({}).find("the same build"), std::string::npos);
  EXPECT_NE(manifest_differences_text({{"crossover", "0.1.1", "0.2.0"}}).find("0.2.0"),
            std::string::npos);
}

}  // namespace
}  // namespace xo

// The replay's comparison of a recorded run and its replay: one table of value pairs for the
// verdicts (bit-identical, within tolerance, different; NaN where a figure does not exist), then
// whole runs: identical, a loss moved within and beyond the tolerance, other data, no test set,
// an interrupted recording, a different setup.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "advisor/replay.h"

namespace xo {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Replay, ValuesAreComparedBitForBitThenWithinTheRelativeTolerance) {
  struct Case {
    const char* what;
    double recorded, replayed, tolerance;
    Verdict expected;
  };
  const double one_ulp_above = std::nextafter(4.25, 5.0);
  const Case cases[] = {
      {"the same bits", 4.25, 4.25, 1e-5, Verdict::Identical},
      {"the same bits, no tolerance", 4.25, 4.25, 0, Verdict::Identical},
      {"one ulp apart", 4.25, one_ulp_above, 1e-5, Verdict::WithinTolerance},
      {"one ulp apart, no tolerance", 4.25, one_ulp_above, 0, Verdict::Different},
      {"just inside 1e-5", 1.0, 1.0 + 0.9e-5, 1e-5, Verdict::WithinTolerance},
      {"just outside 1e-5", 1.0, 1.0 + 1.1e-5, 1e-5, Verdict::Different},
      {"relative to the larger", 100.0, 100.0 - 9e-4, 1e-5, Verdict::WithinTolerance},
      {"zero against tiny", 0.0, 1e-30, 1e-5, Verdict::Different},
      {"minus zero and zero: other bits, equal values", -0.0, 0.0, 1e-5, Verdict::WithinTolerance},
      {"NaN and NaN (no test set, or a diverged loss replayed)", kNaN, kNaN, 1e-5,
       Verdict::Identical},
      {"NaN against a number", kNaN, 1.0, 1e-5, Verdict::Different},
      {"a number against NaN", 1.0, kNaN, 1e-5, Verdict::Different},
      {"infinity against a large number", kInf, 1e308, 1e-5, Verdict::Different},
      {"infinity and infinity", kInf, kInf, 1e-5, Verdict::Identical},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(compare_values(c.recorded, c.replayed, c.tolerance), c.expected) << c.what;
  }
}

RunRecord run(bool test_set) {
  RunRecord r;
  r.data_hash = "00000000000000aa";
  r.params_hash = "00000000000000bb";
  TrainResult& t = r.result;
  t.model = "disc-2";
  t.device.id = "cpu";
  t.device.name = "Test CPU";
  t.device.threads = 2;
  t.device.library = "oneDNN 2.6.3 (OpenMP)";
  t.shards = 1;
  t.test_samples = test_set ? 100 : 0;
  for (int64_t e = 1; e <= 3; ++e) {
    t.epochs.push_back({e, 10.0 / static_cast<double>(e), 40.0 / static_cast<double>(e), 0.01,
                        test_set ? 0.5 / static_cast<double>(e) : kNaN,
                        test_set ? 80.0 + static_cast<double>(e) : kNaN});
  }
  t.steps_taken = 30;
  t.step_ms.median = 0.5;
  return r;
}

const FigureComparison* find(const RunComparison& c, Figure figure, int64_t epoch = 0) {
  for (const FigureComparison& f : c.figures) {
    if (f.figure == figure && f.epoch == epoch) return &f;
  }
  return nullptr;
}

TEST(Replay, RunsAreComparedFigureByFigure) {
  struct Case {
    const char* what;
    bool test_set;
    void (*change)(RunRecord&);  // applied to the replay
    Verdict expected;
    Figure figure;  // the figure the change shows in
    int64_t epoch;
  };
  const Case cases[] = {
      {"identical", true, [](RunRecord&) {}, Verdict::Identical, Figure::Parameters, 0},
      {"identical without a test set", false, [](RunRecord&) {}, Verdict::Identical, Figure::Loss,
       3},
      {"a loss within tolerance", true, [](RunRecord& r) { r.result.epochs[1].loss *= 1 + 1e-7; },
       Verdict::WithinTolerance, Figure::Loss, 2},
      {"a loss beyond tolerance", true, [](RunRecord& r) { r.result.epochs[1].loss *= 1 + 1e-3; },
       Verdict::Different, Figure::Loss, 2},
      {"a train error", false, [](RunRecord& r) { r.result.epochs[0].train_error = 41; },
       Verdict::Different, Figure::TrainError, 1},
      {"a test accuracy", true, [](RunRecord& r) { r.result.epochs[2].test_accuracy = 99; },
       Verdict::Different, Figure::TestAccuracy, 3},
      {"a test loss that went missing", true,
       [](RunRecord& r) { r.result.epochs[0].test_loss = kNaN; }, Verdict::Different,
       Figure::TestLoss, 1},
      {"other final parameters", true, [](RunRecord& r) { r.params_hash = "00000000000000cc"; },
       Verdict::Different, Figure::Parameters, 0},
      {"other data", true, [](RunRecord& r) { r.data_hash = "00000000000000dd"; },
       Verdict::Different, Figure::Data, 0},
      {"an epoch fewer", true, [](RunRecord& r) { r.result.epochs.pop_back(); }, Verdict::Different,
       Figure::Epochs, 0},
  };
  for (const Case& c : cases) {
    const RunRecord recorded = run(c.test_set);
    RunRecord replayed = recorded;
    c.change(replayed);
    const RunComparison compared = compare_runs(recorded, replayed, 1e-5);
    EXPECT_EQ(compared.verdict(), c.expected) << c.what;
    const FigureComparison* f = find(compared, c.figure, c.epoch);
    ASSERT_NE(f, nullptr) << c.what;
    EXPECT_EQ(f->verdict, c.expected) << c.what;
    EXPECT_EQ(compared.data_differs(), c.figure == Figure::Data) << c.what;
    // Test figures exist only where there is a test set.
    EXPECT_EQ(find(compared, Figure::TestLoss, 1) != nullptr, c.test_set) << c.what;
    EXPECT_EQ(find(compared, Figure::TestAccuracy, 2) != nullptr, c.test_set) << c.what;
    EXPECT_TRUE(compared.setup.empty()) << c.what;
  }
}

TEST(Replay, ADifferentLossKeepsBothValues) {
  const RunRecord recorded = run(false);
  RunRecord replayed = recorded;
  replayed.result.epochs[2].loss = 3.5;
  const RunComparison c = compare_runs(recorded, replayed, 1e-5);
  const FigureComparison* f = find(c, Figure::Loss, 3);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->recorded, 10.0 / 3);
  EXPECT_EQ(f->replayed, 3.5);
  EXPECT_EQ(find(c, Figure::Loss, 1)->verdict, Verdict::Identical);
  EXPECT_EQ(find(c, Figure::Parameters)->recorded_hash, "00000000000000bb");
}

TEST(Replay, AnInterruptedRecordingComparesItsFinishedEpochsOnly) {
  RunRecord recorded = run(false);
  recorded.result.interrupted = true;
  recorded.result.epochs.pop_back();      // stopped in epoch 3
  const RunRecord replayed = run(false);  // the replay trains every epoch
  const RunComparison c = compare_runs(recorded, replayed, 1e-5);
  EXPECT_TRUE(c.recorded_interrupted);
  EXPECT_EQ(c.verdict(), Verdict::Identical);
  EXPECT_EQ(find(c, Figure::Parameters), nullptr);
  EXPECT_EQ(find(c, Figure::Epochs), nullptr);
  EXPECT_NE(find(c, Figure::Loss, 2), nullptr);
  EXPECT_EQ(find(c, Figure::Loss, 3), nullptr);
}

TEST(Replay, TheSetupThatDiffersIsListedAndTheStepTimeIsARatio) {
  const RunRecord recorded = run(false);
  RunRecord replayed = recorded;
  replayed.result.device.threads = 16;
  replayed.result.shards = 16;
  replayed.result.device.library = "oneDNN 3.0.0 (OpenMP)";
  replayed.result.step_ms.median = 0.25;
  const RunComparison c = compare_runs(recorded, replayed, 1e-5);
  ASSERT_EQ(c.setup.size(), 3u);
  EXPECT_EQ(c.setup[0].what, "libraries");
  EXPECT_EQ(c.setup[1].what, "threads");
  EXPECT_EQ(c.setup[1].recorded, "2");
  EXPECT_EQ(c.setup[1].replayed, "16");
  EXPECT_EQ(c.setup[2].what, "batch shards");
  EXPECT_DOUBLE_EQ(c.step_ratio(), 0.5);
  // The setup and the time explain; they are not outcomes.
  EXPECT_EQ(c.verdict(), Verdict::Identical);
}

}  // namespace
}  // namespace xo

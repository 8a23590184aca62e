// Stops outside the step loop: with a stop requested (what the first SIGINT/SIGTERM does), every
// long piece of work that is not a training step (generating or reading data, probing peaks,
// evaluating) ends at its next poll with Interrupted naming what it was doing, and training
// returns an interrupted result that keeps its finished epochs. The process-level behaviour (exit
// code 130 within seconds) is tests/cli/test_prompt_stop.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/interrupt.h"
#include "data/dataset.h"
#include "data/imdb.h"
#include "data/source.h"
#include "measure/peaks.h"
#include "model/model.h"
#include "train/plan.h"
#include "train/trainer.h"

namespace xo {
namespace {

// A stop request for the scope of a test: the flag is process-wide.
class StopRequested {
 public:
  StopRequested() { request_stop(); }
  ~StopRequested() { clear_stop_request(); }
};

struct StopCase {
  std::string name;
  std::function<void()> work;
  std::string doing;  // what Interrupted names
};

std::string csv_rows(int rows) {
  std::string s;
  for (int i = 0; i < rows; ++i) s += "0.5,0.25," + std::to_string(i % 2) + "\n";
  return s;
}

bool one_review(int& part, std::string& text) {
  part = 0;
  text = "a fine film";
  return true;  // endless: only a stop ends it
}

const std::vector<StopCase>& stop_cases() {
  static const std::vector<StopCase> cases = {
      {"disc", [] { make_disc(1'000'000, 1); }, "generating the disc data set"},
      {"csv", [] { parse_csv(csv_rows(5000), "big.csv", 2, 2); }, "reading the CSV file big.csv"},
      {"imdb_synthetic", [] { make_imdb_synthetic(10'000, 0, {}, 1); },
       "generating the imdb-synthetic data set"},
      {"imdb_reviews",
       [] {
         auto next = [](int& part, std::string& text) { return one_review(part, text); };
         imdb_from_reviews(next, {});
       },
       "reading the IMDB reviews"},
      {"peaks",
       [] {
         auto be = make_backend(parse_device("cpu", 1));
         probe_peaks(*be);
       },
       "probing the device's peaks"},
  };
  return cases;
}

// The case's name in test listings, not a dump of its bytes.
void PrintTo(const StopCase& c, std::ostream* os) { *os << c.name; }

class StopRequestTest : public ::testing::TestWithParam<StopCase> {};

TEST_P(StopRequestTest, EndsTheWorkWithInterruptedNamingIt) {
  const StopCase& c = GetParam();
  const StopRequested stop;
  try {
    c.work();
    ADD_FAILURE() << c.name << " ran to its end with a stop requested";
  } catch (const Interrupted& e) {
    EXPECT_EQ(std::string(e.what()), c.doing);
  }
}

TEST_P(StopRequestTest, WithoutAStopRequestTheWorkRuns) {
  const StopCase& c = GetParam();
  if (c.name == "imdb_reviews") GTEST_SKIP() << "endless without a stop";
  if (c.name == "peaks") GTEST_SKIP() << "seconds of probing (the CLI tests probe the peaks)";
  EXPECT_NO_THROW(c.work());
}

INSTANTIATE_TEST_SUITE_P(Work, StopRequestTest, ::testing::ValuesIn(stop_cases()),
                         [](const ::testing::TestParamInfo<StopCase>& c) { return c.param.name; });

// disc-2 for 3 epochs with a test split of 500 points, initialised on one CPU thread.
struct SmallRun {
  ModelSpec spec = [] {
    ModelSpec s = *builtin_spec("disc-2");
    s.train.epochs = 3;
    s.data.test_samples = 500;
    return s;
  }();
  std::unique_ptr<Backend> be = make_backend(parse_device("cpu", 1));
  Model model{spec, *be};
  DataSplit data = load_data(spec.data, data_request(spec, model.classes()));
  SmallRun() { model.init(1); }
};

TEST(StopRequest, EvaluationIsCutShortWithNaNFigures) {
  SmallRun run;
  Evaluator evaluator(run.model, run.data.test);
  const Evaluation whole = evaluator.run();
  EXPECT_TRUE(whole.complete);
  EXPECT_GT(whole.accuracy, 0.0);
  const StopRequested stop;
  const Evaluation cut = evaluator.run();
  EXPECT_FALSE(cut.complete);
  EXPECT_TRUE(std::isnan(cut.loss));
  EXPECT_TRUE(std::isnan(cut.accuracy));
}

TEST(StopRequest, TrainingStopsAfterTheEpochWhoseEvaluationItCut) {
  SmallRun run;
  // The request arrives while the first epoch trains (here: at its end, as the epoch callback
  // runs after the evaluation it would have cut).
  bool requested = false;
  const TrainResult r =
      train_model(run.model, run.data, run.spec.train, [&](const EpochRecord&, int64_t) {
        request_stop();
        requested = true;
      });
  clear_stop_request();
  ASSERT_TRUE(requested);
  EXPECT_TRUE(r.interrupted);
  ASSERT_EQ(r.epochs.size(), 1u);  // the finished epoch is kept, no further one starts
  EXPECT_TRUE(std::isfinite(r.epochs[0].test_accuracy));
}

}  // namespace
}  // namespace xo

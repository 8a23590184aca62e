// `crossover train`'s lines: each figure where it was measured and nowhere else, and the summary's
// variants (a run that never finished an epoch, ranks, a pause, a resume, an interruption).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "report/train_text.h"

namespace xo {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

EpochRecord epoch(int64_t n) {
  EpochRecord e;
  e.epoch = n;
  e.loss = 0.5;
  e.train_error = 12.5;
  e.seconds = 0.0012345;
  e.test_loss = kNaN;
  e.test_accuracy = kNaN;
  e.lr = 0.025;
  return e;
}

TEST(TrainText, AnEpochLineShowsWhatWasMeasuredAndTheRateOnlyUnderASchedule) {
  EXPECT_EQ(epoch_line(epoch(3), 10, false),
            "epoch  3/10  loss 0.500000  train error  12.50%  1.234 ms\n");
  EXPECT_EQ(epoch_line(epoch(3), 10, true),
            "epoch  3/10  lr 0.025  loss 0.500000  train error  12.50%  1.234 ms\n");
  EpochRecord regression = epoch(1);
  regression.train_error = kNaN;  // mse: no error, no accuracy
  regression.val_loss = 0.25;
  regression.test_loss = 0.125;
  EXPECT_EQ(epoch_line(regression, 2, false),
            "epoch 1/2  loss 0.500000  val loss 0.2500  test loss 0.1250  1.234 ms\n");
}

TrainResult finished() {
  TrainResult r;
  r.model = "disc-4";
  r.epochs = {epoch(1), epoch(2)};
  r.final_loss = 0.25;
  r.final_train_error = 3.2;
  r.test_samples = 1000;
  r.final_test_accuracy = 97.1;
  r.final_test_loss = 0.1;
  r.step_ms.median = 0.0123;
  r.step_ms.count = 9;
  r.step_ms.p10 = 0.011;
  r.step_ms.p90 = 0.015;
  r.gflops = 4.5;
  r.samples_per_second = 123456;
  r.train_seconds = 0.5;
  r.shards = 1;
  return r;
}

TEST(TrainText, TheSummaryOfAFinishedRun) {
  EXPECT_EQ(train_summary(finished(), 2),
            "disc-4: final loss 0.250000, train error 3.20%, test accuracy 97.10% (1000 samples), "
            "0.0123 ms/step (median of 9, p10-p90 0.0110-0.0150), 4.5 GFLOP/s, 123456 samples/s, "
            "0.50 s training, 1 shard\n");
}

TEST(TrainText, TheSummarySaysHowARunEndedAndHowItsRanksSummed) {
  TrainResult none = finished();
  none.epochs.clear();
  none.final_test_accuracy = kNaN;
  none.final_test_loss = kNaN;
  none.interrupted = true;
  const std::string stopped = train_summary(none, 2);
  EXPECT_EQ(stopped.rfind("disc-4: no epoch completed, 0.0123 ms/step", 0), 0u) << stopped;
  EXPECT_NE(stopped.find("1 shard (interrupted)\n"), std::string::npos) << stopped;

  TrainResult paused = finished();
  paused.paused = true;
  EXPECT_NE(train_summary(paused, 5).find("(paused after epoch 2 of 5)"), std::string::npos);
  TrainResult resumed = finished();
  resumed.resumed_at_step = 18;
  EXPECT_NE(train_summary(resumed, 2).find("(resumed from its checkpoint at step 18)"),
            std::string::npos);

  TrainResult ranks = finished();
  ranks.ranks = 2;
  ranks.reduce_mode = "after-backward";
  ranks.reduced_bytes = 4096;
  ranks.communicate_ms = 0.25;
  EXPECT_NE(train_summary(ranks, 2).find(" per rank, 2 ranks (summing 4.00 KiB of gradients per "
                                         "step after-backward: 0.2500 ms beyond backward)"),
            std::string::npos)
      << train_summary(ranks, 2);
}

}  // namespace
}  // namespace xo

// The jobs below the CLI (src/job/), called as a second front end calls them: options as values,
// everything said caught by recording hooks, the outcome returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file.h"
#include "job/hooks.h"
#include "job/measuring.h"
#include "job/replay.h"
#include "job/run_notes.h"
#include "job/train.h"
#include "support/temp_dir.h"

namespace xo {
using testing::TempDir;
namespace {

// Every hook call, in order, as text.
struct Recorder : JobHooks {
  std::vector<std::string> results, notes, statuses;
  std::vector<int64_t> epochs;
  void result(const std::string& text) override { results.push_back(text); }
  void note(const std::string& line) override { notes.push_back(line); }
  void status(const std::string& text) override { statuses.push_back(text); }
  void epoch(const EpochRecord& e, int64_t n, bool) override {
    EXPECT_EQ(n, 3);
    epochs.push_back(e.epoch);
  }
  bool said(const std::vector<std::string>& lines, const std::string& part) const {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(part) != std::string::npos; });
  }
};

TrainJob small_train(const TempDir& dir) {
  TrainJob o;
  o.spec = "disc-2";
  o.epochs = 3;
  o.threads = 1;
  o.checkpoint.dir = (dir.path() / "ck").string();
  o.json = (dir.path() / "result.json").string();
  return o;
}

TEST(Jobs, TrainTellsItsHeaderEpochsAndSummaryAndWritesItsResult) {
  TempDir dir("job-train");
  Recorder told;
  const TrainOutcome outcome = train_job(small_train(dir), told);
  EXPECT_EQ(outcome.exit_code(), 0);
  EXPECT_TRUE(outcome.lead);
  EXPECT_EQ(outcome.run.result.epochs.size(), 3u);
  EXPECT_EQ(told.epochs, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_EQ(told.results.size(), 2u);  // the header, then the summary
  EXPECT_NE(told.results[0].find("disc-2"), std::string::npos) << told.results[0];
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "result.json"));
  // A finished run's checkpoints hold nothing more.
  EXPECT_FALSE(newest_checkpoint(dir.path() / "ck").has_value());
}

TEST(Jobs, AQuietTrainTellsOnlyItsSummary) {
  TempDir dir("job-quiet");
  TrainJob o = small_train(dir);
  o.quiet = true;
  Recorder told;
  train_job(o, told);
  EXPECT_TRUE(told.epochs.empty());
  EXPECT_EQ(told.results.size(), 1u);
}

TEST(Jobs, TrainRefusesAnUnfinishedRunsCheckpointUnlessToldWhatToDoWithIt) {
  TempDir dir("job-resume");
  TrainJob o = small_train(dir);
  o.pause_after = 1;
  o.checkpoint.every = "1steps";
  Recorder paused;
  EXPECT_TRUE(train_job(o, paused).run.result.paused);
  EXPECT_TRUE(paused.said(paused.notes, "paused after epoch 1 of 3"));
  o.pause_after = 0;
  Recorder refused;
  EXPECT_THROW(train_job(o, refused), UserError);
  o.checkpoint.restart = true;
  Recorder restarted;
  EXPECT_EQ(train_job(o, restarted).exit_code(), 0);
  EXPECT_TRUE(restarted.said(restarted.notes, "discarded the checkpoint"));
}

MeasureJob small_measure(const TempDir& dir) {
  MeasureJob o;
  o.measure.out = (dir.path() / "out").string();
  o.measure.settings.devices = {"cpu"};
  o.measure.settings.threads = 1;
  o.measure.settings.epochs = 1;
  o.measure.settings.max_steps = 5;
  o.measure.settings.node_time_steps = 0;
  o.measure.command_line = "test: run_job";
  return o;
}

TEST(Jobs, RunMeasuresEachModelWritesItsReportAndRefusesToOverwriteIt) {
  TempDir dir("job-run");
  MeasureJob o = small_measure(dir);
  o.models = {"disc-2", "disc-3"};
  Recorder told;
  const JobOutcome outcome = run_job(o, told);
  EXPECT_EQ(outcome.exit_code(), 0);
  EXPECT_EQ(outcome.report.runs.size(), 2u);
  EXPECT_TRUE(outcome.report.complete);
  ASSERT_TRUE(outcome.report.manifest);
  EXPECT_EQ(outcome.report.manifest->command_line, "test: run_job");
  EXPECT_TRUE(std::filesystem::is_regular_file(outcome.out / "results.json"));
  EXPECT_TRUE(told.said(told.notes, "disc-3 on cpu: "));  // each run's line, as a note
  EXPECT_TRUE(told.said(told.statuses, "[2/2] disc-3 on cpu: loading data"));
  Recorder again;
  EXPECT_THROW(run_job(o, again), UserError);  // a finished job is never overwritten unasked
  o.measure.overwrite = true;
  EXPECT_EQ(run_job(o, again).report.runs.size(), 2u);
}

TEST(Jobs, SweepGrowsTheModelAlongItsAxisAndCostReadsItBack) {
  TempDir dir("job-sweep");
  MeasureJob o = small_measure(dir);
  o.spec = "disc-4";
  o.vary = "width=8,16";
  Recorder told;
  const JobOutcome swept = sweep_job(o, told);
  ASSERT_EQ(swept.report.runs.size(), 2u);
  ASSERT_TRUE(swept.report.sweep);
  // `cost RESULTS.json`: the recorded run costed again, nothing measured or written.
  AdviseJob cost;
  cost.advise = false;
  cost.spec = (swept.out / "results.json").string();
  Recorder quiet;
  const std::optional<JobOutcome> costed = advise_job(cost, quiet);
  ASSERT_TRUE(costed);
  EXPECT_TRUE(costed->out.empty());
  EXPECT_TRUE(costed->report.cost);
  EXPECT_TRUE(quiet.statuses.empty());
}

TEST(Jobs, ReplayRunsTheRecordedJobAgainAndComparesEachRun) {
  TempDir dir("job-replay");
  MeasureJob o = small_measure(dir);
  o.models = {"disc-2"};
  Recorder measured;
  const JobOutcome recorded = run_job(o, measured);
  ReplayJob replay;
  replay.file = (recorded.out / "results.json").string();
  Recorder told;
  const ReplayOutcome outcome = replay_job(replay, told);
  ASSERT_EQ(outcome.compared.size(), 1u);
  EXPECT_EQ(outcome.compared[0].model, "disc-2");
  EXPECT_EQ(outcome.exit_code(), 0);  // the same build, machine and settings
  EXPECT_EQ(outcome.out, recorded.out / "replay");
  EXPECT_TRUE(told.said(told.results, "replay of "));
}

TEST(Jobs, EarlyStoppingIsAnOutcomeWhereTheJobSaysSoElseANote) {
  RunRecord run;
  run.result.model = "m";
  run.result.early_stopping_monitor = "test_loss";
  run.result.stopped_early = true;
  run.result.best_epoch = 1;
  run.result.epochs.push_back(EpochRecord{.epoch = 2});
  Recorder as_result, as_note;
  tell_run_notes(as_result, true, "", run, {}, "");
  tell_run_notes(as_note, false, "m on cpu", run, {}, "");
  ASSERT_EQ(as_result.results.size(), 1u);
  EXPECT_NE(as_result.results[0].find("m: stopped early after epoch 2"), std::string::npos);
  EXPECT_TRUE(as_result.notes.empty());
  EXPECT_TRUE(as_note.results.empty());
  EXPECT_TRUE(as_note.said(as_note.notes, "m on cpu: stopped early after epoch 2"));
}

}  // namespace
}  // namespace xo

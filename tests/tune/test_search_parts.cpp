// The search engine's pure parts: how a trial's exit reads, the same search going on in its
// --out (and another refused), the next job and the decisions of the end, and the slots.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/exit_codes.h"
#include "tune/standing.h"
#include "tune/resume.h"
#include "tune/slots.h"
#include "tune/trial_process.h"

namespace xo {
namespace {

TEST(TuneSearch, ATrialsExitCodeSaysHowItEnded) {
  EXPECT_EQ(process_end(0, false), ProcessEnd::Trained);
  EXPECT_EQ(process_end(kExitDiverged, false), ProcessEnd::Diverged);
  EXPECT_EQ(process_end(130, false), ProcessEnd::Interrupted);
  // Killed by the signal of a stop request: interrupted only where the search was stopped.
  EXPECT_EQ(process_end(128 + 15, true), ProcessEnd::Interrupted);
  EXPECT_EQ(process_end(128 + 15, false), ProcessEnd::Failed);
  EXPECT_EQ(process_end(2, true), ProcessEnd::Failed);
  // The machine's failures, retried when the search runs again: its exit code, and the kernel's
  // out-of-memory killer (SIGKILL) or a mapped file on a full disk (SIGBUS).
  EXPECT_EQ(process_end(kExitMachine, false), ProcessEnd::MachineFailed);
  EXPECT_EQ(process_end(128 + 9, false), ProcessEnd::MachineFailed);
  EXPECT_EQ(process_end(128 + 7, false), ProcessEnd::MachineFailed);
  EXPECT_EQ(process_end(128 + 11, false), ProcessEnd::Failed);  // a crash is the trial's own
}

TEST(TuneSearch, TrainArgumentsPauseOnlyBelowTheLastRung) {
  const TrialFiles f = trial_files("out", "t01");
  EXPECT_EQ(f.spec, std::filesystem::path("out/trials/t01/spec.toml"));
  const std::vector<std::string> last = train_args(f, "cpu", 2, std::nullopt, "60s");
  EXPECT_EQ(last.front(), "train");
  EXPECT_EQ(last.back(), "--resume-if-any");
  const std::vector<std::string> rung = train_args(f, "cpu", 2, 3, "60s");
  ASSERT_EQ(rung.size(), last.size() + 2);
  EXPECT_EQ(rung[rung.size() - 2], "--pause-after");
  EXPECT_EQ(rung.back(), "3");
}

TuneRecord two_trials() {
  TuneRecord r;
  r.spec_toml = "spec";
  r.vary = {"lr=0.1,0.2"};
  r.mode = "grid";
  r.objective = "loss";
  r.higher_is_better = false;
  r.rungs = {1, 3};
  r.halving = HalvingSettings{1, 2};
  for (const char* id : {"t01", "t02"}) {
    TrialRecord t;
    t.id = id;
    t.values = {{"lr", id}};
    r.trials.push_back(t);
  }
  return r;
}

TEST(TuneSearch, TheSameSearchGoesOnAndAnotherIsRefused) {
  TuneRecord was = two_trials();
  was.trials[0].status = TrialStatus::Finished;
  was.trials[1].status = TrialStatus::Running;
  was.decisions.push_back({"t01", true, 1, 3, 1, 2, 1});
  TuneRecord now = two_trials();
  EXPECT_EQ(continue_search(now, was, "out"), 1u);
  EXPECT_EQ(now.trials[1].status, TrialStatus::Pending);  // its checkpoint continues it
  EXPECT_EQ(now.decisions.size(), 1u);

  TuneRecord other = two_trials();
  other.vary = {"lr=0.1,0.3"};
  try {
    continue_search(other, was, "out");
    FAIL() << "another --vary was mixed in";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--vary was lr=0.1,0.2, now lr=0.1,0.3"),
              std::string::npos)
        << e.what();
  }
}

// A trial the machine failed (a full disk) is trained again at the rung it failed at; one that
// failed of its own stays failed.
TEST(TuneSearch, ATrialTheMachineFailedIsRetriedAndOneThatFailedOfItsOwnIsNot) {
  TuneRecord was = two_trials();
  for (TrialRecord& t : was.trials) {
    t.status = TrialStatus::Failed;
    t.rung_objective = {std::nan("")};
    t.error = "weights.safetensors: cannot write: No space left on device";
  }
  was.trials[0].machine_failed = true;
  TuneRecord now = two_trials();
  EXPECT_EQ(continue_search(now, was, "out"), 1u);
  EXPECT_EQ(now.trials[0].status, TrialStatus::Pending);
  EXPECT_FALSE(now.trials[0].machine_failed);
  EXPECT_TRUE(now.trials[0].rung_objective.empty());
  EXPECT_TRUE(now.trials[0].error.empty());
  EXPECT_EQ(now.trials[1].status, TrialStatus::Failed);
  EXPECT_EQ(now.trials[1].rung_objective.size(), 1u);
  const std::optional<HalvingJob> job = next_job(now, {false, false});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->trial, 0u);
  EXPECT_EQ(job->rung, 0);
}

TEST(TuneSearch, APromotionLeftUnfinishedGoesOnFirstAndPausedTrialsStopAtTheEnd) {
  TuneRecord r = two_trials();
  for (size_t i = 0; i < 2; ++i) {
    r.trials[i].status = TrialStatus::Paused;
    r.trials[i].epochs = 1;
    r.trials[i].rung_objective = {i == 0 ? 0.5 : 0.4};
  }
  // t02 was promoted before the search stopped.
  r.decisions.push_back({"t02", true, 1, 3, 1, 2, 1});
  const std::optional<HalvingJob> job = next_job(r, {false, false});
  ASSERT_TRUE(job);
  EXPECT_EQ(job->trial, 1u);
  EXPECT_EQ(job->rung, 1);
  EXPECT_FALSE(job->promotion);
  // While it runs, nothing else: t01 is not in the top half.
  EXPECT_FALSE(next_job(r, {false, true}));

  const std::vector<size_t> stopped = stop_paused_trials(r);
  EXPECT_EQ(stopped, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(r.trials[0].status, TrialStatus::Stopped);
  ASSERT_EQ(r.decisions.size(), 3u);
  EXPECT_EQ(r.decisions[1].place, 2);
  EXPECT_EQ(r.decisions[1].of, 2);
  EXPECT_EQ(best_trial(r), nullptr);  // none trained the whole budget
  r.trials[1].status = TrialStatus::Finished;
  r.trials[1].objective = 0.3;
  r.trials[0].objective = 0.5;
  ASSERT_NE(best_trial(r), nullptr);
  EXPECT_EQ(best_trial(r)->id, "t02");
}

TEST(TuneSearch, EachDeviceGetsItsTrialsAtOnceWithTheCoresShared) {
  const std::vector<ParallelChoice> choices = {{"cpu", 2, true, {}}};
  const std::vector<Slot> slots = local_slots(choices, 0, 8);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[0].device, "cpu");
  EXPECT_EQ(slots[0].threads, 4);
  EXPECT_EQ(local_slots(choices, 3, 8)[1].threads, 3);  // --threads
  EXPECT_EQ(local_slots({{"cpu", 16, false, {}}}, 0, 8)[0].threads, 1);
}

}  // namespace
}  // namespace xo

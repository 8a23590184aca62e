// The [train.schedule] and [train.early_stopping] tables: what each type reads, its defaults,
// to_toml round trips, and every mistake, each reported with the file, the line and the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/spec.h"
#include "support/expect_error.h"

namespace xo {
namespace {

using testing::user_error;

// A valid [model] and [train] of 10 lines; `tail` starts on line 11.
std::string spec_with(const std::vector<std::string>& tail) {
  std::string out =
      "[model]\n"                                    // 1
      "input = [2]\n"                                // 2
      "layers = [\n"                                 // 3
      "  { type = \"linear\", out = 4 },\n"          // 4
      "  { type = \"relu\" },\n"                     // 5
      "  { type = \"linear\", out = 2 },\n"          // 6
      "]\n"                                          // 7
      "loss = \"cross_entropy\"\n"                   // 8
      "[train]\n"                                    // 9
      "optimizer = { type = \"sgd\", lr = 0.1 }\n";  // 10
  for (const std::string& line : tail) out += line + "\n";
  return out;
}

TEST(SpecSchedule, StepReadsStepSizeAndGammaDefaultingToOneTenth) {
  const ModelSpec s =
      parse_spec(spec_with({"[train.schedule]", "type = \"step\"", "step_size = 3"}), "s.toml");
  ASSERT_TRUE(s.train.schedule);
  EXPECT_EQ(s.train.schedule->type, ScheduleType::Step);
  EXPECT_EQ(s.train.schedule->step_size, 3);
  EXPECT_EQ(s.train.schedule->gamma, 0.1);
  EXPECT_FALSE(s.train.early_stopping);
}

TEST(SpecSchedule, CosineLeavesTMaxToTheEpochsUnlessGiven) {
  ModelSpec s = parse_spec(spec_with({"[train.schedule]", "type = \"cosine\""}), "s.toml");
  EXPECT_EQ(s.train.schedule->type, ScheduleType::Cosine);
  EXPECT_EQ(s.train.schedule->t_max, 0);  // train.epochs, resolved when training starts
  EXPECT_EQ(s.train.schedule->eta_min, 0.0);
  s = parse_spec(
      spec_with({"[train.schedule]", "type = \"cosine\"", "t_max = 20", "eta_min = 1e-4"}),
      "s.toml");
  EXPECT_EQ(s.train.schedule->t_max, 20);
  EXPECT_EQ(s.train.schedule->eta_min, 1e-4);
}

TEST(SpecSchedule, PlateauHasPyTorchsDefaultsAndRemembersWhereItsMonitorIs) {
  ModelSpec s = parse_spec(spec_with({"[train.schedule]", "type = \"plateau\""}), "s.toml");
  const ScheduleSettings& p = *s.train.schedule;
  EXPECT_FALSE(p.monitor);  // resolved with the data: test_loss where there is a test split
  EXPECT_EQ(p.monitor_place.origin, "s.toml");
  EXPECT_EQ(p.monitor_place.line, 11);  // the table's line
  EXPECT_EQ(p.factor, 0.1);
  EXPECT_EQ(p.patience, 10);
  EXPECT_EQ(p.threshold, 1e-4);
  EXPECT_EQ(p.cooldown, 0);
  EXPECT_EQ(p.min_lr, 0.0);
  s = parse_spec(spec_with({"[train.schedule]", "type = \"plateau\"", "factor = 0.5",
                            "monitor = \"test_accuracy\"", "patience = 0", "threshold = 0.01",
                            "cooldown = 2", "min_lr = 1e-5"}),
                 "s.toml");
  const ScheduleSettings& q = *s.train.schedule;
  EXPECT_EQ(q.monitor, Metric::TestAccuracy);
  EXPECT_EQ(q.monitor_place.line, 14);
  EXPECT_EQ(q.factor, 0.5);
  EXPECT_EQ(q.patience, 0);
  EXPECT_EQ(q.threshold, 0.01);
  EXPECT_EQ(q.cooldown, 2);
  EXPECT_EQ(q.min_lr, 1e-5);
}

TEST(SpecEarlyStopping, DefaultsArePatienceFiveNoDeltaNoRestore) {
  ModelSpec s = parse_spec(spec_with({"[train.early_stopping]"}), "s.toml");
  ASSERT_TRUE(s.train.early_stopping);
  EXPECT_FALSE(s.train.early_stopping->monitor);
  EXPECT_EQ(s.train.early_stopping->patience, 5);
  EXPECT_EQ(s.train.early_stopping->min_delta, 0.0);
  EXPECT_FALSE(s.train.early_stopping->restore_best);
  s = parse_spec(spec_with({"[train.early_stopping]", "monitor = \"loss\"", "patience = 0",
                            "min_delta = 0.001", "restore_best = true"}),
                 "s.toml");
  EXPECT_EQ(s.train.early_stopping->monitor, Metric::Loss);
  EXPECT_EQ(s.train.early_stopping->patience, 0);
  EXPECT_EQ(s.train.early_stopping->min_delta, 0.001);
  EXPECT_TRUE(s.train.early_stopping->restore_best);
}

// to_toml writes what was read, and reading it back gives the same text (a fixed point).
TEST(SpecSchedule, ToTomlRoundTripsEveryTable) {
  const std::vector<std::vector<std::string>> tables = {
      {"[train.schedule]", "type = \"step\"", "step_size = 2", "gamma = 0.7"},
      {"[train.schedule]", "type = \"cosine\"", "t_max = 9", "eta_min = 0.001"},
      {"[train.schedule]", "type = \"cosine\""},
      {"[train.schedule]", "type = \"plateau\"", "monitor = \"loss\"", "factor = 0.3",
       "patience = 4", "threshold = 0.02", "cooldown = 1", "min_lr = 0.0001",
       "[train.early_stopping]", "monitor = \"test_accuracy\"", "patience = 7", "min_delta = 0.5",
       "restore_best = true"},
      {"[train.early_stopping]"},
  };
  for (const auto& table : tables) {
    const ModelSpec s = parse_spec(spec_with(table), "s.toml");
    const std::string text = to_toml(s);
    SCOPED_TRACE(text);
    const ModelSpec back = parse_spec(text, "again.toml");
    EXPECT_EQ(to_toml(back), text);
    ASSERT_EQ(back.train.schedule.has_value(), s.train.schedule.has_value());
    if (s.train.schedule) {
      const ScheduleSettings &a = *s.train.schedule, &b = *back.train.schedule;
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.step_size, b.step_size);
      EXPECT_EQ(a.gamma, b.gamma);
      EXPECT_EQ(a.t_max, b.t_max);
      EXPECT_EQ(a.eta_min, b.eta_min);
      EXPECT_EQ(a.monitor, b.monitor);
      EXPECT_EQ(a.factor, b.factor);
      EXPECT_EQ(a.patience, b.patience);
      EXPECT_EQ(a.threshold, b.threshold);
      EXPECT_EQ(a.cooldown, b.cooldown);
      EXPECT_EQ(a.min_lr, b.min_lr);
    }
    ASSERT_EQ(back.train.early_stopping.has_value(), s.train.early_stopping.has_value());
    if (s.train.early_stopping) {
      const EarlyStoppingSettings &a = *s.train.early_stopping, &b = *back.train.early_stopping;
      EXPECT_EQ(a.monitor, b.monitor);
      EXPECT_EQ(a.patience, b.patience);
      EXPECT_EQ(a.min_delta, b.min_delta);
      EXPECT_EQ(a.restore_best, b.restore_best);
    }
  }
}

TEST(SpecSchedule, NoTablesWriteNothing) {
  const std::string text = to_toml(parse_spec(spec_with({}), "s.toml"));
  EXPECT_EQ(text.find("schedule"), std::string::npos);
  EXPECT_EQ(text.find("early_stopping"), std::string::npos);
}

struct ErrorCase {
  const char* name;
  std::vector<std::string> tail;  // from line 11
  std::vector<std::string> expected;
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

const ErrorCase kErrors[] = {
    {"unknown_type",
     {"[train.schedule]", "type = \"exponential\""},
     {"s.toml:12:", "train.schedule.type", "unknown schedule type 'exponential'",
      "step, cosine, plateau"}},
    {"missing_type", {"[train.schedule]", "step_size = 2"}, {"s.toml:11:", "train.schedule.type"}},
    {"missing_step_size",
     {"[train.schedule]", "type = \"step\""},
     {"s.toml:11:", "train.schedule.step_size", "missing", "epochs between two"}},
    {"zero_step_size",
     {"[train.schedule]", "type = \"step\"", "step_size = 0"},
     {"s.toml:13:", "train.schedule.step_size", "must be a positive integer"}},
    {"negative_gamma",
     {"[train.schedule]", "type = \"step\"", "step_size = 1", "gamma = -0.5"},
     {"s.toml:14:", "train.schedule.gamma", "> 0"}},
    {"zero_t_max",
     {"[train.schedule]", "type = \"cosine\"", "t_max = 0"},
     {"s.toml:13:", "train.schedule.t_max", "must be a positive integer"}},
    {"negative_eta_min",
     {"[train.schedule]", "type = \"cosine\"", "eta_min = -1"},
     {"s.toml:13:", "train.schedule.eta_min", ">= 0"}},
    {"factor_of_one",
     {"[train.schedule]", "type = \"plateau\"", "factor = 1.0"},
     {"s.toml:13:", "train.schedule.factor", "(0, 1)"}},
    {"zero_factor",
     {"[train.schedule]", "type = \"plateau\"", "factor = 0"},
     {"s.toml:13:", "train.schedule.factor", "(0, 1)"}},
    {"negative_patience",
     {"[train.schedule]", "type = \"plateau\"", "patience = -1"},
     {"s.toml:13:", "train.schedule.patience"}},
    {"negative_threshold",
     {"[train.schedule]", "type = \"plateau\"", "threshold = -0.1"},
     {"s.toml:13:", "train.schedule.threshold", ">= 0"}},
    {"negative_cooldown",
     {"[train.schedule]", "type = \"plateau\"", "cooldown = -2"},
     {"s.toml:13:", "train.schedule.cooldown"}},
    {"negative_min_lr",
     {"[train.schedule]", "type = \"plateau\"", "min_lr = -1e-3"},
     {"s.toml:13:", "train.schedule.min_lr", ">= 0"}},
    {"unknown_monitor",
     {"[train.schedule]", "type = \"plateau\"", "monitor = \"val_mae\""},
     {"s.toml:13:", "train.schedule.monitor", "unknown monitor 'val_mae'",
      "loss, val_loss, val_accuracy, test_loss, test_accuracy"}},
    // A key of another type is named as unknown, with the keys this type takes.
    {"key_of_another_type",
     {"[train.schedule]", "type = \"step\"", "step_size = 2", "patience = 3"},
     {"s.toml:14:", "train.schedule.patience", "unknown key", "type, step_size, gamma"}},
    {"monitor_on_a_step_schedule",
     {"[train.schedule]", "type = \"cosine\"", "monitor = \"loss\""},
     {"s.toml:13:", "train.schedule.monitor", "unknown key", "type, t_max, eta_min"}},
    {"schedule_not_a_table",
     {"schedule = \"step\""},
     {"s.toml:11:", "train.schedule", "[train.schedule] table"}},
    {"early_stopping_unknown_key",
     {"[train.early_stopping]", "patients = 3"},
     {"s.toml:12:", "train.early_stopping.patients", "unknown key",
      "monitor, patience, min_delta, restore_best"}},
    {"early_stopping_unknown_monitor",
     {"[train.early_stopping]", "monitor = \"accuracy\""},
     {"s.toml:12:", "train.early_stopping.monitor", "unknown monitor 'accuracy'"}},
    {"early_stopping_negative_patience",
     {"[train.early_stopping]", "patience = -1"},
     {"s.toml:12:", "train.early_stopping.patience"}},
    {"early_stopping_negative_min_delta",
     {"[train.early_stopping]", "min_delta = -0.1"},
     {"s.toml:12:", "train.early_stopping.min_delta", ">= 0"}},
    {"restore_best_not_a_bool",
     {"[train.early_stopping]", "restore_best = 1"},
     {"s.toml:12:", "train.early_stopping.restore_best", "expected true or false"}},
};

class SpecScheduleError : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(SpecScheduleError, NamesFileLineKeyAndExpectation) {
  const ErrorCase& c = GetParam();
  const std::string message = user_error([&] { parse_spec(spec_with(c.tail), "s.toml"); });
  for (const std::string& piece : c.expected) {
    EXPECT_NE(message.find(piece), std::string::npos) << "'" << piece << "' not in: " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Errors, SpecScheduleError, ::testing::ValuesIn(kErrors),
                         [](const auto& test) { return std::string(test.param.name); });

}  // namespace
}  // namespace xo

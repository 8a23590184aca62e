// A trial of a search as a process: its files, the `crossover train` command line that runs it,
// the paths its spec names made absolute, what a failed one said, and the objective and its
// checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "tune/trial_process.h"
#include "tune/trial_result.h"

namespace xo {
namespace {

namespace fs = std::filesystem;
using testing::expect_user_error;

TEST(TuneTrials, ATrialsFilesLiveInItsFolderUnderTheSearch) {
  const TrialFiles f = trial_files("out", "t03");
  EXPECT_EQ(f.dir, fs::path("out/trials/t03"));
  EXPECT_EQ(f.spec, fs::path("out/trials/t03/spec.toml"));
  EXPECT_EQ(f.result, fs::path("out/trials/t03/result.json"));
  EXPECT_EQ(f.weights, fs::path("out/trials/t03/weights.safetensors"));
  EXPECT_EQ(f.checkpoints, fs::path("out/trials/t03/checkpoints"));
  EXPECT_EQ(f.log, fs::path("out/trials/t03/log.txt"));
}

TEST(TuneTrials, ATrialTrainsQuietlyResumesAndPausesOnlyAtARung) {
  const TrialFiles f = trial_files("o", "t01");
  const std::vector<std::string> last = train_args(f, "cpu", 2, std::nullopt, "30s");
  const std::vector<std::string> expected = {"train",
                                             "o/trials/t01/spec.toml",
                                             "--device",
                                             "cpu",
                                             "--threads",
                                             "2",
                                             "--quiet",
                                             "--json",
                                             "o/trials/t01/result.json",
                                             "--save",
                                             "o/trials/t01/weights.safetensors",
                                             "--checkpoint-dir",
                                             "o/trials/t01/checkpoints",
                                             "--checkpoint-every",
                                             "30s",
                                             "--resume-if-any"};
  EXPECT_EQ(last, expected);
  const std::vector<std::string> rung = train_args(f, "cuda:0", 0, 3, "60s");
  ASSERT_EQ(rung.size(), expected.size() + 2);
  EXPECT_EQ(rung[rung.size() - 2], "--pause-after");
  EXPECT_EQ(rung.back(), "3");
}

TEST(TuneTrials, TheSpecsPathsAreMadeAbsoluteSoThatTheyReadFromTheTrialsFolder) {
  ModelSpec spec = *builtin_spec("disc-2");
  spec.data.source = "csv:data/train.csv";
  spec.data.test = "idx:sets/mnist";
  spec.init = "w.safetensors";
  const ModelSpec out = with_absolute_paths(spec);
  const fs::path here = fs::current_path();
  EXPECT_EQ(out.data.source, "csv:" + (here / "data/train.csv").string());
  EXPECT_EQ(out.data.test, "idx:" + (here / "sets/mnist").string());
  EXPECT_EQ(out.init, (here / "w.safetensors").string());
  spec.data.source = "disc";  // a generator names no file
  EXPECT_EQ(with_absolute_paths(spec).data.source, "disc");
}

TEST(TuneTrials, AFailedTrialIsRecordedWithTheLastErrorItPrinted) {
  const testing::TempDir dir("tune-trials");
  const fs::path log = dir.path() / "log.txt";
  std::ofstream(log) << "note: x\ncrossover: error: first\ncrossover: error: the data file is "
                        "gone\nbye\n";
  EXPECT_EQ(failure_text(log, 2), "the data file is gone");
  // A fused group's log: its trials' summary lines say "train error", and are no error.
  std::ofstream(log) << "crossover: error: t02: weights.safetensors: cannot write: No space left "
                        "on device\nt01: 4 epochs, train error 12.50%, test error 10.00%\n";
  EXPECT_EQ(failure_text(log, 7),
            "t02: weights.safetensors: cannot write: No space left on device");
  std::ofstream(log) << "crossover: internal error: a.cpp:3: check failed: x\n";
  EXPECT_EQ(failure_text(log, 3), "internal error: a.cpp:3: check failed: x");
  std::ofstream(log) << "nothing said\nt01: 4 epochs, train error 12.50%\n";
  EXPECT_EQ(failure_text(log, 2), "the trial's process ended with exit code 2");
  EXPECT_EQ(failure_text(log, 134), "the trial's process was killed by signal 6 (Aborted)");
  EXPECT_EQ(failure_text(dir.path() / "absent.txt", 9),
            "the trial's process ended with exit code 9");
}

TEST(TuneTrials, TheObjectiveIsHeldOutDataFirstAndEveryChoiceIsChecked) {
  const ModelSpec spec = *builtin_spec("disc-2");
  DataSplit data;
  EXPECT_EQ(objective_metric("", spec, data, false), Metric::Loss);
  data.test.samples = 10;
  EXPECT_EQ(objective_metric("", spec, data, false), Metric::TestAccuracy);
  EXPECT_EQ(objective_metric("", spec, data, true), Metric::TestLoss);
  data.validation.samples = 5;
  EXPECT_EQ(objective_metric("", spec, data, false), Metric::ValAccuracy);
  EXPECT_EQ(objective_metric("loss", spec, data, false), Metric::Loss);
  expect_user_error([&] { objective_metric("val_accuracy", spec, data, true); },
                    {"--objective val_accuracy", "regression", "no accuracy"});
  expect_user_error([&] { objective_metric("bleu", spec, data, false); },
                    {"--objective 'bleu'", "unknown", "expected one of", "val_accuracy"});
  DataSplit none;
  expect_user_error([&] { objective_metric("val_loss", spec, none, false); },
                    {"--objective val_loss", "no validation split", "data.validation_split"});
  expect_user_error([&] { objective_metric("test_loss", spec, none, false); },
                    {"--objective test_loss", "no test split"});
}

}  // namespace
}  // namespace xo

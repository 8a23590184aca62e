// The reports of `crossover tune`: results.json written and read back exactly (NaN as null), a
// wrong schema or a missing field named, results.csv best first with quoting, the terminal's "-"
// for what was not measured, and the page in headless Chromium with its trials and curves charts.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "core/file.h"
#include "report/tune_json.h"
#include "report/tune_text.h"
#include "support/chromium.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using testing::expect_user_error;
namespace fs = std::filesystem;

TuneRecord fixture() {
  TuneRecord r;
  r.model = "mnist-mlp";
  r.spec_toml = "[model]\nname = \"mnist-mlp\"\n";
  r.vary = {"lr=0.1,0.01", "dropout.p=0,0.5"};
  r.objective = "val_accuracy";
  r.higher_is_better = true;
  r.max_epochs = 9;
  r.halving = HalvingSettings{1, 3};
  r.rungs = {1, 3, 9};
  r.mode = "grid";
  auto trial = [](const char* id, const char* lr, const char* p, TrialStatus s, double objective,
                  int epochs, double seconds) {
    TrialRecord t;
    t.id = id;
    t.values = {{"lr", lr}, {"dropout.p", p}};
    t.status = s;
    t.device = "cpu";
    t.threads = 1;
    t.epochs = epochs;
    t.steps = epochs * 100;
    t.objective = objective;
    for (int e = 1; e <= epochs; ++e) {
      CurvePoint c;
      c.epoch = e;
      c.loss = 1.0 / e;
      c.val_loss = 1.1 / e;
      c.val_accuracy_percent = objective - (epochs - e);
      c.seconds = 0.5;
      t.curve.push_back(c);
      t.rung_objective.push_back(c.val_accuracy_percent);
    }
    t.train_seconds = 0.5 * epochs;
    t.process_seconds = seconds;
    t.step_ms = 1.25;
    t.concurrent = 2;
    return t;
  };
  r.trials = {trial("t1", "0.1", "0", TrialStatus::Stopped, 80, 1, 1.5),
              trial("t2", "0.1", "0.5", TrialStatus::Finished, 91.5, 9, 6.0),
              trial("t3", "0.01", "0", TrialStatus::Finished, 88, 9, 5.0),
              trial("t4", "0.01", "0.5", TrialStatus::Failed, NAN, 0, 0.2)};
  r.trials[3].error = "out of memory, \"cuda:0\"";
  r.trials[3].machine_failed = true;
  r.trials[2].resumed_differently = "the checkpoint was written in 3 batch shards";
  r.trials[3].step_ms = NAN;
  r.trials[1].dollars = 0.0125;
  r.trials[2].group = "g002";  // t3 trained fused, in a group of 3
  r.trials[2].fused = 3;
  r.decisions = {{"t2", true, 1, 3, 1, 3, 1}, {"t1", false, 1, 0, 3, 3, 1}};
  r.parallel = {{"cpu", 2, true, {{1, 2, 1000, {1000}}, {2, 1, 1500, {760, 740}}}}};
  SearchCostLine line;
  line.instance = "aws-c7i.large";
  line.device = "xeon";
  line.price_per_hour = 0.09;
  line.plans = {{1, 20, 0.0005}, {4, 8, 0.0005}};
  r.cost = {line};
  r.cost_note = "predicted";
  r.dollars_instance = "aws-c7i.large";
  r.best = "t2";
  r.wall_seconds = 9;
  r.device_seconds = 12.7;
  return r;
}

TEST(TuneReport, ResultsJsonReadsBackWhatWasWritten) {
  const TuneRecord r = fixture();
  const nlohmann::json j = to_json(r);
  EXPECT_TRUE(j["trials"][3]["objective"].is_null());
  EXPECT_EQ(j["objective_unit"], "val_accuracy_percent");
  const TuneRecord back = read_tune_record(j.dump(), "results.json");
  EXPECT_EQ(to_json(back), j);
  EXPECT_TRUE(std::isnan(back.trials[3].objective));
  EXPECT_EQ(back.trials[3].error, r.trials[3].error);
  ASSERT_TRUE(back.halving);
  EXPECT_EQ(back.halving->factor, 3);
  EXPECT_EQ(back.decisions.size(), 2u);
  EXPECT_EQ(back.trials[2].group, "g002");
  EXPECT_EQ(back.trials[2].fused, 3);
  EXPECT_TRUE(back.trials[3].machine_failed);
  EXPECT_EQ(back.trials[2].resumed_differently, r.trials[2].resumed_differently);
  // A search written before fused trials (no group, no fused) reads as trials of their own.
  nlohmann::json older = j;
  for (auto& t : older["trials"]) {
    t.erase("group");
    t.erase("fused");
    t.erase("machine_failed");
    t.erase("resumed_differently");
  }
  const TuneRecord old = read_tune_record(older.dump(), "results.json");
  EXPECT_EQ(old.trials[2].group, "");
  EXPECT_EQ(old.trials[2].fused, 1);
  EXPECT_FALSE(old.trials[3].machine_failed);
  EXPECT_EQ(old.trials[2].resumed_differently, "");
  // Trials at once not measured for a short search, said so, and read back; absent before.
  TuneRecord short_search = r;
  short_search.parallel[0].short_search = true;
  EXPECT_TRUE(
      read_tune_record(to_json(short_search).dump(), "results.json").parallel[0].short_search);
  older["parallel"][0].erase("short_search");
  EXPECT_FALSE(read_tune_record(older.dump(), "results.json").parallel[0].short_search);
  // A group size whose timing a Ctrl-C cut short was written as null by 0.2.0: the record still
  // reads (the same command continues the search), the size as unmeasured.
  nlohmann::json cut = j;
  cut["parallel"][0]["options"][1]["samples_per_second"] = nullptr;
  const TuneRecord cut_back = read_tune_record(cut.dump(), "results.json");
  EXPECT_TRUE(std::isnan(cut_back.parallel[0].options[1].samples_per_second));
}

// A search writes the machine it ran on beside its record; the record reads back without it.
TEST(TuneReport, TheMachineIsWrittenBesideTheRecord) {
  const TuneRecord r = fixture();
  MachineInfo machine;
  machine.cpu = "Test CPU";
  const nlohmann::json j = to_json(r, machine);
  EXPECT_EQ(j["machine"]["cpu"], "Test CPU");
  nlohmann::json without = j;
  without.erase("machine");
  EXPECT_EQ(without, to_json(r));
  EXPECT_EQ(to_json(read_tune_record(j.dump(), "results.json")), to_json(r));
}

TEST(TuneReport, AnotherSchemaOrAMissingFieldIsNamed) {
  nlohmann::json j = to_json(fixture());
  j["schema"] = "crossover.report/2";
  expect_user_error([&] { read_tune_record(j.dump(), "out/results.json"); },
                    {"out/results.json", "crossover.tune/1"});
  j = to_json(fixture());
  j["trials"][1].erase("epochs");
  expect_user_error([&] { read_tune_record(j.dump(), "out/results.json"); },
                    {"out/results.json", "epochs"});
  j = to_json(fixture());
  j["trials"][0]["status"] = "done";
  expect_user_error([&] { read_tune_record(j.dump(), "out/results.json"); },
                    {"unknown trial status 'done'"});
  expect_user_error([&] { read_tune_record("{not json", "out/results.json"); },
                    {"out/results.json"});
}

TEST(TuneReport, TheCsvListsTrialsBestFirstAndQuotes) {
  const std::string csv = tune_csv(fixture());
  std::vector<std::string> lines;
  for (size_t start = 0; start < csv.size();) {
    const size_t end = csv.find('\n', start);
    lines.push_back(csv.substr(start, end - start));
    start = end + 1;
  }
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("rank,trial,status,lr,dropout.p,val_accuracy_percent,epochs,", 0), 0u);
  // Whole budgets first by accuracy, then the trial halving stopped, then the failed one.
  EXPECT_EQ(lines[1].rfind("1,t2,finished,0.1,0.5,91.5,9,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("2,t3,", 0), 0u);
  EXPECT_EQ(lines[3].rfind("3,t1,stopped", 0), 0u);
  EXPECT_NE(lines[0].find(",concurrent,group,fused,"), std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find(",2,g002,3,"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[4].rfind("4,t4,failed,0.01,0.5,,0,", 0), 0u) << lines[4];
  EXPECT_NE(lines[4].find("\"out of memory, \"\"cuda:0\"\"\""), std::string::npos) << lines[4];
}

TEST(TuneReport, TheTerminalSaysWhatWasNotMeasuredAndEveryDecision) {
  const std::string text = tune_table_text(fixture());
  EXPECT_NE(text.find("best t2"), std::string::npos) << text;
  EXPECT_NE(text.find("t2 promoted to 3 epochs: 1st of 3 at 1 epoch (the best one goes on)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("t1 stopped at 1 epoch: 3rd of 3 (the best one went on)"), std::string::npos);
  EXPECT_NE(text.find("2 at once on cpu (measured fastest: 1 x 2 threads 1000 samples/s; 2 x 1 "
                      "thread 1500 samples/s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("t4: out of memory"), std::string::npos);
  // A trial not bit-identical to an uninterrupted run: marked, and why.
  EXPECT_NE(text.find("t3 ~ not bit-identical to an uninterrupted run: the checkpoint was written "
                      "in 3 batch shards"),
            std::string::npos)
      << text;
  TuneRecord short_search = fixture();
  short_search.parallel[0] = {"cpu", 2, false, {}, 0, true};
  EXPECT_NE(tune_table_text(short_search)
                .find("2 at once on cpu (not measured: a search shorter than measuring it would "
                      "take)"),
            std::string::npos);
  // The failed trial's objective and dollars: "-", never 0.
  for (size_t at = text.find("t4 "); at != std::string::npos; at = std::string::npos) {
    const std::string row = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(row.find(" - "), std::string::npos) << row;
    EXPECT_EQ(row.find("nan"), std::string::npos) << row;
    EXPECT_EQ(row.find("$0"), std::string::npos) << row;
  }
  EXPECT_NE(text.find("aws-c7i.large"), std::string::npos);
}

size_t count(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++n;
  return n;
}

TEST(TuneReport, ThePageDrawsEveryTrialAndCurveInHeadlessChromium) {
  const std::string chromium = testing::find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed: run scripts/setup";
  const testing::TempDir temp("crossover-tune-html");
  const fs::path page = temp.path() / "report.html";
  write_file_atomic(page, render_tune_html(fixture(), nlohmann::json{{"cpu", "EPYC <b>"}}));
  const std::string url = "file://" + page.string();
  const testing::Ran dom = testing::run_shell(
      "timeout 60 " + testing::shell_quote(chromium) +
          " --headless=new --no-sandbox --disable-gpu --no-first-run --enable-logging=stderr "
          "--v=0 --user-data-dir=" +
          testing::shell_quote((temp.path() / "profile").string()) + " --dump-dom " +
          testing::shell_quote(url),
      temp.path() / "dom.err");
  std::cout << "[ chromium ] --dump-dom took " << dom.seconds << " s\n";
  ASSERT_EQ(dom.status, 0) << dom.err;
  EXPECT_EQ(count(dom.out, "id=\"trials-chart\""), 1u);
  EXPECT_EQ(count(dom.out, "id=\"curves-chart\""), 1u);
  // One mark per trial with an objective (the failed one has none), each titled with its id.
  EXPECT_EQ(count(dom.out, "<circle class=\"trial"), 3u) << dom.out;
  EXPECT_EQ(count(dom.out, "<title>t2 lr=0.1 dropout.p=0.5"), 2u);  // its dot and its curve
  // t1 (1.5 s, 80%), t3 (5 s, 88%) and t2 (6 s, 91.5%): each beats every cheaper trial.
  EXPECT_EQ(count(dom.out, "class=\"trial front\""), 3u);
  EXPECT_EQ(count(dom.out, "<polyline class=\"curve\""), 3u) << dom.out;
  // Each curve's end marked: t1, stopped after one epoch, is that point alone.
  EXPECT_EQ(count(dom.out, "<circle class=\"curve-end\""), 3u);
  EXPECT_NE(dom.out.find("EPYC &lt;b&gt;"), std::string::npos);
  EXPECT_TRUE(testing::page_messages(dom.err, url).empty()) << dom.err;
}

}  // namespace
}  // namespace xo

// A run measured while other processes were busy on its CPUs is marked in every output: the
// terminal's table ("!" and the warning under it), results.json (timings_contaminated and the
// figure), and the HTML report's speed table; a quiet run is marked nowhere.
#include <gtest/gtest.h>

#include <string>

#include "report/html.h"
#include "report/report_json.h"
#include "report/terminal.h"

namespace xo {
namespace {

ReportRun run_with_other_load(const std::string& model, double other_cores) {
  ReportRun run;
  run.run.result.model = model;
  run.run.result.device.id = "cpu";
  run.run.result.step_ms.count = 3;
  run.run.result.step_ms.median = 2.0;
  Utilisation u;
  u.interval_s = 0.1;
  u.samples = 10;
  u.mean_other_cores = other_cores;
  run.run.utilisation = u;
  return run;
}

Report busy_and_quiet() {
  Report report;
  report.kind = "run";
  report.title = "busy";
  report.created = "2026-11-23T10:00:00Z";
  report.runs = {run_with_other_load("busy-model", 1.02), run_with_other_load("quiet-model", 0.03)};
  return report;
}

TEST(BusyMachine, ContaminationStartsAtAQuarterOfACore) {
  Utilisation u;
  EXPECT_FALSE(timings_contaminated(u));  // not measured: not claimed either way
  u.mean_other_cores = 0.24;
  EXPECT_FALSE(timings_contaminated(u));
  EXPECT_EQ(contamination_warning(u, "x"), "");
  u.mean_other_cores = kContaminatingCores;
  EXPECT_TRUE(timings_contaminated(u));
  EXPECT_EQ(
      contamination_warning(u, "this run")
          .rfind("other processes kept 0.2 cores busy on average during this run: its timings are "
                 "contaminated",
                 0),
      0u);
}

// A CPU run on more threads than the cores the others leave free is told how many to use; one
// thread, or a GPU run, only to measure again.
TEST(BusyMachine, TheWarningSaysHowManyThreadsLeaveTheBusyCoresAlone) {
  Utilisation u;
  u.mean_other_cores = 1.02;
  EXPECT_NE(contamination_warning(u, "x", 2).find("or with --threads 1 to leave the busy cores"),
            std::string::npos);
  EXPECT_NE(contamination_warning(u, "x", 8).find("--threads 7"), std::string::npos);
  EXPECT_EQ(contamination_warning(u, "x", 1).find("--threads"), std::string::npos);
  EXPECT_EQ(contamination_warning(u, "x", 0).find("--threads"), std::string::npos);
  u.mean_other_cores = 2.6;
  EXPECT_NE(contamination_warning(u, "x", 8).find("--threads 5"), std::string::npos);
}

TEST(BusyMachine, TheTerminalMarksTheRunAndSaysWhy) {
  const std::string s = summary_text(busy_and_quiet(), "out", false);
  EXPECT_NE(s.find("2.0000!"), std::string::npos) << s;
  EXPECT_NE(s.find("! other processes kept 1.0 cores busy on average during busy-model on cpu"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("during quiet-model"), std::string::npos) << s;
}

TEST(BusyMachine, ResultsJsonSaysWhichRunsAreContaminated) {
  const nlohmann::json j = to_json(busy_and_quiet());
  EXPECT_EQ(j["runs"][0]["timings_contaminated"], true);
  EXPECT_DOUBLE_EQ(j["runs"][0]["utilisation"]["mean_other_cores"].get<double>(), 1.02);
  EXPECT_EQ(j["runs"][1]["timings_contaminated"], false);
}

TEST(BusyMachine, TheHtmlReportWarnsBesideTheSpeedTable) {
  const std::string html = render_html_report(busy_and_quiet());
  EXPECT_NE(html.find("busy-model !"), std::string::npos);
  EXPECT_NE(html.find("other processes kept 1.0 cores busy on average during busy-model on cpu"),
            std::string::npos);
  EXPECT_EQ(html.find("quiet-model !"), std::string::npos);
}

}  // namespace
}  // namespace xo

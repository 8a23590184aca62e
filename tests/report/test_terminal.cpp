// Names from files in the terminal's tables and in results.csv: control characters shown, never
// sent; a cell a spreadsheet would run as a formula made text.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "report/files.h"
#include "report/table.h"
#include "report/terminal.h"

namespace xo {
namespace {

Report report_of(const std::vector<std::pair<std::string, std::string>>& model_and_axis) {
  Report report;
  report.kind = "run";
  for (const auto& [model, axis] : model_and_axis) {
    ReportRun run;
    run.run.result.model = model;
    run.run.result.device.id = "cpu";
    run.run.axis = axis;
    report.runs.push_back(run);
  }
  return report;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TerminalTable, ANameWithControlsStaysOneRowAndSendsNothing) {
  Table t({"model", "params"});
  t.add_row({"two\nlines\x1b[2J", "70"});
  t.add_row({"plain", "1,234"});
  const std::string s = t.render();
  EXPECT_EQ(s.find('\x1b'), std::string::npos) << s;
  const std::vector<std::string> lines = lines_of(s);
  ASSERT_EQ(lines.size(), 4u) << s;  // header, rule, two rows
  EXPECT_EQ(lines[2].rfind("two\\nlines\\x1b[2J", 0), 0u) << lines[2];
  EXPECT_EQ(lines[2].size(), lines[3].size()) << "columns aligned to the escaped width";
}

TEST(TerminalSummary, ModelNamesAreEscapedInTheTableAndTheNotes) {
  Report report = report_of({{"red\x1b[31m", ""}});
  report.runs[0].run.result.resumed_at_step = 5;  // a note that names the model
  const std::string s = summary_text(report, "out", false);
  EXPECT_EQ(s.find('\x1b'), std::string::npos) << s;
  EXPECT_NE(s.find("note: red\\x1b[31m on cpu resumed"), std::string::npos) << s;
}

// A run resumed in another number of batch shards or ranks: its figures marked, and why.
TEST(TerminalSummary, ARunNotBitIdenticalToAnUninterruptedOneIsMarkedWithWhy) {
  Report report = report_of({{"disc-4", ""}, {"disc-5", ""}});
  for (ReportRun& run : report.runs) {
    run.run.result.epochs.push_back({});
    run.run.result.final_train_error = 1.5;
  }
  report.runs[1].run.result.resumed_differently = "the checkpoint was written by 2 ranks";
  const std::string s = summary_text(report, "out", false);
  EXPECT_EQ(s.find("1.50%~"), s.rfind("1.50%~")) << s;  // one row marked
  EXPECT_NE(s.find("1.50%~"), std::string::npos) << s;
  EXPECT_NE(s.find("~ disc-5 on cpu: not bit-identical to an uninterrupted run: the checkpoint was "
                   "written by 2 ranks"),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("~ disc-4"), std::string::npos) << s;
}

// Counts are written whole (11201190, not 1.12012e+07), and a data-parallel run's ranks, the time
// its gradient sum took beyond backward and the bytes summed per step in the last three columns
// (empty for one process).
TEST(ResultsCsv, CountsAreWholeAndADataParallelRunSaysWhatItSummed) {
  Report report = report_of({{"disc-12", "ranks"}, {"disc-12", "ranks"}});
  for (ReportRun& run : report.runs) {
    run.run.layers = 12;
    run.run.result.params = 11201190;
  }
  report.runs[1].run.result.ranks = 2;
  report.runs[1].run.result.communicate_ms = 7.5;
  report.runs[1].run.result.reduced_bytes = 44806560;
  report.runs[1].run.result.hosts = 2;
  report.runs[1].run.result.predicted_communicate_ms = 6.25;
  const std::vector<std::string> lines = lines_of(runs_csv(report));
  ASSERT_EQ(lines.size(), 3u);
  const std::string header = lines[0];
  const std::string tail =
      "ranks,communicate_ms,reduced_bytes_per_step,hosts,predicted_communicate_ms";
  EXPECT_EQ(header.substr(header.size() - tail.size()), tail) << header;
  EXPECT_EQ(lines[1].rfind("disc-12,12,11201190,cpu,ranks,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[1].substr(lines[1].size() - 6), ",1,,,,") << lines[1];
  EXPECT_EQ(lines[2].substr(lines[2].size() - 22), ",2,7.5,44806560,2,6.25") << lines[2];
}

TEST(ResultsCsv, FormulaCellsAreTextAndControlsAreEscaped) {
  const Report report = report_of({{"=HYPERLINK(\"http://x\",\"y\")", "depth"},
                                   {"+1", "-axis"},
                                   {"@SUM(A1)", ""},
                                   {"\tlead", ""},
                                   {"line\nbreak\x1b[0m", ""},
                                   {"disc-3, wide", ""},
                                   {"-", ""},
                                   {"ok-name", ""}});
  const std::vector<std::string> lines = lines_of(runs_csv(report));
  ASSERT_EQ(lines.size(), 9u) << "one line per run: a newline in a name is escaped";
  auto starts = [&](size_t row, const std::string& prefix) {
    EXPECT_EQ(lines[row].rfind(prefix, 0), 0u) << lines[row];
  };
  // The apostrophe goes inside the quotes that the quote characters ask for (RFC 4180).
  starts(1, "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",");
  EXPECT_NE(lines[1].find(",depth,"), std::string::npos) << lines[1];
  starts(2, "'+1,");
  EXPECT_NE(lines[2].find(",'-axis,"), std::string::npos) << lines[2];
  starts(3, "'@SUM(A1),");
  starts(4, "'\\tlead,");
  starts(5, "line\\nbreak\\x1b[0m,");
  starts(6, "\"disc-3, wide\",");
  starts(7, "'-,");
  starts(8, "ok-name,0,0,cpu,");
}

}  // namespace
}  // namespace xo

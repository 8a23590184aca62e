// report.html: the page is parsed, not eyeballed. String tests check the SVG marks (series,
// crossover, timelines, time split), escaping, missing and null fields and non-finite numbers;
// the browser test loads the page in headless Chromium and checks the DOM it built, that the page
// logged nothing, and that a screenshot has content.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/file.h"
#include "report/files.h"
#include "report/html.h"
#include "report/report_json.h"
#include "support/chromium.h"
#include "support/expect_error.h"
#include "support/file_size_limit.h"
#include "support/temp_dir.h"

namespace xo {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using testing::find_chromium;
using testing::page_messages;
using testing::Ran;
using testing::run_shell;
using testing::shell_quote;

constexpr double kDepths[] = {2, 4, 6, 8, 10};
constexpr double kParams[] = {1e3, 1e4, 1e5, 1e6, 1e7};
// Seconds per 100 epochs: the CPU wins the small models, the GPU from ~701k parameters.
constexpr double kCpuSeconds[] = {0.005, 0.01, 0.04, 0.6, 6.0};
constexpr double kGpuSeconds[] = {0.08, 0.09, 0.1, 0.5, 2.0};

json utilisation(int samples, bool gpu) {
  json u = {{"interval_s", 0.1}};
  json t = json::array(), cpu = json::array(), rss = json::array(), g = json::array(),
       mem = json::array(), power = json::array();
  for (int i = 0; i < samples; ++i) {
    t.push_back(0.1 * i);
    cpu.push_back(40 + 50 * std::sin(i * 0.3) * std::sin(i * 0.3));
    rss.push_back(100 + 2.0 * i);
    g.push_back(gpu ? json(70 + i % 20) : json());
    mem.push_back(gpu ? json(900 + i) : json());
    power.push_back(gpu ? json(150 + i % 30) : json());
  }
  u["t_s"] = t;
  u["cpu_percent"] = cpu;
  u["rss_mib"] = rss;
  u["gpu_percent"] = gpu ? g : json();
  u["gpu_memory_mib"] = gpu ? mem : json();
  u["gpu_power_w"] = gpu ? power : json();
  return u;
}

json run(const std::string& device, int i) {
  const bool gpu = device != "cpu";
  const double seconds = gpu ? kGpuSeconds[i] : kCpuSeconds[i];
  const double step_ms = seconds * 1e3 / 100 / 10;  // 10 steps an epoch
  json r = {{"model", "disc-" + std::to_string(static_cast<int>(kDepths[i]))},
            {"device", device},
            {"params", static_cast<int64_t>(kParams[i])},
            {"layers", static_cast<int>(kDepths[i])},
            {"axis", {{"name", "depth"}, {"value", kDepths[i]}}},
            {"data", "disc (1000 samples)"},
            {"batch", 100},
            {"epochs", 100},
            {"step_ms",
             {{"median", step_ms}, {"p10", step_ms * 0.9}, {"p90", step_ms * 1.1}, {"cv", 0.03}}},
            {"seconds_per_epoch", seconds / 100},
            {"seconds_per_100_epochs", seconds},
            {"gflops", 12.3 * (i + 1)},
            {"peak_fraction", 0.031 * (i + 1)},
            {"final_loss", 0.1},
            {"final_train_error_percent", 1.2},
            {"final_test_accuracy_percent", json()},
            {"phases_ms",
             {{"data", step_ms * 0.05},
              {"forward", step_ms * 0.4},
              {"backward", step_ms * 0.45},
              {"optimizer", step_ms * 0.1}}},
            {"layers_profile", json::array({{{"name", "0 linear"},
                                             {"forward_ms", step_ms * 0.2},
                                             {"backward_ms", step_ms * 0.25},
                                             {"gflops", 10.2},
                                             {"peak_fraction", 0.026},
                                             {"bound", "FLOPs"}},
                                            {{"name", "1 linear"},
                                             {"forward_ms", step_ms * 0.2},
                                             {"backward_ms", step_ms * 0.2},
                                             {"gflops", json()},
                                             {"peak_fraction", json()},
                                             {"bound", json()}}})},
            {"utilisation", utilisation(5 + 4 * i, gpu)},
            {"peak_rss_mib", 120.5},
            {"mean_cpu_percent", 95.0},
            {"mean_gpu_percent", gpu ? json(80.0) : json()}};
  return r;
}

// A sweep over 2 devices × 5 depths with one crossover, predictions and costs.
json fixture() {
  json series = json::array(), runs = json::array();
  for (const std::string device : {"cpu", "cuda:0"}) {
    json points = json::array();
    for (int i = 0; i < 5; ++i) {
      const double s = device == "cpu" ? kCpuSeconds[i] : kGpuSeconds[i];
      points.push_back({{"axis_value", kDepths[i]},
                        {"params", kParams[i]},
                        {"seconds_per_100_epochs", s},
                        {"step_ms", s * 1e3 / 1000}});
      runs.push_back(run(device, i));
    }
    series.push_back({{"device", device}, {"points", points}});
  }
  return {
      {"schema", "crossover.report/2"},
      {"kind", "sweep"},
      {"title", "crossover sweep: disc-2 ... disc-10"},
      {"created", "2026-11-22T18:00:00Z"},
      {"machine",
       {{"cpu", "AMD EPYC 7B13"},
        {"logical_cpus", 2},
        {"memory_gib", 23.4},
        {"os", "Linux 6.1"},
        {"compiler", "GNU 12.2.0"},
        {"flags", "Release: -O3"},
        {"crossover", "0.1.0"},
        {"devices", {"cpu", "cuda:0"}},
        {"devices_unavailable", json::array()},
        {"libraries", {{"oneDNN", "2.6.3"}}},
        {"avx512", false}}},
      {"peaks",
       {{{"device", "cpu"},
         {"name", "AMD EPYC 7B13"},
         {"matmul_gflops", 391.2},
         {"bandwidth_gbs", 21.5},
         {"probed", "2026-11-22T17:00:00Z"},
         {"cached", true}},
        {{"device", "cuda:0"},
         {"name", "NVIDIA A10G"},
         {"matmul_gflops", 25000.0},
         {"bandwidth_gbs", 600.0},
         {"probed", "2026-11-22T17:00:00Z"},
         {"cached", false}}}},
      {"runs", runs},
      {"sweep",
       {{"axis", "depth"},
        {"x", "params"},
        {"series", series},
        {"crossovers",
         {{{"faster", "cuda:0"}, {"slower", "cpu"}, {"axis_value", 7.3}, {"params", 701000}}}}}},
      {"predictions",
       {{{"device", "h100-sxm"},
         {"name", "NVIDIA H100 SXM5"},
         {"model", "disc-10"},
         {"step_ms", 0.02},
         {"measured_step_ms", json()},
         {"error_percent", json()},
         {"bound", "FLOPs"},
         {"assumptions", {"datasheet rates x 0.7", "fixed costs as probed"}}},
        {{"device", "cuda:0"},
         {"name", "NVIDIA A10G"},
         {"model", "disc-10"},
         {"step_ms", 0.21},
         {"measured_step_ms", 0.2},
         {"error_percent", 5.0},
         {"bound", "overhead"},
         {"assumptions", {"probed rates"}}}}},
      {"cost",
       {{"assumptions",
         {{"lifetime_years", 3},
          {"utilisation_fraction", 0.5},
          {"electricity_usd_per_kwh", 0.15},
          {"host_power_w", 150}}},
        {"model", "disc-10"},
        {"epochs", 100},
        {"instances",
         {{{"id", "aws-g5.xlarge"},
           {"provider", "AWS"},
           {"name", "g5.xlarge"},
           {"device", "a10g"},
           {"run_hours", 0.01},
           {"on_demand_usd", 0.01},
           {"spot_usd", json()},
           {"predicted", true},
           {"source", "aws pricing page"},
           {"date", "2025-01-01"}}}},
        {"ownership",
         {{{"device", "rtx-4090"},
           {"name", "GeForce RTX 4090"},
           {"price_usd", 1800},
           {"run_usd", 0.002},
           {"hourly_capital_usd", 0.13},
           {"hourly_power_usd", 0.09},
           {"predicted", true}}}},
        {"break_even",
         {{{"device", "rtx-4090"},
           {"instance", "aws-g5.xlarge"},
           {"hours_per_month", 120.5},
           {"payback_months", json()},
           {"at_hours_per_month", 160}}}}}},
      {"advice",
       {"Fastest here: cpu, 50.0 µs/step (measured).", "cuda:0 is faster above 701k parameters."}},
      {"complete", true}};
}

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size()))
    ++n;
  return n;
}

// A word standing alone, in any case ("nan" in "financial" does not count). `word` is lower case.
bool has_word(const std::string& html, const std::string& word) {
  std::string lower = html;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  auto part_of_word = [&](size_t i) {
    return i < lower.size() &&
           (std::isalnum(static_cast<unsigned char>(lower[i])) || lower[i] == '_');
  };
  for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
    if ((at == 0 || !part_of_word(at - 1)) && !part_of_word(at + word.size())) return true;
  }
  return false;
}

TEST(HtmlReport, SweepChartHasOneSeriesPerDeviceAndTheCrossover) {
  const std::string html = render_html_report(fixture());
  EXPECT_EQ(count(html, "<svg class=\"sweep\""), 1u);
  EXPECT_EQ(count(html, "class=\"series\""), 2u);
  EXPECT_EQ(count(html, "<g class=\"series\" data-device=\"cpu\" data-points=\"5\">"), 1u);
  EXPECT_EQ(count(html, "<g class=\"series\" data-device=\"cuda:0\" data-points=\"5\">"), 1u);
  EXPECT_EQ(count(html, "class=\"crossover\""), 1u);
  EXPECT_NE(html.find("cuda:0 faster above 701k params"), std::string::npos);
  // 1000x between the fastest and slowest point: a log time axis, and it says so.
  EXPECT_NE(html.find("time per 100 epochs (log scale)"), std::string::npos);
  EXPECT_NE(html.find("parameters (log scale)"), std::string::npos);
  // Power-of-ten tick labels on x.
  for (const char* tick : {">1k<", ">10k<", ">100k<", ">1M<", ">10M<"})
    EXPECT_NE(html.find(tick), std::string::npos) << tick;
}

TEST(HtmlReport, NarrowTimeRangeUsesALinearAxis) {
  json doc = fixture();
  for (json& s : doc["sweep"]["series"]) {
    for (json& p : s["points"])
      p["seconds_per_100_epochs"] = 1.0 + p["axis_value"].get<double>() / 10;
  }
  const std::string html = render_html_report(doc);
  EXPECT_NE(html.find("time per 100 epochs (linear scale)"), std::string::npos);
}

TEST(HtmlReport, TimelinesAndTimeSplit) {
  const std::string html = render_html_report(fixture());
  // 10 runs have a timeline; at most 6 are drawn, each device's longest among them.
  EXPECT_EQ(count(html, "<svg class=\"timeline\""), 6u);
  EXPECT_EQ(count(html, "data-run=\"disc-10 on cpu\" viewBox"), 1u);
  EXPECT_EQ(count(html, "data-run=\"disc-10 on cuda:0\" viewBox"), 1u);
  EXPECT_EQ(count(html, "data-metric=\"cpu_percent\""), 6u);
  EXPECT_EQ(count(html, "data-metric=\"rss_mib\""), 6u);
  EXPECT_GE(count(html, "data-metric=\"gpu_percent\""), 1u);
  EXPECT_NE(html.find("Showing 6 of 10 runs"), std::string::npos);
  // One stacked bar per run, four phases each.
  EXPECT_EQ(count(html, "<svg class=\"phases\""), 1u);
  for (const char* phase : {"data", "forward", "backward", "optimizer"}) {
    EXPECT_EQ(count(html, std::string("data-phase=\"") + phase + "\""), 10u) << phase;
  }
  EXPECT_NE(html.find("<svg class=\"achieved\""), std::string::npos);
}

TEST(HtmlReport, SectionsInOrder) {
  const std::string html = render_html_report(fixture());
  size_t last = 0;
  for (const char* id : {"advice", "sweep", "results", "peaks", "time-split", "layers",
                         "utilisation", "predictions", "cost", "machine"}) {
    const size_t at = html.find(std::string("<section id=\"") + id + "\">");
    ASSERT_NE(at, std::string::npos) << id;
    EXPECT_GT(at, last) << id;
    last = at;
  }
}

TEST(HtmlReport, FormatsTimesCountsAndPercentages) {
  const std::string html = render_html_report(fixture());
  EXPECT_NE(html.find(">5.00 µs<"), std::string::npos);  // disc-2 on cpu: 0.005 ms a step
  EXPECT_NE(html.find(">10,000<"), std::string::npos);   // params, exact in tables
  EXPECT_NE(html.find(">10,000,000<"), std::string::npos);
  EXPECT_NE(html.find(">3.1%<"), std::string::npos);    // peak fraction 0.031
  EXPECT_NE(html.find(">6.00 s<"), std::string::npos);  // 6 s per 100 epochs
  EXPECT_NE(html.find(">$1,800<"), std::string::npos);
  EXPECT_NE(html.find("+5.0%"), std::string::npos);  // prediction error
}

TEST(HtmlReport, EscapesStringsFromTheDocument) {
  json doc = fixture();
  const std::string evil = "<script>alert(1)</script>";
  doc["title"] = evil;
  doc["runs"][0]["model"] = evil;
  doc["runs"][1]["device"] = "cpu\" onmouseover=\"alert(2)";
  doc["sweep"]["series"][0]["device"] = "<img src=x onerror=alert(3)>";
  doc["advice"].push_back(evil);
  doc["machine"]["<b>key</b>"] = evil;
  doc["predictions"][0]["assumptions"].push_back(evil);
  doc["cost"]["instances"][0]["source"] = evil;
  const std::string html = render_html_report(doc);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>key"), std::string::npos);
  EXPECT_EQ(html.find("\" onmouseover"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("data-device=\"&lt;img src=x onerror=alert(3)&gt;\""), std::string::npos);
  EXPECT_NE(html.find("cpu&quot; onmouseover=&quot;alert(2)"), std::string::npos);
}

TEST(HtmlReport, MachineSectionShowsTheCommitAndTheEscapedCommandLine) {
  Report report = read_report(fixture(), "fixture.json", ReadMode::Lenient);
  Manifest m;
  m.build.commit = "0123abcd-dirty";
  m.build.type = "Release";
  m.command_line = "crossover run --models '<b>x</b>'";
  report.manifest = m;
  const std::string html = render_html_report(report);
  EXPECT_NE(html.find("0123abcd-dirty"), std::string::npos);
  EXPECT_NE(html.find("Release, no CUDA"), std::string::npos);
  EXPECT_NE(html.find("crossover run --models &#39;&lt;b&gt;x&lt;/b&gt;&#39;"), std::string::npos)
      << html.substr(html.find("command line"), 200);
}

TEST(HtmlReport, IsSelfContained) {
  const std::string html = render_html_report(fixture());
  for (const char* loads : {"<script", "<link", "<img", "<iframe", "src=", "href=\"http", "url(",
                            "@import", "@font-face"}) {
    EXPECT_EQ(html.find(loads), std::string::npos) << loads;
  }
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
}

TEST(HtmlReport, OmitsMissingSections) {
  const json doc = {{"schema", "crossover.report/2"},
                    {"kind", "run"},
                    {"title", "crossover run: disc-4"},
                    {"runs", {{{"model", "disc-4"}, {"device", "cpu"}, {"params", 1234}}}}};
  const std::string html = render_html_report(doc);
  EXPECT_NE(html.find("<section id=\"results\">"), std::string::npos);
  for (const char* absent :
       {"id=\"advice\"", "id=\"sweep\"", "id=\"peaks\"", "id=\"time-split\"", "id=\"layers\"",
        "id=\"utilisation\"", "id=\"predictions\"", "id=\"cost\"", "id=\"machine\"",
        "class=\"series\"", "class=\"timeline\"", "class=\"phases\"", "partial: interrupted"}) {
    EXPECT_EQ(html.find(absent), std::string::npos) << absent;
  }
  EXPECT_NE(html.find(">1,234<"), std::string::npos);
  // Documents of every odd shape render without throwing.
  for (const json& odd :
       {json(), json::object(), json::array(), json(42), json("text"),
        json{{"runs", 5}, {"sweep", "x"}, {"machine", json::array()}, {"peaks", {1, 2}}},
        json{{"runs", {json(), 3, {{"step_ms", 2}, {"phases_ms", {{"forward", "fast"}}}}}},
             {"sweep", {{"series", {{{"device", 1}, {"points", {{{"params", "many"}}}}}}}}},
             {"cost", {{"instances", {{{"run_hours", json::array()}}}}}}}}) {
    EXPECT_NO_THROW({
      const std::string page = render_html_report(odd);
      EXPECT_NE(page.find("</html>"), std::string::npos);
      EXPECT_FALSE(has_word(page, "null"));
    }) << odd.dump();
  }
}

TEST(HtmlReport, NullsReadNotApplicable) {
  json doc = fixture();
  json& r = doc["runs"][0];
  r["gflops"] = json();
  r["peak_fraction"] = json();
  r["step_ms"] = json();
  r["layers"] = json();
  doc["machine"]["nvidia_driver"] = json();
  const std::string html = render_html_report(doc);
  EXPECT_GE(count(html, "<span class=\"na\">n/a</span>"), 10u);
  EXPECT_FALSE(has_word(html, "null"));
  EXPECT_FALSE(has_word(html, "nan"));
  // A run without a test set, a prediction without a measurement, a spot price and a payback
  // that are null: all read n/a in their rows.
  const size_t spot = html.find("<table class=\"instances\">");
  ASSERT_NE(spot, std::string::npos);
  EXPECT_NE(html.find("n/a", spot), std::string::npos);
}

TEST(HtmlReport, PartialBanner) {
  json doc = fixture();
  EXPECT_EQ(render_html_report(doc).find("partial: interrupted"), std::string::npos);
  doc["complete"] = false;
  EXPECT_NE(render_html_report(doc).find("partial: interrupted"), std::string::npos);
}

TEST(HtmlReport, NonFiniteNumbersAreNeverPrinted) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  json doc = fixture();
  json& r = doc["runs"][0];
  r["step_ms"]["median"] = nan;
  r["gflops"] = inf;
  r["peak_fraction"] = -inf;
  r["seconds_per_100_epochs"] = nan;
  r["phases_ms"]["forward"] = nan;
  r["layers_profile"][0]["forward_ms"] = inf;
  r["utilisation"]["cpu_percent"][2] = nan;
  r["utilisation"]["t_s"][3] = inf;
  doc["sweep"]["series"][0]["points"][1]["seconds_per_100_epochs"] = nan;
  doc["sweep"]["series"][1]["points"][2]["params"] = inf;
  doc["sweep"]["crossovers"][0]["params"] = nan;
  doc["predictions"][0]["step_ms"] = nan;
  doc["cost"]["instances"][0]["on_demand_usd"] = inf;
  doc["cost"]["assumptions"]["utilisation_fraction"] = nan;
  doc["machine"]["memory_gib"] = nan;
  doc["peaks"][0]["matmul_gflops"] = inf;
  for (const json& d : {doc, json::parse(doc.dump())}) {  // set in code, and as parsed (null)
    const std::string html = render_html_report(d);
    EXPECT_FALSE(has_word(html, "nan"));
    EXPECT_FALSE(has_word(html, "inf"));
    EXPECT_FALSE(has_word(html, "null"));
    EXPECT_EQ(html.find("NaN"), std::string::npos);
    // The two points without a finite coordinate are left out of their series.
    EXPECT_EQ(count(html, "data-device=\"cpu\" data-points=\"4\""), 1u);
    EXPECT_EQ(count(html, "data-device=\"cuda:0\" data-points=\"4\""), 1u);
    EXPECT_EQ(count(html, "class=\"crossover\""), 0u);  // its position is unknown
  }
}

// Any field of the document replaced by a value of another type, an extreme number or a
// non-finite one: the page still renders and never prints "nan", "inf" or "null".
TEST(HtmlReport, SurvivesMangledDocuments) {
  const json original = fixture();
  const json leaves = original.flatten();
  std::vector<std::string> pointers;
  for (const auto& [pointer, value] : leaves.items()) {
    pointers.push_back(pointer);
    // Containers too: each parent of a leaf.
    for (size_t slash = pointer.rfind('/'); slash != std::string::npos && slash > 0;
         slash = pointer.rfind('/', slash - 1)) {
      pointers.push_back(pointer.substr(0, slash));
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  const std::vector<json> replacements = {json(),
                                          json(true),
                                          json(""),
                                          json("x"),
                                          json(0),
                                          json(-1),
                                          json(-0.0),
                                          json(1e308),
                                          json(-1e308),
                                          json(5e-324),
                                          json(1e-300),
                                          json(nan),
                                          json(inf),
                                          json(-inf),
                                          json::array(),
                                          json::object(),
                                          json::array({1, "a", json()}),
                                          json{{"k", nan}},
                                          json(std::numeric_limits<int64_t>::min()),
                                          json(std::numeric_limits<uint64_t>::max())};
  std::mt19937 rng(42);
  constexpr int kDocuments = 300, kChangesPerDocument = 4;
  for (int d = 0; d < kDocuments; ++d) {
    json doc = original;
    std::string changed;
    for (int c = 0; c < kChangesPerDocument; ++c) {
      const std::string& pointer = pointers[rng() % pointers.size()];
      const json& value = replacements[rng() % replacements.size()];
      try {
        doc[json::json_pointer(pointer)] = value;
      } catch (const json::exception&) {
        continue;  // an earlier change removed the path
      }
      changed += pointer + " = " + value.dump() + "\n";
    }
    std::string html;
    ASSERT_NO_THROW(html = render_html_report(doc)) << changed;
    EXPECT_FALSE(has_word(html, "nan")) << changed;
    EXPECT_FALSE(has_word(html, "inf")) << changed;
    EXPECT_FALSE(has_word(html, "null")) << changed;
    EXPECT_NE(html.find("</html>"), std::string::npos) << changed;
  }
}

TEST(HtmlReport, WritesTheFileAtomically) {
  const testing::TempDir temp("crossover-html-write");
  const fs::path dir = temp / "report";  // not there yet: the writer creates it
  const Report report = read_report(fixture(), "fixture", ReadMode::Lenient);
  write_html_report(dir / "report.html", report);
  EXPECT_EQ(read_file(dir / "report.html"), render_html_report(report));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()),
            1);  // no temporary left
}

// A full disk while the report folder is rewritten: every file stays whole (the previous version
// or the new one, never a cut one), and the error names the file that was not written and the
// ones that were.
TEST(HtmlReport, AFullDiskLeavesEveryResultsFileWhole) {
  const testing::TempDir temp("crossover-report-full");
  Report small;
  small.kind = "run";
  small.title = "before";
  write_report(temp.path(), small);
  const std::string html_before = read_file(temp / "report.html");
  const Report report = read_report(fixture(), "fixture", ReadMode::Lenient);
  const std::string json_after = to_json(report).dump(2) + "\n";
  // Room for the new results.json and results.csv, not for the page (a few times larger).
  ASSERT_GT(render_html_report(report).size(), json_after.size() + 1024);
  {
    const testing::FileSizeLimit full(json_after.size() + 1024);
    const std::string message = testing::user_error([&] { write_report(temp.path(), report); });
    EXPECT_NE(message.find((temp / "report.html").string()), std::string::npos) << message;
    EXPECT_NE(message.find("the previous version of the file is kept"), std::string::npos)
        << message;
    EXPECT_NE(message.find("(results.json, results.csv already written)"), std::string::npos)
        << message;
  }
  EXPECT_EQ(read_file(temp / "results.json"), json_after);
  EXPECT_EQ(read_file(temp / "results.csv"), runs_csv(report));
  EXPECT_EQ(read_file(temp / "report.html"), html_before);
  EXPECT_EQ(std::distance(fs::directory_iterator(temp.path()), fs::directory_iterator()), 3);
}

// ---------------------------------------------------------------------------------------------
// The browser test.

TEST(HtmlReport, LoadsInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium not installed: run scripts/setup";
  const testing::TempDir temp("crossover-html");
  const fs::path& dir = temp.path();
  const fs::path page = dir / "report.html";
  write_html_report(page, read_report(fixture(), "fixture", ReadMode::Lenient));
  const std::string url = "file://" + page.string();
  // A profile of its own, so that parallel test runs do not share one; `timeout` turns a hang
  // into a failure.
  const std::string base =
      "timeout 60 " + shell_quote(chromium) +
      " --headless=new --no-sandbox --disable-gpu --no-first-run --enable-logging=stderr --v=0"
      " --user-data-dir=" +
      shell_quote((dir / "profile").string());

  const Ran dom = run_shell(base + " --dump-dom " + shell_quote(url), dir / "dom.err");
  std::cout << "[ chromium ] --dump-dom took " << dom.seconds << " s\n";
  ASSERT_EQ(dom.status, 0) << dom.err;
  EXPECT_NE(dom.out.find("<svg class=\"sweep\""), std::string::npos);
  EXPECT_EQ(count(dom.out, "class=\"series\""), 2u);
  EXPECT_EQ(count(dom.out, "<g class=\"series\" data-device=\"cpu\" data-points=\"5\">"), 1u);
  EXPECT_EQ(count(dom.out, "<g class=\"series\" data-device=\"cuda:0\" data-points=\"5\">"), 1u);
  EXPECT_EQ(count(dom.out, "class=\"crossover\""), 1u);
  EXPECT_GE(count(dom.out, "<svg class=\"timeline\""), 1u);
  EXPECT_GE(count(dom.out, "data-metric=\"cpu_percent\""), 1u);
  EXPECT_EQ(count(dom.out, "<svg class=\"phases\""), 1u);
  EXPECT_GE(count(dom.out, "data-phase=\"forward\""), 1u);
  const std::vector<std::string> messages = page_messages(dom.err, url);
  EXPECT_TRUE(messages.empty()) << "the page logged:\n"
                                << [&] {
                                     std::string all;
                                     for (const std::string& m : messages) all += m + "\n";
                                     return all;
                                   }();

  const fs::path png = dir / "report.png";
  const Ran shot =
      run_shell(base + " --window-size=1200,2000 --screenshot=" + shell_quote(png.string()) + " " +
                    shell_quote(url),
                dir / "shot.err");
  std::cout << "[ chromium ] --screenshot took " << shot.seconds << " s\n";
  ASSERT_EQ(shot.status, 0) << shot.err;
  ASSERT_TRUE(fs::exists(png)) << shot.err;
  // A blank 1200x2000 page compresses to a few kB; charts and tables take far more.
  constexpr uintmax_t kMoreThanBlank = 20 * 1024;
  EXPECT_GT(fs::file_size(png), kMoreThanBlank);
  EXPECT_EQ(read_file(png).substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_TRUE(page_messages(shot.err, url).empty()) << shot.err;
}

}  // namespace
}  // namespace xo

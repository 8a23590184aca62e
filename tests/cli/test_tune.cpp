// `crossover tune` as a user runs it: every trial of a grid once, concurrent trials equal to the
// same trials one at a time, halving's decisions with each promoted trial's curve unbroken, a
// search killed and started again that keeps its finished trials, the MPI scheduler on 2 and 3
// ranks, and bad input refused before any trial.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "support/cli.h"
#include "support/gpu.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using xo::testing::run_cli;

json results(const fs::path& out) { return json::parse(xo::read_file(out / "results.json")); }

// How many times a trial's `crossover train` ran: one summary line per run in its log.
int runs_of(const fs::path& out, const std::string& trial) {
  std::istringstream log(xo::read_file(out / "trials" / trial / "log.txt"));
  int runs = 0;
  for (std::string line; std::getline(log, line);)
    runs += line.find(" ms/step (median") != std::string::npos;
  return runs;
}

std::string status_of(const json& trial) { return trial.at("status").get<std::string>(); }

// The checkpoints' JSON files in `folder`, oldest first (none while it is missing).
std::vector<fs::path> checkpoint_jsons(const fs::path& folder) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The largest difference between two trials' loss curves, relative to the second's (1e-3 at
// least); the curves must be as long.
double curve_difference(const json& x, const json& y) {
  double worst = 0;
  EXPECT_EQ(x.at("curve").size(), y.at("curve").size()) << x.at("id");
  for (size_t e = 0; e < std::min(x.at("curve").size(), y.at("curve").size()); ++e) {
    const double p = x.at("curve")[e].at("loss"), q = y.at("curve")[e].at("loss");
    worst = std::max(worst, std::abs(p - q) / std::max(std::abs(q), 1e-3));
  }
  return worst;
}

TEST(Tune, AGridRunsEveryTrialOnceAndWritesTheBestSpecAndWeights) {
  xo::testing::TempDir dir("tune-grid");
  const auto r = run_cli(
      "tune disc-3 --vary lr=0.05,0.2,0.5 --vary train.batch=50,100 --epochs 3 "
      "--parallel 2 --fuse off --out out",
      dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = results(dir.path() / "out");
  EXPECT_EQ(j.at("schema"), "crossover.tune/1");
  ASSERT_EQ(j.at("trials").size(), 6u);
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("epochs"), 3);
    EXPECT_EQ(runs_of(dir.path() / "out", t.at("id")), 1);
  }
  // disc has no validation or test split: the training loss ranks the trials.
  EXPECT_EQ(j.at("objective"), "loss");
  const std::string best = j.at("best");
  ASSERT_FALSE(best.empty());
  // best.toml is the best trial's spec, with a header saying so and its trained weights as its
  // initial weights.
  std::istringstream best_lines(xo::read_file(dir.path() / "out" / "best.toml"));
  std::string best_spec;
  bool names_weights = false;
  for (std::string line; std::getline(best_lines, line);) {
    if (line == "init = \"best.safetensors\"") {
      names_weights = true;
    } else if (!line.starts_with("#")) {
      best_spec += line + "\n";
    }
  }
  EXPECT_TRUE(names_weights);
  EXPECT_EQ(best_spec, xo::read_file(dir.path() / "out" / "trials" / best / "spec.toml"));
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "best.safetensors"));
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "results.csv"));
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "report.html"));
  EXPECT_NE(r.output.find("2 at once on cpu"), std::string::npos) << r.output;
}

// Trials at once are measured (--fuse off) within a twentieth of the search's trial-steps: a
// search shorter than measuring them would take starts the most at once, saying so (measured, a
// 3-trial, 1-epoch search of lstm-small took 0.71 s where its trials alone took 0.41 s), and a
// longer one measures each count over fewer steps than --probe-steps where its share holds fewer.
TEST(Tune, TrialsAtOnceAreMeasuredWithinTheSearchsShare) {
  xo::testing::TempDir dir("tune-short");
  const auto short_search =
      run_cli("tune disc-4 --vary linear.out=8,16 --epochs 1 --fuse off --out short", dir.path());
  ASSERT_EQ(short_search.status, 0) << short_search.output;
  EXPECT_NE(short_search.output.find("at once on cpu (not measured: a search shorter than "
                                     "measuring trials at once would take)"),
            std::string::npos)
      << short_search.output;
  EXPECT_EQ(short_search.output.find("measuring 1 trial"), std::string::npos)
      << short_search.output;
  const json s = results(dir.path() / "short").at("parallel")[0];
  EXPECT_FALSE(s.at("measured").get<bool>());
  EXPECT_TRUE(s.at("short_search").get<bool>());
  EXPECT_TRUE(s.at("options").empty());
  EXPECT_EQ(s.at("k"), std::min(2u, std::max(1u, std::thread::hardware_concurrency())));
  // 2 trials x 400 epochs x 10 steps: a twentieth shared by the processes of every count.
  const auto long_search = run_cli(
      "tune disc-4 --vary lr=0.05,0.1 --epochs 400 --fuse off --probe-steps 5000 --out long",
      dir.path());
  ASSERT_EQ(long_search.status, 0) << long_search.output;
  EXPECT_NE(long_search.output.find("(measured fastest)"), std::string::npos) << long_search.output;
  const json l = results(dir.path() / "long").at("parallel")[0];
  EXPECT_TRUE(l.at("measured").get<bool>());
  EXPECT_FALSE(l.at("short_search").get<bool>());
  ASSERT_FALSE(l.at("options").empty());
  int processes = 0;
  for (const json& o : l.at("options")) processes += o.at("k").get<int>();
  const json probe = json::parse(xo::read_file(dir.path() / "long" / "parallel" / "cpu-k1-0.json"));
  EXPECT_EQ(probe.at("steps_taken"), 2 * 400 * 10 / 20 / processes);
}

// One trial at a time: the record (an fsync'd results.json, CSV and page) is written at the first
// start and at the search's end, and for the ends and starts between them at most once a second,
// not once for each (a trial's result is on disk as it ends, and a search that goes on takes it
// from there).
TEST(Tune, StartsAndEndsWriteTheRecordAtMostOnceASecond) {
  xo::testing::TempDir dir("tune-publish");
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, out.c_str(), IN_MOVED_TO), 0);
  const auto began = std::chrono::steady_clock::now();
  const auto r = run_cli(
      "tune disc-4 --vary lr=0.05,0.1,0.2 --epochs 2 --fuse off --parallel 1 --quiet --out out",
      dir.path());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ASSERT_EQ(r.status, 0) << r.output;
  int written = 0;
  alignas(inotify_event) char events[64 * 1024];
  for (ssize_t n; (n = read(watch, events, sizeof events)) > 0;) {
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(events + at);
      if (e->len > 0 && std::string(e->name) == "results.json") ++written;
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  close(watch);
  EXPECT_GE(written, 2) << "the first start and the end";
  EXPECT_LE(written, 2 + static_cast<int>(seconds))
      << "more than once a second between them (the search took " << seconds << " s)";
}

// The children of `pid` whose command line is `crossover --parked`.
std::vector<pid_t> parked_children(pid_t pid) {
  std::vector<pid_t> parked;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream children(task.path() / "children");
    for (pid_t child = 0; children >> child;) {
      const std::string cmdline = xo::read_file("/proc/" + std::to_string(child) + "/cmdline");
      if (cmdline.find(std::string("--parked") + '\0') != std::string::npos)
        parked.push_back(child);
    }
  }
  return parked;
}

// While a trial trains and the next waits for its slot, the next trial's process is started
// (parked) and takes its job when the slot frees; every trial still ends as it does, and the
// search's end leaves no process behind (this test is their reaper once the search has gone).
TEST(Tune, TheNextTrialsProcessIsStartedWhileATrialTrains) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  xo::testing::TempDir dir("tune-parked");
  const pid_t pid = xo::testing::start_crossover(
      dir.path(),
      {"tune", "disc-8", "--vary", "lr=0.05,0.1,0.2", "--epochs", "100", "--fuse", "off",
       "--parallel", "1", "--quiet", "--out", "out"},
      dir.path() / "log.txt", dir.path() / "log.txt");
  bool seen = false;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    seen = seen || !parked_children(pid).empty();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << xo::read_file(dir.path() / "log.txt");
  EXPECT_TRUE(seen) << "no trial's process was started before its slot freed";
  const json record = results(dir.path() / "out");
  for (const json& t : record.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("epochs"), 100) << t.dump();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(parked_children(getpid()).empty()) << "a parked process outlived the search";
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// `crossover --parked`, as a search starts it: its job's log and arguments come on its standard
// input, each text ending with a NUL; nothing (the search ended) ends it quietly; a log that is
// a link, or a job cut short, is refused as spawn refuses them.
TEST(Tune, AParkedProcessRunsTheJobItIsSent) {
  xo::testing::TempDir dir("parked");
  const auto run = [&](const std::string& job) {
    xo::write_file_atomic(dir.path() / "job", job);
    return run_cli("--parked < job", dir.path());
  };
  const auto idle = run("");
  EXPECT_EQ(idle.status, 0);
  EXPECT_EQ(idle.output, "");
  const auto version = run(std::string("log.txt") + '\0' + "--version" + '\0');
  EXPECT_EQ(version.status, 0) << version.output;
  EXPECT_EQ(version.output, "") << "its output goes to the job's log";
  EXPECT_EQ(xo::read_file(dir.path() / "log.txt").rfind("crossover ", 0), 0u);
  fs::create_symlink(dir.path() / "elsewhere.txt", dir.path() / "link.txt");
  const auto link = run(std::string("link.txt") + '\0' + "--version" + '\0');
  EXPECT_EQ(link.status, 127);
  EXPECT_NE(link.output.find("link.txt: cannot write the job's log there"), std::string::npos)
      << link.output;
  EXPECT_FALSE(fs::exists(dir.path() / "elsewhere.txt"));
  const auto cut = run(std::string("log.txt") + '\0' + "--version");
  EXPECT_EQ(cut.status, 127);
  EXPECT_NE(cut.output.find("ends inside a text"), std::string::npos) << cut.output;
}

// Two trials at once, each on one thread, against the same trials one after another on one
// thread: the same final parameters, bit for bit.
TEST(Tune, ConcurrentTrialsEqualTheSameTrialsOneAtATime) {
  xo::testing::TempDir dir("tune-concurrent");
  const std::string search =
      "tune disc-4 --vary lr=0.05,0.1,0.2 --epochs 4 --threads 1 --fuse off --quiet ";
  const auto together = run_cli(search + "--parallel 2 --out together", dir.path());
  ASSERT_EQ(together.status, 0) << together.output;
  const auto apart = run_cli(search + "--parallel 1 --out apart", dir.path());
  ASSERT_EQ(apart.status, 0) << apart.output;
  const json a = results(dir.path() / "together"), b = results(dir.path() / "apart");
  for (const std::string trial : {"t01", "t02", "t03"}) {
    EXPECT_EQ(xo::read_file(dir.path() / "together" / "trials" / trial / "weights.safetensors"),
              xo::read_file(dir.path() / "apart" / "trials" / trial / "weights.safetensors"))
        << trial;
  }
  int most_at_once = 0;
  for (const json& t : a.at("trials"))
    most_at_once = std::max(most_at_once, t.at("concurrent").get<int>());
  EXPECT_EQ(most_at_once, 2);
}

// Nine trials, rungs of 1, 3 and 9 epochs: every decision recorded; a promoted trial's curve runs
// unbroken from epoch 1 (resumed from its checkpoint, not trained again).
TEST(Tune, HalvingRecordsItsDecisionsAndContinuesPromotedTrials) {
  xo::testing::TempDir dir("tune-halving");
  const auto r = run_cli(
      "tune disc-3 --vary lr=0.8,0.01,0.3,0.05,1.2,0.02,0.5,0.1,0.2 --epochs 9 "
      "--halving --min-epochs 1 --factor 3 --parallel 1 --out out",
      dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = results(dir.path() / "out");
  EXPECT_EQ(j.at("rungs"), json::parse("[1, 3, 9]"));
  int full = 0, stopped = 0, promotions = 0;
  for (const json& d : j.at("decisions")) promotions += d.at("promoted").get<bool>();
  for (const json& t : j.at("trials")) {
    const int epochs = t.at("epochs");
    ASSERT_EQ(t.at("curve").size(), static_cast<size_t>(epochs));
    for (int e = 0; e < epochs; ++e) EXPECT_EQ(t.at("curve")[e].at("epoch"), e + 1);
    if (status_of(t) == "finished") ++full;
    if (status_of(t) == "stopped") ++stopped;
    // One process per rung it reached.
    EXPECT_EQ(runs_of(dir.path() / "out", t.at("id")),
              static_cast<int>(t.at("rung_objective").size()));
  }
  EXPECT_GE(full, 1);
  EXPECT_GE(stopped, 3);
  EXPECT_EQ(full + stopped, 9);
  EXPECT_GE(promotions, 3);  // at least 2 to rung 1 and 1 to rung 2
  EXPECT_NE(r.output.find("promoted to 3 epochs"), std::string::npos) << r.output;
}

TEST(Tune, ASearchKilledAndStartedAgainKeepsItsFinishedTrials) {
  xo::testing::TempDir dir("tune-killed");
  // Fused in groups of two: the first group's trials finish before the second's start.
  const std::vector<std::string> args = {"tune",     "disc-9", "--vary",     "lr=0.02,0.05,0.1,0.2",
                                         "--epochs", "100",    "--parallel", "1",
                                         "--fuse",   "2",      "--out",      "out"};
  const pid_t pid = xo::testing::start_crossover(dir.path(), args, dir.path() / "first.txt",
                                                 dir.path() / "first.txt");
  // Killed once a trial has finished (its results are written as it ends).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int finished = 0;
  while (std::chrono::steady_clock::now() < deadline && finished == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    try {
      const json now = results(dir.path() / "out");
      for (const json& t : now.at("trials")) finished += status_of(t) == "finished";
    } catch (const std::exception&) {
    }
  }
  ASSERT_GT(finished, 0) << xo::read_file(dir.path() / "first.txt");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  // Its trials' processes end with it, at their next safe point, writing their checkpoints: on a
  // loaded machine, well after it (a fixed 300 ms once let one write into the links planted
  // below).
  ASSERT_TRUE(xo::testing::wait_until_none_works_in(dir.path(), std::chrono::seconds(120)))
      << "a trial's process outlived the search by two minutes";
  // Links planted while it was stopped, where it writes its best spec and weights: replaced, and
  // the files they lead to untouched (they were once overwritten).
  std::ofstream(dir.path() / "precious.toml") << "mine";
  std::ofstream(dir.path() / "precious.bin") << "mine too";
  for (const auto& [name, target] :
       {std::pair{"best.toml", "precious.toml"}, std::pair{"best.safetensors", "precious.bin"}}) {
    fs::remove(dir.path() / "out" / name);
    fs::create_symlink(dir.path() / target, dir.path() / "out" / name);
  }
  // And in the folder of a trial not yet run: its log, result and weights (which its own process
  // writes) linked to files elsewhere, its checkpoint folder linked to a folder elsewhere.
  const fs::path t04 = dir.path() / "out" / "trials" / "t04";
  ASSERT_TRUE(fs::is_directory(t04));
  for (const char* name : {"log.txt", "result.json", "weights.safetensors"}) {
    std::ofstream(dir.path() / (std::string("precious-") + name)) << "mine";
    fs::remove(t04 / name);
    fs::create_symlink(dir.path() / (std::string("precious-") + name), t04 / name);
  }
  fs::create_directories(dir.path() / "elsewhere");
  fs::remove_all(t04 / "checkpoints");
  fs::create_directory_symlink(dir.path() / "elsewhere", t04 / "checkpoints");
  const auto again = run_cli(
      "tune disc-9 --vary lr=0.02,0.05,0.1,0.2 --epochs 100 --parallel 1 --fuse 2 "
      "--out out",
      dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("trials in out are kept"), std::string::npos) << again.output;
  const json j = results(dir.path() / "out");
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "finished");
    EXPECT_EQ(t.at("curve").size(), 100u);
  }
  // The first trial finished before the kill and did not run again.
  EXPECT_EQ(runs_of(dir.path() / "out", "t01"), 1);
  EXPECT_EQ(xo::read_file(dir.path() / "precious.toml"), "mine");
  EXPECT_EQ(xo::read_file(dir.path() / "precious.bin"), "mine too");
  for (const char* name : {"best.toml", "best.safetensors"}) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir.path() / "out" / name))) << name;
  }
  for (const char* name : {"log.txt", "result.json", "weights.safetensors"}) {
    EXPECT_EQ(xo::read_file(dir.path() / (std::string("precious-") + name)), "mine") << name;
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(t04 / name))) << name;
  }
  EXPECT_TRUE(fs::is_empty(dir.path() / "elsewhere"));
  // Another search in the same folder is refused, naming what differs.
  const auto other = run_cli("tune disc-9 --vary lr=0.3 --epochs 100 --out out", dir.path());
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.output.find("holds another search"), std::string::npos) << other.output;
}

// A fused group that fails before it writes its trials' results fails them, with its message,
// once: the interrupted result an earlier, stopped run of the search left does not start the group
// again (it did, forever, whenever a group could not resume).
TEST(Tune, AGroupFailingBeforeItsResultsFailsItsTrialsOnce) {
  xo::testing::TempDir dir("tune-group-fails");
  const std::string search =
      "tune disc-8 --vary lr=0.02,0.05 --epochs 400 --fuse 2 --checkpoint-every 20steps --out out";
  const std::vector<std::string> args = {"tune",         "disc-8",   "--vary",
                                         "lr=0.02,0.05", "--epochs", "400",
                                         "--fuse",       "2",        "--checkpoint-every",
                                         "20steps",      "--out",    "out"};
  const pid_t pid = xo::testing::start_crossover(dir.path(), args, dir.path() / "first.txt",
                                                 dir.path() / "first.txt");
  // Stopped as Ctrl-C stops it once the group has a checkpoint: its trials' results say
  // interrupted.
  const fs::path checkpoints = dir.path() / "out" / "trials" / "t01" / "checkpoints";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto has_checkpoint = [&] { return !checkpoint_jsons(checkpoints).empty(); };
  while (std::chrono::steady_clock::now() < deadline && !has_checkpoint())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(has_checkpoint()) << xo::read_file(dir.path() / "first.txt");
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const json stopped = json::parse(xo::read_file(checkpoints.parent_path() / "result.json"));
  ASSERT_TRUE(stopped.at("interrupted").get<bool>()) << stopped.dump();
  // Every checkpoint of trial 1 damaged: its resume is refused, and its group fails at its start.
  for (const auto& e : fs::directory_iterator(checkpoints)) std::ofstream(e.path()) << "damaged";
  const auto again =
      run_cli("--version >/dev/null && timeout 60 " + std::string(CROSSOVER_BINARY) + " " + search,
              dir.path());
  ASSERT_NE(again.status, 124) << "the search started its failing group again and again";
  const json j = results(dir.path() / "out");
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "failed") << t.dump();
    EXPECT_NE(t.value("error", "").find("checkpoint"), std::string::npos) << t.dump();
  }
  size_t groups = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path() / "out" / "groups"))
    ++groups;
  // The stopped run's group and the failed one (its log may continue the first's): a group
  // started again and again would leave one log each time.
  EXPECT_LE(groups, 2u) << again.output;
}

// A promoted trial whose group fails before it writes its results fails, once: its earlier
// rung's result, still in its folder, was read as the group's, so that the trial was promoted
// again and its failing group started again and again (3,168 groups in 60 s). The search is
// killed (as a crash kills it) while the promoted trial's group runs, and every checkpoint is
// damaged: the group, started again, fails at its start.
TEST(Tune, APromotedTrialsFailingGroupFailsItOnce) {
  xo::testing::TempDir dir("tune-promoted-fails");
  const std::vector<std::string> args = {"tune",      "disc-8",
                                         "--vary",    "lr=0.02,0.05,0.1,0.2",
                                         "--halving", "--min-epochs",
                                         "100",       "--factor",
                                         "4",         "--epochs",
                                         "6400",      "--fuse",
                                         "4",         "--checkpoint-every",
                                         "20steps",   "--out",
                                         "out"};
  const pid_t pid = xo::testing::start_crossover(dir.path(), args, dir.path() / "first.txt",
                                                 dir.path() / "first.txt");
  const fs::path out = dir.path() / "out";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && !fs::exists(out / "groups" / "g002.log"))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  // The promoted trial's group, then the search: killed outright (the group is not told to stop).
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream children(task.path() / "children");
    for (pid_t child = 0; children >> child;) kill(child, SIGKILL);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(fs::exists(out / "groups" / "g002.log")) << xo::read_file(dir.path() / "first.txt");
  for (const auto& trial : fs::directory_iterator(out / "trials")) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(trial.path() / "checkpoints", ec))
      std::ofstream(e.path()) << "damaged";
  }
  std::string search;
  for (const std::string& a : args) search += " " + a;
  const auto again = run_cli(
      "--version >/dev/null && timeout 60 " + std::string(CROSSOVER_BINARY) + search, dir.path());
  ASSERT_NE(again.status, 124) << "the search started its failing group again and again";
  size_t failed = 0;
  const json record = results(out);
  for (const json& t : record.at("trials")) {
    if (status_of(t) != "failed") continue;
    ++failed;
    EXPECT_NE(t.value("error", "").find("checkpoint"), std::string::npos) << t.dump();
  }
  EXPECT_EQ(failed, 1u) << again.output;
  size_t groups = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out / "groups")) ++groups;
  EXPECT_LE(groups, 3u) << again.output;
}

// A trial that diverges is recorded as such, ranked last, and the search goes on; a spec in
// another folder keeps reading its data (the trials' specs name it by an absolute path).
TEST(Tune, ADivergingTrialIsRecordedAndASpecElsewhereFindsItsData) {
  xo::testing::TempDir dir("tune-diverged");
  fs::create_directories(dir.path() / "specs");
  {
    std::ofstream csv(dir.path() / "specs" / "points.csv");
    for (int i = 0; i < 120; ++i)
      csv << (i % 7) * 0.1 << "," << (i % 5) * 0.2 << "," << (i % 2) << "\n";
    std::ofstream spec(dir.path() / "specs" / "small.toml");
    spec << "[model]\ninput = [2]\nlayers = [ { type = \"linear\", out = 8 }, { type = \"relu\" }, "
            "{ type = \"linear\", out = 2 } ]\nloss = \"cross_entropy\"\n[train]\noptimizer = { "
            "type = \"sgd\", lr = 0.1 "
            "}\nbatch = 20\nepochs = 3\n[data]\nsource = \"csv:points.csv\"\n"
            "validation_split = 0.25\n";
  }
  const auto elsewhere =
      run_cli("tune specs/small.toml --vary lr=0.1,0.5 --out elsewhere", dir.path());
  ASSERT_EQ(elsewhere.status, 0) << elsewhere.output;
  const json e = results(dir.path() / "elsewhere");
  EXPECT_EQ(e.at("objective"), "val_accuracy");
  for (const json& t : e.at("trials")) EXPECT_EQ(status_of(t), "finished") << t.dump();

  const auto r = run_cli(
      "tune disc-3 --vary lr=0.1,1e6 --vary train.optimizer.momentum=0.9 "
      "--epochs 3 --parallel 1 --out out",
      dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = results(dir.path() / "out");
  EXPECT_EQ(status_of(j.at("trials")[0]), "finished");
  EXPECT_EQ(status_of(j.at("trials")[1]), "diverged");
  EXPECT_TRUE(j.at("trials")[1].at("objective").is_null());
  EXPECT_EQ(j.at("best"), "t01");
  EXPECT_NE(r.output.find("t02 lr=1e6 train.optimizer.momentum=0.9: diverged"), std::string::npos)
      << r.output;
}

// Eight disc-4 trials (learning rates, and seeds that draw each its own disc) fused into one
// group, against the same trials one process each: every objective and curve within 1e-5, each
// trial recorded with its group, its own log line, the group's output in a log of its own.
TEST(Tune, FusedTrialsEndAsTheyDoOneProcessEach) {
  xo::testing::TempDir dir("tune-fused");
  const std::string search =
      "tune disc-4 --vary lr=0.05,0.1,0.2,0.4 --vary train.seed=1,2 --epochs 5 --parallel 1 ";
  const auto fused = run_cli(search + "--fuse 8 --out fused", dir.path());
  ASSERT_EQ(fused.status, 0) << fused.output;
  EXPECT_NE(fused.output.find("fused up to 8 per group on cpu"), std::string::npos) << fused.output;
  const auto apart = run_cli(search + "--fuse off --out apart", dir.path());
  ASSERT_EQ(apart.status, 0) << apart.output;
  const json f = results(dir.path() / "fused"), a = results(dir.path() / "apart");
  ASSERT_EQ(f.at("trials").size(), 8u);
  double worst = 0;
  for (size_t i = 0; i < 8; ++i) {
    const json& x = f.at("trials")[i];
    const json& y = a.at("trials")[i];
    EXPECT_EQ(status_of(x), "finished") << x.dump();
    EXPECT_EQ(x.at("group"), "g001");
    EXPECT_EQ(x.at("fused"), 8);
    EXPECT_EQ(y.at("group"), "");
    EXPECT_EQ(runs_of(dir.path() / "fused", x.at("id")), 1) << x.at("id");
    worst = std::max(worst, curve_difference(x, y));
  }
  EXPECT_LE(worst, 1e-5);
  EXPECT_EQ(f.at("best"), a.at("best"));
  EXPECT_TRUE(fs::exists(dir.path() / "fused" / "groups" / "g001.log"));
  EXPECT_EQ(f.at("parallel")[0].at("fused"), 8);
  EXPECT_FALSE(f.at("parallel")[0].at("measured").get<bool>()) << "--fuse 8: as asked";
}

// --fuse auto measures fused groups of 4, 16 and as many as the search has (20) before the first
// trial, and takes the largest within 5% of the fastest; no group is larger. (1,000 epochs: a
// twentieth of the search's own time holds each size's setting up and steps many times over, on a
// loaded machine and under the sanitizers too; at 200 a group of 16 set up on a machine running
// another test did not fit.)
TEST(Tune, FuseAutoTakesTheGroupSizeMeasuredFastest) {
  xo::testing::TempDir dir("tune-fuse-auto");
  const auto r = run_cli(
      "tune disc-2 --vary lr=0.05,0.1,0.2,0.3,0.4 --vary train.seed=1,2,3,4 --epochs 1000 --out "
      "out",
      dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("measuring fused groups of trials on cpu"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("per group on cpu (measured fastest)"), std::string::npos) << r.output;
  const json j = results(dir.path() / "out");
  const json& cpu = j.at("parallel")[0];
  EXPECT_TRUE(cpu.at("measured").get<bool>());
  std::vector<int> sizes;
  double best = 0;
  for (const json& o : cpu.at("options")) {
    sizes.push_back(o.at("k"));
    best = std::max(best, o.at("samples_per_second").get<double>());
  }
  EXPECT_EQ(sizes, (std::vector<int>{4, 16, 20}));
  int expected = 0;
  for (const json& o : cpu.at("options")) {
    if (o.at("samples_per_second").get<double>() >= 0.95 * best) expected = o.at("k");
  }
  EXPECT_EQ(cpu.at("fused"), expected);
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_LE(t.at("fused").get<int>(), expected);
  }
}

// A search shorter than timing group sizes would take (8 trials of one epoch: a twentieth of its
// own time holds no group's 10 steps) is not measured: its ready trials train as one group.
TEST(Tune, FuseAutoDoesNotMeasureASearchShorterThanTheMeasuring) {
  xo::testing::TempDir dir("tune-fuse-short");
  const auto r =
      run_cli("tune disc-2 --vary lr=0.05,0.1,0.2,0.3 --vary train.seed=1,2 --epochs 1 --out out",
              dir.path());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("measuring fused groups"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fused up to 8 per group on cpu (not measured: too few trials, or a "
                          "search shorter than timing group sizes would take)"),
            std::string::npos)
      << r.output;
  const json j = results(dir.path() / "out");
  const json& cpu = j.at("parallel")[0];
  EXPECT_FALSE(cpu.at("measured").get<bool>());
  EXPECT_EQ(cpu.at("fused"), 8);
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("fused").get<int>(), 8);
  }
}

// Trials fuse with those of their own architecture, batch size and data only: a width sweep's
// trials, of which no two fuse, train a process each as with --fuse off (a group of one took a
// group's one batch shard, 0.78x disc-8's speed alone), saying so; with two learning rates at each
// width, the trials of a width train as a group of two.
TEST(Tune, OnlyTrialsThatFuseWithAnotherTrainInGroups) {
  xo::testing::TempDir dir("tune-fuse-widths");
  const auto alone = run_cli(
      "tune disc-8 --vary linear.out=32,64 --epochs 2 --parallel 1 --out widths", dir.path());
  ASSERT_EQ(alone.status, 0) << alone.output;
  EXPECT_NE(alone.output.find("no two trials can train as one"), std::string::npos) << alone.output;
  const json widths = results(dir.path() / "widths");
  EXPECT_EQ(widths.at("parallel")[0].at("fused"), 0);
  for (const json& t : widths.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("group"), "") << t.dump();
  }
  const auto mixed = run_cli(
      "tune disc-8 --vary linear.out=32,64 --vary lr=0.1,0.2 --epochs 2 --out mixed", dir.path());
  ASSERT_EQ(mixed.status, 0) << mixed.output;
  EXPECT_EQ(mixed.output.find("no two trials can train as one"), std::string::npos) << mixed.output;
  const json both = results(dir.path() / "mixed");
  std::map<std::string, std::string> group_of_width;
  for (const json& t : both.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("fused"), 2) << t.dump();
    const std::string width = t.at("values")[0].at("value").get<std::string>();
    const std::string group = t.at("group").get<std::string>();
    EXPECT_FALSE(group.empty()) << t.dump();
    auto [at, fresh] = group_of_width.try_emplace(width, group);
    if (!fresh) {
      EXPECT_EQ(at->second, group) << t.dump();
    }
  }
  EXPECT_EQ(group_of_width.size(), 2u);
  EXPECT_NE(group_of_width["32"], group_of_width["64"]);
}

// On a GPU --fuse auto takes the ready trials as one group (as many as are ready: not timed),
// --fuse 2 groups of two, --fuse off a process per trial; each trial's curve within 1e-5 of its
// own process's.
TEST(Tune, GpuFuseAutoTakesTheReadyTrialsAsOneGroupEachEndingAsAlone) {
  std::string why;
  if (!xo::testing::gpu_present(&why)) GTEST_SKIP() << "no NVIDIA GPU here (" << why << ")";
  xo::testing::TempDir dir("tune-gpu-fused");
  const std::string search =
      "tune disc-4 --vary lr=0.05,0.1,0.2,0.4 --epochs 3 --device cuda:0 --parallel 1 ";
  const auto apart = run_cli(search + "--fuse off --out apart", dir.path());
  ASSERT_EQ(apart.status, 0) << apart.output;
  const auto automatic = run_cli(search + "--out auto", dir.path());
  ASSERT_EQ(automatic.status, 0) << automatic.output;
  EXPECT_NE(automatic.output.find(
                "fused up to 64 per group on cuda:0 (as many as are ready: group sizes are not "
                "timed on a GPU)"),
            std::string::npos)
      << automatic.output;
  const auto pairs = run_cli(search + "--fuse 2 --out pairs", dir.path());
  ASSERT_EQ(pairs.status, 0) << pairs.output;
  EXPECT_NE(pairs.output.find("fused up to 2 per group on cuda:0"), std::string::npos)
      << pairs.output;
  const json a = results(dir.path() / "apart");
  ASSERT_EQ(a.at("trials").size(), 4u);
  struct Way {
    const char* out;
    std::vector<std::string> groups;
  };
  for (const Way& way : {Way{"auto", {"g001", "g001", "g001", "g001"}},
                         Way{"pairs", {"g001", "g001", "g002", "g002"}}}) {
    const json f = results(dir.path() / way.out);
    ASSERT_EQ(f.at("trials").size(), 4u) << way.out;
    double worst = 0;
    for (size_t i = 0; i < 4; ++i) {
      const json& x = f.at("trials")[i];
      const json& y = a.at("trials")[i];
      EXPECT_EQ(x.at("group"), way.groups[i]) << way.out << " trial " << i;
      EXPECT_EQ(y.at("group"), "");
      worst = std::max(worst, curve_difference(x, y));
    }
    EXPECT_LE(worst, 1e-5) << way.out;
  }
}

TEST(Tune, BadInputIsRefusedBeforeAnyTrial) {
  xo::testing::TempDir dir("tune-bad");
  struct Case {
    std::string args, expected;
  };
  const std::vector<Case> cases = {
      {"--vary learning_rate=0.1", "unknown key 'learning_rate'"},
      {"--vary lr=0.1,-2", "--vary lr=-2"},
      {"--vary lr=1e-4..1e-1:log", "--samples"},
      {"--vary lr=1e-4..1e-1:log --samples 1000000000", "a search takes at most 10000 trials"},
      {"--vary lr=0.1 --objective val_accuracy", "no validation split"},
      {"--vary lr=0.1 --objective accuracy", "--objective 'accuracy'"},
      {"--vary lr=0.1,0.2 --halving --min-epochs 5", "leaves nothing to halve"},
      {"--vary lr=0.1 --fuse some", "expected off, auto or a number of trials per group"},
      {"--vary lr=0.1 --fuse 0", "expected off, auto or a number of trials per group"},
  };
  for (const Case& c : cases) {
    const auto r = run_cli("tune disc-2 --epochs 5 --out out " + c.args, dir.path());
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expected), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir.path() / "out" / "trials")) << c.args;
  }
}

// `sweep --vary` takes the same keys: a numeric key of the spec is the chart's x; a choice that is
// not a number is `tune`'s.
TEST(Tune, SweepTakesTheSameKeysAsTune) {
  xo::testing::TempDir dir("sweep-keys");
  const auto r =
      run_cli("sweep disc-3 --vary dropout.p=0,0.5 --epochs 2 --devices cpu --out out", dir.path());
  if (r.status != 0) {
    // disc-3 has no dropout layer: said so, naming the key.
    EXPECT_NE(r.output.find("--vary dropout.p=0: disc-3 has no dropout layer"), std::string::npos)
        << r.output;
  }
  const auto lr =
      run_cli("sweep disc-3 --vary train.optimizer.lr=0.05,0.1 --epochs 2 --devices cpu --out lr",
              dir.path());
  ASSERT_EQ(lr.status, 0) << lr.output;
  const json j = results(dir.path() / "lr");
  EXPECT_EQ(j.at("sweep").at("axis"), "train.optimizer.lr") << j.at("sweep").dump();
  const auto words = run_cli("sweep disc-3 --vary optimizer=sgd,adam --out words", dir.path());
  EXPECT_EQ(words.status, 2);
  EXPECT_NE(words.output.find("'sgd' is not a number"), std::string::npos) << words.output;
}

// rank 0 hands trials to free ranks: every trial runs exactly once, on the ranks of the job.
class TuneOnRanks : public ::testing::TestWithParam<int> {};

TEST_P(TuneOnRanks, EveryTrialRunsExactlyOnce) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no mpirun: run scripts/setup";
  const int ranks = GetParam();
  xo::testing::TempDir dir("tune-mpi");
  const auto r =
      run_cli(xo::testing::mpi_job(
                  ranks, "tune disc-3 --vary lr=0.02,0.05,0.1,0.2,0.5 --epochs 3 --out out"),
              dir.path());
  if (r.output.find("built without MPI") != std::string::npos) GTEST_SKIP() << "built without MPI";
  ASSERT_EQ(r.status, 0) << r.output;
  const json j = results(dir.path() / "out");
  EXPECT_EQ(j.at("ranks"), ranks);
  std::vector<int> per_rank(static_cast<size_t>(ranks), 0);
  for (const json& t : j.at("trials")) {
    EXPECT_EQ(status_of(t), "finished");
    EXPECT_EQ(runs_of(dir.path() / "out", t.at("id")), 1) << t.at("id");
    ++per_rank.at(t.at("rank").get<size_t>());
  }
  EXPECT_EQ(j.at("trials").size(), 5u);
  // Rank 0 hands the first trials out one per rank: every rank ran at least one.
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_GE(per_rank[static_cast<size_t>(rank)], 1) << rank;
}

INSTANTIATE_TEST_SUITE_P(Mpi, TuneOnRanks, ::testing::Values(2, 3), [](const auto& param_info) {
  return std::to_string(param_info.param) + "_ranks";
});

}  // namespace

namespace xo {
namespace {

// A grid of 2,000 trials (fused 64 to a group) runs whole under the common limit of 1,024 open
// files: a search's open files are bounded whatever its size. Its 2,000 trial specs, written at
// once, once failed at the 380th ("Too many open files"), leaving 2,000 trial folders behind.
TEST(Tune, AGridOfTwoThousandTrialsRunsUnderTheCommonOpenFileLimit) {
  xo::testing::TempDir dir("tune-2000");
  std::string lrs;
  for (int i = 1; i <= 2000; ++i) lrs += fmt::format("{}{:.4f}", i > 1 ? "," : "", 0.001 * i);
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  rlimit common = before;
  common.rlim_cur = std::min<rlim_t>(before.rlim_cur, 1024);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &common), 0);  // inherited by the search and its trials
  const auto r = run_cli("tune disc-2 --vary lr=" + lrs + " --epochs 1 --fuse 64 --quiet --out out",
                         dir.path());
  setrlimit(RLIMIT_NOFILE, &before);
  ASSERT_EQ(r.status, 0) << r.output.substr(0, 2000);
  const json j = results(dir.path() / "out");
  ASSERT_EQ(j.at("trials").size(), 2000u);
  int finished = 0;
  for (const json& t : j.at("trials")) finished += status_of(t) == "finished";
  EXPECT_EQ(finished, 2000);
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

// A fused group that finished, killed before the search recorded it (its trials' result.json on
// disk, the record still saying "running"): started again, the search takes the results back and
// trains nothing again. A retrained trial's objective once moved 30%, and the ranking with it.
TEST(Tune, AFinishedGroupTheSearchDidNotRecordIsTakenBackNotTrainedAgain) {
  xo::testing::TempDir dir("tune-take-back");
  const std::string search = "tune disc-3 --vary lr=0.05,0.1 --epochs 3 --fuse 2 --out out";
  const auto first = run_cli(search, dir.path());
  ASSERT_EQ(first.status, 0) << first.output;
  json record = results(dir.path() / "out");
  std::map<std::string, double> objective;
  for (json& t : record.at("trials")) {
    objective[t.at("id")] = t.at("objective");
    t["status"] = "running";  // as the record stood while the group trained
  }
  std::ofstream(dir.path() / "out" / "results.json", std::ios::trunc) << record.dump(1);
  const auto again = run_cli(search, dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("2 of 2 trials"), std::string::npos) << again.output;
  const json after = results(dir.path() / "out");  // kept: the loop reads into it
  for (const json& t : after.at("trials")) {
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("objective").get<double>(), objective[t.at("id")]) << t.dump();
    EXPECT_EQ(runs_of(dir.path() / "out", t.at("id")), 1) << "trained again: " << t.at("id");
  }
}

// The same under halving: a promoted trial killed after its process wrote the last rung's result,
// before the record had it, is taken back at that rung; before, halving's trials were always
// trained again.
TEST(Tune, AHalvingRungTheSearchDidNotRecordIsTakenBackNotTrainedAgain) {
  xo::testing::TempDir dir("tune-take-back-halving");
  const std::string search =
      "tune disc-3 --vary lr=0.05,0.1,0.2 --epochs 3 --halving --min-epochs 1 --factor 3 "
      "--parallel 1 --out out";
  const auto first = run_cli(search, dir.path());
  ASSERT_EQ(first.status, 0) << first.output;
  json record = results(dir.path() / "out");
  std::string promoted;
  double objective = 0;
  int runs = 0;
  for (json& t : record.at("trials")) {
    if (status_of(t) != "finished") continue;
    // As the record stood while its promotion's job ran: the first rung's alone.
    promoted = t.at("id");
    objective = t.at("objective");
    runs = runs_of(dir.path() / "out", promoted);
    t["status"] = "running";
    t["rung_objective"].erase(t["rung_objective"].size() - 1);
  }
  ASSERT_FALSE(promoted.empty()) << record.dump(1);
  ASSERT_EQ(runs, 2);  // a process for each rung
  std::ofstream(dir.path() / "out" / "results.json", std::ios::trunc) << record.dump(1);
  const auto again = run_cli(search, dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("3 of 3 trials"), std::string::npos) << again.output;
  const json after = results(dir.path() / "out");  // kept: the loop reads into it
  for (const json& t : after.at("trials")) {
    if (t.at("id") != promoted) continue;
    EXPECT_EQ(status_of(t), "finished") << t.dump();
    EXPECT_EQ(t.at("objective").get<double>(), objective) << t.dump();
    EXPECT_EQ(t.at("rung_objective").size(), 2u) << t.dump();
    EXPECT_EQ(runs_of(dir.path() / "out", promoted), runs) << "trained again";
  }
}

}  // namespace
}  // namespace xo

namespace xo {
namespace {

// One trial's newest checkpoint damaged (its group stopped after two checkpoints, at step 40 of
// 1,000: a margin for a loaded machine to notice them before the group ends): that trial
// resumes from the one before, behind its group mate, catches up while the other waits, and both
// end exactly as in a search never stopped; neither is failed. Before, the whole group failed for
// good, the untouched trial with it; then the two trained apart, in other batch shards.
TEST(Tune, ATrialWhoseNewestCheckpointIsDamagedTrainsApartAndNoneFails) {
  xo::testing::TempDir dir("tune-damaged-one");
  const std::string search =
      "tune disc-8 --vary lr=0.02,0.05 --epochs 100 --fuse 2 --checkpoint-every 20steps --out out";
  const std::vector<std::string> args = {"tune",         "disc-8",   "--vary",
                                         "lr=0.02,0.05", "--epochs", "100",
                                         "--fuse",       "2",        "--checkpoint-every",
                                         "20steps",      "--out",    "out"};
  const pid_t pid = xo::testing::start_crossover(dir.path(), args, dir.path() / "first.txt",
                                                 dir.path() / "first.txt");
  const fs::path checkpoints = dir.path() / "out" / "trials" / "t02" / "checkpoints";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && checkpoint_jsons(checkpoints).size() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::vector<fs::path> kept = checkpoint_jsons(checkpoints);
  ASSERT_GE(kept.size(), 2u) << xo::read_file(dir.path() / "first.txt");
  std::ofstream(kept.back(), std::ios::trunc) << "{\"damaged\": true}";  // its newest
  const auto again = run_cli(search, dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  const json after = results(dir.path() / "out");  // kept: the loop reads into it
  for (const json& t : after.at("trials")) EXPECT_EQ(status_of(t), "finished") << t.dump();
  std::string logs;
  for (const auto& g : fs::directory_iterator(dir.path() / "out" / "groups"))
    logs += xo::read_file(g.path());
  EXPECT_NE(logs.find("it waits there while the trials behind catch up"), std::string::npos)
      << logs;
  const auto whole = run_cli(
      "tune disc-8 --vary lr=0.02,0.05 --epochs 100 --fuse 2 --out never-stopped", dir.path());
  ASSERT_EQ(whole.status, 0) << whole.output;
  const json never = results(dir.path() / "never-stopped");
  ASSERT_EQ(never.at("trials").size(), after.at("trials").size());
  for (size_t i = 0; i < never.at("trials").size(); ++i) {
    const json& t = after.at("trials")[i];
    EXPECT_EQ(t.at("objective").get<double>(), never.at("trials")[i].at("objective").get<double>())
        << t.dump();
    EXPECT_EQ(t.value("resumed_differently", ""), "") << t.dump();
  }
}

}  // namespace
}  // namespace xo

// crossover across hosts, each a simulated one (scripts/sim-hosts: its own network and UTS
// namespaces, a veth link to a switch, a tbf rate limit): ranks on two hosts at 1 Gbit/s train as
// one process does and record where they ran and what the scale-out model predicted for the link;
// a host killed or cut off ends the job within seconds naming it; a run goes on from its
// checkpoint on fewer hosts and on more; a search places trials on every host. Skipped, saying
// why, where namespaces cannot be made (not root, no iproute2).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file.h"
#include "distributed/mpi.h"
#include "io/safetensors.h"
#include "support/cli.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using xo::testing::run_cli;

const std::string kSimHosts = std::string(CROSSOVER_SOURCE_DIR) + "/scripts/sim-hosts";

// What a shell command printed, and its exit status.
xo::testing::CliResult shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Why simulated hosts cannot be made here ("" where they can).
std::string cannot_simulate() {
  if (!xo::mpi::built_with_mpi()) return "this crossover was built without MPI";
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) return "no mpirun: run scripts/setup";
  const auto check = shell(kSimHosts + " --check");
  return check.status == 0 ? "" : check.output;
}

#define SKIP_WITHOUT_HOSTS()                                      \
  do {                                                            \
    const std::string why = cannot_simulate();                    \
    if (!why.empty()) GTEST_SKIP() << "simulated hosts: " << why; \
  } while (0)

// This test process's namespaces' name: xosim<pid> (sim-hosts removes those of dead pids only).
std::string hosts_name() { return fmt::format("xosim{}", getpid()); }

// run_cli's arguments for `sim-hosts HOSTS OPTIONS -- crossover ARGS`.
std::string hosts_job(int hosts, const std::string& options, const std::string& args) {
  return fmt::format("--version >/dev/null && {} {} --name {} {} -- {} {}", kSimHosts, hosts,
                     hosts_name(), options, CROSSOVER_BINARY, args);
}

// The namespaces of this test's hosts still there.
std::string namespaces_left() {
  return shell(fmt::format("ip netns list | grep -E '^{}-' || true", hosts_name())).output;
}

double relative(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-6});
}

// The largest relative difference between two runs' per-epoch losses and final parameters
// (parameters against each tensor's largest, absolute below 1e-3).
double worst_difference(const fs::path& dir, const std::string& a, const std::string& b) {
  const json ja = json::parse(xo::read_file(dir / (a + ".json")));
  const json jb = json::parse(xo::read_file(dir / (b + ".json")));
  EXPECT_EQ(ja.at("epochs").size(), jb.at("epochs").size());
  double worst = 0;
  for (size_t e = 0; e < std::min(ja.at("epochs").size(), jb.at("epochs").size()); ++e) {
    worst = std::max(worst, relative(ja.at("epochs")[e].at("loss").get<double>(),
                                     jb.at("epochs")[e].at("loss").get<double>()));
  }
  const auto pa = xo::load_safetensors(dir / (a + ".safetensors"));
  const auto pb = xo::load_safetensors(dir / (b + ".safetensors"));
  EXPECT_EQ(pa.size(), pb.size());
  for (size_t t = 0; t < std::min(pa.size(), pb.size()); ++t) {
    double scale = 1e-3;
    for (const float v : pa[t].data) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < std::min(pa[t].data.size(), pb[t].data.size()); ++i) {
      worst = std::max(worst, std::abs(pa[t].data[i] - pb[t].data[i]) / scale);
    }
  }
  return worst;
}

const char* const kDisc8 = "train disc-8 --threads 1 --epochs 10 --checkpoint-every off ";

// Two hosts, one rank each, at 1 Gbit/s: the job's ranks sum over the network (never shared
// memory), end within 1e-5 of one process, and record the hosts, the communicate phase and the
// ring model's prediction over the link measured between them.
TEST(Hosts, TwoHostsAtOneGbitTrainAsOneProcess) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-two");
  const auto one =
      run_cli(std::string(kDisc8) + "--json one.json --save one.safetensors", dir.path());
  ASSERT_EQ(one.status, 0) << one.output;
  const auto two = run_cli(
      hosts_job(2, "--rate 1gbit", std::string(kDisc8) + "--json two.json --save two.safetensors"),
      dir.path());
  ASSERT_EQ(two.status, 0) << two.output;
  EXPECT_EQ(namespaces_left(), "");
  const double worst = worst_difference(dir.path(), "one", "two");
  EXPECT_LE(worst, 1e-5);
  std::printf("2 hosts against one process: worst relative difference %.3g\n", worst);
  const json j = json::parse(xo::read_file(dir.path() / "two.json"));
  EXPECT_EQ(j.at("ranks"), 2);
  const json& dp = j.at("data_parallel");
  EXPECT_EQ(dp.at("hosts"), 2);
  EXPECT_EQ(dp.at("ranks_per_host"), 1);
  EXPECT_EQ(dp.at("reduce"), "after-backward");  // auto across hosts
  EXPECT_GT(dp.at("communicate_ms").get<double>(), 0);
  EXPECT_GT(dp.at("predicted_communicate_ms").get<double>(), 0);
  EXPECT_GT(dp.at("link_gbs").get<double>(), 0);
  EXPECT_NE(two.output.find("2 ranks on 2 hosts (1 rank each)"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("the ring model over the link measured between them"),
            std::string::npos)
      << two.output;
  std::printf("communicate %.3f ms a step, predicted %.3f ms\n",
              dp.at("communicate_ms").get<double>(),
              dp.at("predicted_communicate_ms").get<double>());
}

// Two hosts of two ranks each, equal to one process: by default each host's ranks share memory
// and each rank sums its part with the other host's rank of its local rank (shared across
// hosts); or every rank's gradients summed by MPI (after-backward). Three ranks on two hosts
// cannot share so, and are told what can.
TEST(Hosts, TwoHostsOfTwoRanksTrainAsOneProcess) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-mixed");
  const std::string run = "train disc-4 --threads 1 --epochs 5 --checkpoint-every off ";
  const auto one = run_cli(run + "--json one.json --save one.safetensors", dir.path());
  ASSERT_EQ(one.status, 0) << one.output;
  for (const std::string mode : {"auto", "after-backward"}) {
    const auto four = run_cli(hosts_job(2, "--ranks-per-host 2",
                                        run + "--reduce " + mode + " --json " + mode +
                                            ".json --save " + mode + ".safetensors"),
                              dir.path());
    ASSERT_EQ(four.status, 0) << four.output;
    EXPECT_LE(worst_difference(dir.path(), "one", mode), 1e-5) << mode;
    const json dp = json::parse(xo::read_file(dir.path() / (mode + ".json"))).at("data_parallel");
    EXPECT_EQ(dp.at("hosts"), 2);
    EXPECT_EQ(dp.at("ranks_per_host"), 2);
    EXPECT_EQ(dp.at("reduce"), mode == "auto" ? "shared" : mode);
    if (mode == "auto") {
      EXPECT_NE(four.output.find("in each host's shared memory, then across the hosts"),
                std::string::npos)
          << four.output;
    }
  }
  const auto uneven = run_cli(
      hosts_job(2, "--ranks-per-host 2 --mpirun-arg -np --mpirun-arg 3", run + "--reduce shared"),
      dir.path());
  EXPECT_NE(uneven.status, 0);
  EXPECT_NE(uneven.output.find("--reduce shared: the 3 ranks of this job are on 2 machines, not "
                               "as many on each"),
            std::string::npos)
      << uneven.output;
  EXPECT_EQ(namespaces_left(), "");
}

// A host lost while the job trains, killed outright, its rank alone killed, or its link cut:
// every rank ends within seconds (OpenMPI's daemons watch each other; sim-hosts sets their
// keep-alive to 1 s x 3), and the message names the host.
class HostLost : public ::testing::TestWithParam<std::string> {};

TEST_P(HostLost, EndsTheJobWithinSecondsNamingTheHost) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-lost-" + GetParam());
  const pid_t job = xo::testing::start_program(
      dir.path(), kSimHosts,
      {"2", "--name", hosts_name(), "--", CROSSOVER_BINARY, "train", "disc-8", "--threads", "1",
       "--epochs", "1000000", "--checkpoint-every", "20steps", "--checkpoint-dir", "ck"},
      dir.path() / "job.log", dir.path() / "job.log");
  // the folder is made (and locked) at the start: wait for a checkpoint in it
  for (int i = 0; i < 6000 && !xo::newest_checkpoint(dir.path() / "ck"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (waitpid(job, nullptr, WNOHANG) == job) break;
  }
  ASSERT_TRUE(xo::newest_checkpoint(dir.path() / "ck")) << xo::read_file(dir.path() / "job.log");
  const std::string host = hosts_name() + "-h1";
  const auto lost = std::chrono::steady_clock::now();
  if (GetParam() == "killed") {
    shell("ip netns pids " + host + " | xargs -r kill -KILL");
  } else if (GetParam() == "rank_killed") {  // the rank alone, its host's daemon left running
    shell("for p in $(ip netns pids " + host +
          "); do [ \"$(cat /proc/$p/comm)\" = crossover ] && kill -KILL $p; done; true");
  } else {
    ASSERT_EQ(shell("ip -n " + hosts_name() + "-sw link set h1 down").status, 0);
  }
  int status = 0;
  while (waitpid(job, &status, WNOHANG) != job &&
         std::chrono::steady_clock::now() - lost < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lost).count();
  if (seconds >= 60) {
    kill(job, SIGTERM);
    waitpid(job, &status, 0);
  }
  const std::string log = xo::read_file(dir.path() / "job.log");
  // Killed: about 2 s; cut off: about 5-9 s (the keep-alive, then mpirun's own teardown).
  EXPECT_LT(seconds, GetParam() == "cut_off" ? 15 : 10) << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << log;
  EXPECT_NE(log.find(host), std::string::npos) << log;
  EXPECT_EQ(namespaces_left(), "");
  std::printf("host %s: the job ended %.1f s after\n", GetParam().c_str(), seconds);
}

INSTANTIATE_TEST_SUITE_P(Hosts, HostLost, ::testing::Values("killed", "rank_killed", "cut_off"));

// A run checkpointed on two hosts goes on on one process, then on three hosts: the same global
// batches split anew, so it ends as the uninterrupted run does to f32 rounding (1e-5 here).
TEST(Hosts, ARunGoesOnOnFewerHostsAndOnMore) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-resume");
  const std::string run = "train disc-8 --threads 1 --epochs 6 ";
  const auto whole = run_cli(
      run + "--checkpoint-every off --json whole.json --save whole.safetensors", dir.path());
  ASSERT_EQ(whole.status, 0) << whole.output;
  const std::string ck = "--checkpoint-dir ck --checkpoint-every 5steps ";
  const auto first = run_cli(hosts_job(2, "", run + ck + "--pause-after 2"), dir.path());
  ASSERT_EQ(first.status, 0) << first.output;
  const auto second = run_cli(run + ck + "--resume --pause-after 4", dir.path());
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("the checkpoint was written by 2 ranks, and this run has one "
                               "process"),
            std::string::npos)
      << second.output;
  const auto third = run_cli(
      hosts_job(3, "", run + ck + "--resume --json end.json --save end.safetensors"), dir.path());
  ASSERT_EQ(third.status, 0) << third.output;
  EXPECT_NE(third.output.find("written by one process, and this run has 3 ranks"),
            std::string::npos)
      << third.output;
  const double worst = worst_difference(dir.path(), "whole", "end");
  EXPECT_LE(worst, 1e-5);
  std::printf(
      "2 hosts, then 1 process, then 3 hosts against one uninterrupted process: worst "
      "relative difference %.3g\n",
      worst);
  EXPECT_EQ(namespaces_left(), "");
}

// A search across two hosts runs trials on both, and records each trial's host.
TEST(Hosts, ASearchOnTwoHostsUsesBoth) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-tune");
  const auto search = run_cli(
      hosts_job(2, "",
                "tune disc-4 --vary train.optimizer.lr=0.02,0.05,0.1,0.2 --epochs 3 --parallel 1 "
                "--out search -q"),
      dir.path());
  ASSERT_EQ(search.status, 0) << search.output;
  const json r = json::parse(xo::read_file(dir.path() / "search" / "results.json"));
  std::set<std::string> hosts;
  for (const json& t : r.at("trials")) {
    EXPECT_EQ(t.at("status"), "finished") << t.dump();
    hosts.insert(t.at("host").get<std::string>());
  }
  EXPECT_EQ(hosts, (std::set<std::string>{hosts_name() + "-h0", hosts_name() + "-h1"}));
  EXPECT_EQ(namespaces_left(), "");
}

// A host lost mid-search ends the MPI job (OpenMPI cannot go on without it), keeping every
// finished trial; the same command on the hosts left goes on, and the trial the lost host was
// running resumes from its last checkpoint.
TEST(Hosts, ASearchThatLostAHostGoesOnOnTheHostsLeft) {
  SKIP_WITHOUT_HOSTS();
  xo::testing::TempDir dir("hosts-tune-lost");
  const std::string tune =
      "tune disc-8 --vary train.optimizer.lr=0.02,0.05,0.1,0.2 --epochs 300 --parallel 1 "
      "--checkpoint-every 50steps --threads 1 --out search";
  std::vector<std::string> args{"2", "--name", hosts_name(), "--", CROSSOVER_BINARY};
  std::istringstream words(tune);
  for (std::string w; words >> w;) args.push_back(w);
  const pid_t job = xo::testing::start_program(dir.path(), kSimHosts, args, dir.path() / "job.log",
                                               dir.path() / "job.log");
  const std::string lost_host = hosts_name() + "-h1";
  std::string lost_trial;
  for (int i = 0; i < 3000 && lost_trial.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (waitpid(job, nullptr, WNOHANG) == job) break;
    try {
      const json r = json::parse(xo::read_file(dir.path() / "search" / "results.json"));
      for (const json& t : r.at("trials")) {
        const fs::path ck =
            dir.path() / "search" / "trials" / t.at("id").get<std::string>() / "checkpoints";
        if (t.at("status") != "running" || t.value("host", "") != lost_host) continue;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(ck, ec)) {
          if (e.path().extension() == ".json") lost_trial = t.at("id").get<std::string>();
        }
      }
    } catch (const std::exception&) {  // not written yet, or being replaced
    }
  }
  ASSERT_FALSE(lost_trial.empty()) << xo::read_file(dir.path() / "job.log");
  shell("ip netns pids " + lost_host + " | xargs -r kill -KILL");
  int status = 0;
  waitpid(job, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  EXPECT_EQ(namespaces_left(), "");
  const auto again = run_cli(tune + " -q", dir.path());
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("trials in search are kept; the search goes on"), std::string::npos)
      << again.output;
  const json r = json::parse(xo::read_file(dir.path() / "search" / "results.json"));
  for (const json& t : r.at("trials")) EXPECT_EQ(t.at("status"), "finished") << t.dump();
  const std::string log = xo::read_file(dir.path() / "search" / "trials" / lost_trial / "log.txt");
  EXPECT_NE(log.find("] from its checkpoint in search/trials/" + lost_trial), std::string::npos)
      << log;
}

// `sim-hosts --clean` removes the work folder (/tmp/xosimPID.XXXXXX) of a run killed with SIGKILL,
// as it removes its namespaces; a live run's it leaves.
TEST(Hosts, CleanRemovesTheWorkFolderOfARunKilledWithoutCleaning) {
  SKIP_WITHOUT_HOSTS();
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const fs::path dead = fmt::format("/tmp/xosim{}.abcdef", gone);
  const fs::path live = fmt::format("/tmp/xosim{}.ghijkl", getpid());
  fs::create_directories(dead / "h0");
  fs::create_directories(live);
  const auto clean = shell(kSimHosts + " --clean");
  EXPECT_EQ(clean.status, 0) << clean.output;
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  fs::remove_all(dead);
  fs::remove_all(live);
}

TEST(Hosts, SimHostsSaysWhatItNeeds) {
  const auto bad = shell(kSimHosts + " 0 -- true");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("the number of hosts must be a whole number from 1 to 200"),
            std::string::npos)
      << bad.output;
  const auto rate = shell(kSimHosts + " 2 --rate fast -- true");
  EXPECT_EQ(rate.status, 2);
  EXPECT_NE(rate.output.find("--rate fast: expected a number and kbit, mbit or gbit"),
            std::string::npos)
      << rate.output;
  const auto no_command = shell(kSimHosts + " 2 --rate 1gbit");
  EXPECT_EQ(no_command.status, 2);
  EXPECT_NE(no_command.output.find("no COMMAND"), std::string::npos) << no_command.output;
  // Not root: said, with the way out, and exit 77 (what the tests above skip on).
  if (std::system("command -v setpriv >/dev/null 2>&1") == 0 && getuid() == 0) {
    const auto unprivileged =
        shell("setpriv --reuid=65534 --regid=65534 --clear-groups " + kSimHosts + " --check");
    EXPECT_EQ(unprivileged.status, 77) << unprivileged.output;
    EXPECT_NE(unprivileged.output.find("cannot simulate hosts here: needs root"), std::string::npos)
        << unprivileged.output;
  }
}

}  // namespace

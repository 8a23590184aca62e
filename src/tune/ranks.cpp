#include "tune/ranks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "core/interrupt.h"
#include "distributed/mpi.h"
#include "distributed/process.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

// MPI tags: a job for a worker rank, its end, and the end of the search.
constexpr int kTagJob = 1, kTagDone = 2, kTagStop = 3;
// How often a waiting worker looks for messages and its trial's end.
constexpr auto kPoll = std::chrono::milliseconds(20);

// The arguments of one `crossover train` process, as one text for MPI (NUL-separated).
std::string join_args(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& a : args) {
    text += a;
    text += '\0';
  }
  return text;
}
std::vector<std::string> split_args(const std::string& text) {
  std::vector<std::string> args;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\0', start);
    args.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

// This rank's slot, as a reply to rank 0: "ok", its device and threads, or why it cannot see
// --out (the token rank 0 wrote there).
std::vector<std::string> rank_slot(const mpi::World& world, const std::vector<std::string>& asked,
                                   int threads, const std::string& token, const fs::path& out) {
  std::string seen;
  try {
    seen = read_file(out / ".ranks-token");
  } catch (const UserError&) {
  }
  if (seen != token) {
    return {"error",
            fmt::format("{} on {} does not see {}", world.rank(), world.host(), out.string())};
  }
  const DeviceList list = list_devices();
  std::vector<std::string> devices = asked.empty() ? list.available : asked;
  std::vector<std::string> gpus;
  for (const std::string& d : list.available) {
    if (device_kind_of(d) == DeviceKind::Gpu) gpus.push_back(d);
  }
  const bool want_gpu = std::any_of(devices.begin(), devices.end(), [](const std::string& d) {
    return d.rfind("cuda", 0) == 0 || d == "auto";
  });
  if (want_gpu && !gpus.empty()) {
    return {"ok", gpus[static_cast<size_t>(world.local_rank()) % gpus.size()], "0", world.host()};
  }
  return {"ok", "cpu", std::to_string(threads_per_rank(threads, world.local_size())), world.host()};
}

}  // namespace

std::vector<Slot> rank_slots(const mpi::World& world, const fs::path& out,
                             const std::vector<std::string>& devices, int threads) {
  const std::string token =
      fmt::format("{}-{}", getpid(), std::chrono::steady_clock::now().time_since_epoch().count());
  replace_file_atomic(out / ".ranks-token", token);
  world.broadcast(join_args({fs::absolute(out).string(), token}));
  const std::vector<std::string> replies =
      world.gather(join_args(rank_slot(world, devices, threads, token, fs::absolute(out))));
  fs::remove(out / ".ranks-token");
  std::vector<Slot> slots;
  std::vector<std::string> unseen;
  for (size_t r = 0; r < replies.size(); ++r) {
    const std::vector<std::string> reply = split_args(replies[r]);
    if (reply.size() != 4 || reply[0] != "ok") {
      unseen.push_back(fmt::format("rank {} ({})", r, reply.empty() ? "no reply" : reply.back()));
      continue;
    }
    slots.push_back({static_cast<int>(r), reply[1], std::stoi(reply[2]), reply[3]});
  }
  if (!unseen.empty()) {
    throw UserError(fmt::format(
        "--out {} must be a folder every rank sees (a shared file system, as a cluster's home): "
        "{}",
        fs::absolute(out).string(), fmt::join(unseen, "; ")));
  }
  return slots;
}

int run_trial_worker(const mpi::World& world, const std::vector<std::string>& devices,
                     int threads) {
  const std::vector<std::string> start = split_args(world.broadcast(""));
  world.gather(join_args(rank_slot(world, devices, threads, start.at(1), start.at(0))));
  pid_t child = -1;
  bool told = false;  // the running trial was asked to stop
  while (true) {
    if (auto stop = world.try_receive(kTagStop)) {
      if (stop->second == "end") break;
      if (child > 0) kill(child, SIGINT);  // "interrupt": the trial saves its checkpoint
    }
    if (stop_requested() && child > 0 && !told) {
      kill(child, SIGINT);
      told = true;
    }
    if (child < 0) {
      if (auto job = world.try_receive(kTagJob)) {
        const std::vector<std::string> args = split_args(job->second);
        // The trial's log beside its spec (args[1]), in its folder.
        child = spawn(args, fs::path(args.at(1)).parent_path() / "log.txt");
        told = false;
        continue;
      }
    } else {
      int status = 0;
      if (waitpid(child, &status, WNOHANG) == child) {
        world.send(0, kTagDone, std::to_string(exit_status(status)));
        child = -1;
        continue;
      }
    }
    std::this_thread::sleep_for(kPoll);
  }
  return 0;
}

void send_trial(const mpi::World& world, int rank, const std::vector<std::string>& args) {
  world.send(rank, kTagJob, join_args(args));
}

std::optional<std::pair<int, int>> receive_ended(const mpi::World& world) {
  const auto message = world.try_receive(kTagDone);
  if (!message) return std::nullopt;
  return std::pair<int, int>{message->first, std::stoi(message->second)};
}

void interrupt_workers(const mpi::World& world) {
  for (int r = 1; r < world.size(); ++r) world.send(r, kTagStop, "interrupt");
}

void end_workers(const mpi::World& world) {
  for (int r = 1; r < world.size(); ++r) world.send(r, kTagStop, "end");
}

}  // namespace xo

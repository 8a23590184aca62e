#include "tune/parallel.h"

#include <fmt/format.h>
#include <sys/wait.h>

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"
#include "core/file.h"
#include "dist/process.h"
#include "tune/trial_process.h"

namespace xo {
namespace {

namespace fs = std::filesystem;

// `k` processes at once on `device`, `threads` each: their samples per second, each and summed.
ParallelOption measure(const ParallelSettings& s, const std::string& device, int k, int threads) {
  ParallelOption option{k, threads, 0, {}};
  own_folder(s.dir);
  const fs::path log = s.dir / "log.txt";
  remove_unless_regular(log);
  std::vector<pid_t> pids;
  std::vector<fs::path> results;
  for (int i = 0; i < k; ++i) {
    const fs::path json = s.dir / fmt::format("{}-k{}-{}.json", device, k, i);
    fs::remove(json);
    results.push_back(json);
    pids.push_back(spawn(probe_args(s.spec, device, threads, s.steps, json), log));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    if (exit_status(status) != 0) {
      throw UserError(fmt::format("measuring {} trials at once on {}: {} (see {})", k, device,
                                  failure_text(log, exit_status(status)), log.string()));
    }
    const TrainResult r = s.read_result(read_file(results[i]), results[i].string());
    option.per_trial.push_back(r.samples_per_second);
    option.samples_per_second += r.samples_per_second;
  }
  return option;
}

// Every count from 1, doubling, up to the cores on a CPU and 4 on a GPU; the fastest taken.
ParallelChoice measure_choice(const ParallelSettings& s, const std::string& device) {
  ParallelChoice c{device, 1, true, {}};
  const bool cpu = device_kind_of(device) == DeviceKind::Cpu;
  const int most = cpu ? s.cores : 4;
  for (int k = 1; k <= most; k *= 2) {
    if (s.measuring) s.measuring(k, device);
    c.options.push_back(measure(s, device, k, cpu ? trial_threads(s.threads, s.cores, k) : 0));
  }
  const auto best = std::max_element(c.options.begin(), c.options.end(),
                                     [](const ParallelOption& a, const ParallelOption& b) {
                                       return a.samples_per_second < b.samples_per_second;
                                     });
  c.k = best->k;
  return c;
}

}  // namespace

int trial_threads(int threads, int cores, int k) {
  return threads > 0 ? threads : std::max(1, cores / k);
}

void choose_parallel(std::vector<ParallelChoice>& choices, const std::vector<std::string>& devices,
                     const ParallelSettings& s) {
  // Only this process's devices: a search stopped under MPI recorded its ranks' slots, which a
  // search going on without a launcher (or on other hosts) does not have.
  std::vector<ParallelChoice> chosen;
  for (const std::string& d : devices) {
    const std::string id = make_backend(parse_device(d, 0))->info().id;
    const auto known = std::find_if(choices.begin(), choices.end(),
                                    [&](const ParallelChoice& c) { return c.device == id; });
    const int fused = device_kind_of(id) == DeviceKind::Cpu ? s.fused_cpu : s.fused_gpu;
    if (s.parallel > 0) {
      chosen.push_back({id, s.parallel, false, {}, fused});
    } else if (fused > 0) {
      chosen.push_back({id, 1, false, {}, fused});
    } else if (known != choices.end() && known->measured) {
      chosen.push_back(*known);  // measured before a restart
    } else {
      chosen.push_back(measure_choice(s, id));
    }
  }
  choices = std::move(chosen);
}

}  // namespace xo
